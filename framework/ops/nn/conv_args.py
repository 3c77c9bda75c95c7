"""Shared argument parsing and geometry of convolution and pooling ops
(Caffe2's ConvPoolOpBase).

Spellings accepted, as Caffe2: ``kernel`` | ``kernel_h``+``kernel_w`` |
``kernels``; ``stride`` | ``stride_h``+``stride_w`` | ``strides``; ``pad`` |
``pad_t``+``pad_l``+``pad_b``+``pad_r`` | ``pads`` (all heads, then all
tails); ``dilation`` | ``dilation_h``+``dilation_w`` | ``dilations``;
``group``; ``order`` (NCHW, NHWC); ``legacy_pad`` (0 NOTSET, 1 VALID, 2 SAME,
3 CAFFE_LEGACY_POOLING); ``global_pooling``.

The scalar spellings (``kernel``, ``stride``...) apply to every spatial
dimension (Caffe2 makes them 2-D; here they also serve 1-D and 3-D inputs).
Output sizes follow Caffe2's ``ComputeSizeAndPad`` exactly; see
``compute_size_and_pad``.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, NamedTuple, Sequence

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.kernels.geometry import Geometry, window_view  # noqa: F401  (the ops' names for the kernels' geometry)
from framework.memory.allocator import check_elements
from framework.ops.operator import Operator
from framework.ops.schema import BOOL, INT, INTS, STRING, Arg

NOTSET, VALID, SAME, CAFFE_LEGACY_POOLING = 0, 1, 2, 3
LEGACY_PAD_NAMES = {0: "NOTSET", 1: "VALID", 2: "SAME", 3: "CAFFE_LEGACY_POOLING"}


def conv_pool_args(*, group: bool = True, dilation: bool = True) -> list[Arg]:
    """The ConvPoolOpBase arguments, for ``register_op(args=...)``."""
    out = [
        Arg("kernel", INT, 0, "kernel size in every spatial dimension"),
        Arg("kernel_h", INT, 0, "kernel height (with kernel_w)"),
        Arg("kernel_w", INT, 0, "kernel width (with kernel_h)"),
        Arg("kernels", INTS, [], "kernel size per spatial dimension"),
        Arg("stride", INT, 1, "stride in every spatial dimension"),
        Arg("stride_h", INT, 1, "stride along height (with stride_w)"),
        Arg("stride_w", INT, 1, "stride along width (with stride_h)"),
        Arg("strides", INTS, [], "stride per spatial dimension"),
        Arg("pad", INT, 0, "padding at both ends of every spatial dimension"),
        Arg("pad_t", INT, 0, "top padding (with pad_l, pad_b, pad_r)"),
        Arg("pad_l", INT, 0, "left padding"),
        Arg("pad_b", INT, 0, "bottom padding"),
        Arg("pad_r", INT, 0, "right padding"),
        Arg("pads", INTS, [], "all head pads, then all tail pads ([t, l, b, r] in 2-D)"),
        Arg("order", STRING, "NCHW", "storage order: NCHW or NHWC"),
        Arg("legacy_pad", INT, NOTSET, "0 NOTSET, 1 VALID, 2 SAME, 3 CAFFE_LEGACY_POOLING"),
        Arg("global_pooling", BOOL, False, "pool over the whole spatial extent"),
    ]
    if dilation:
        out += [
            Arg("dilation", INT, 1, "dilation in every spatial dimension"),
            Arg("dilation_h", INT, 1, "dilation along height (with dilation_w)"),
            Arg("dilation_w", INT, 1, "dilation along width (with dilation_h)"),
            Arg("dilations", INTS, [], "dilation per spatial dimension"),
        ]
    if group:
        out.append(Arg("group", INT, 1, "number of channel groups"))
    return out


class ConvPoolSpec(NamedTuple):
    """Parsed arguments. A field is a tuple (fixed rank) or an int (scalar, any rank)."""

    kernel: Any
    stride: Any
    dilation: Any
    pads: Any  # tuple of 2*rank (heads then tails) or int
    legacy_pad: int
    global_pooling: bool
    group: int
    order: str
    rank: int | None  # fixed spatial rank, if the arguments or the op type fix it


def _pick(args: Any, where: str, scalar: str, hw: Sequence[str], plural: str, default: int) -> Any:
    if args.has(plural):
        return tuple(getattr(args, plural))
    if args.has(scalar):
        return getattr(args, scalar)
    given = [args.has(n) for n in hw]
    if all(given):
        return tuple(getattr(args, n) for n in hw)
    if any(given):
        missing = [n for n, g in zip(hw, given) if not g]
        raise ArgumentError(
            f"{where}: {', '.join(n for n, g in zip(hw, given) if g)} given without {', '.join(missing)}"
        )
    return None if default is None else default


def rank_from_type(op_type: str) -> int | None:
    m = re.search(r"([123])D", op_type)
    return int(m.group(1)) if m else None


def parse_conv_pool(
    args: Any, where: str, op_type: str, *, need_kernel: bool = True, negative_pads: bool = False
) -> ConvPoolSpec:
    """Parse and check ConvPoolOpBase arguments; ArgumentError naming the op on bad values.
    ``negative_pads``: pads below 0 are allowed (PadImage crops with them, as Caffe2)."""
    legacy = args.legacy_pad
    if legacy not in LEGACY_PAD_NAMES:
        raise ArgumentError(
            f"{where}: legacy_pad must be 0..3 (NOTSET, VALID, SAME, CAFFE_LEGACY_POOLING), got {legacy}"
        )
    explicit_pad = any(args.has(n) for n in ("pad", "pads", "pad_t", "pad_l", "pad_b", "pad_r"))
    if legacy in (VALID, SAME) and explicit_pad:
        raise ArgumentError(
            f"{where}: legacy_pad {LEGACY_PAD_NAMES[legacy]} computes the padding itself; "
            "do not give pad/pads/pad_t/pad_l/pad_b/pad_r with it"
        )
    kernel = _pick(args, where, "kernel", ("kernel_h", "kernel_w"), "kernels", None)
    stride = _pick(args, where, "stride", ("stride_h", "stride_w"), "strides", 1)
    if hasattr(args, "dilation"):
        dilation = _pick(args, where, "dilation", ("dilation_h", "dilation_w"), "dilations", 1)
    else:
        dilation = 1
    if args.has("pads"):
        pads = tuple(args.pads)
        if len(pads) % 2:
            raise ArgumentError(f"{where}: pads must hold all head pads then all tail pads (even length), got {pads}")
    elif args.has("pad"):
        pads = args.pad
    else:
        names = ("pad_t", "pad_l", "pad_b", "pad_r")
        given = [args.has(n) for n in names]
        if all(given):
            pads = (args.pad_t, args.pad_l, args.pad_b, args.pad_r)
        elif any(given):
            raise ArgumentError(f"{where}: give all of pad_t, pad_l, pad_b, pad_r (or pad / pads)")
        else:
            pads = 0
    order = args.order.upper() if isinstance(args.order, str) else args.order
    if order not in ("NCHW", "NHWC"):
        raise ArgumentError(f"{where}: order must be NCHW or NHWC, got {args.order!r}")
    group = getattr(args, "group", 1)
    if group < 1:
        raise ArgumentError(f"{where}: group must be >= 1, got {group}")
    glob = bool(getattr(args, "global_pooling", False))

    ranks = {}
    for name, v in (("kernel", kernel), ("stride", stride), ("dilation", dilation)):
        if isinstance(v, tuple):
            ranks[name] = len(v)
    if isinstance(pads, tuple):
        ranks["pads"] = len(pads) // 2
    t = rank_from_type(op_type)
    if t is not None:
        ranks[op_type] = t
    if len(set(ranks.values())) > 1:
        raise ArgumentError(f"{where}: arguments disagree on the number of spatial dimensions: {ranks}")
    rank = next(iter(ranks.values())) if ranks else None

    if glob:
        if pads not in (0,) and any(pads if isinstance(pads, tuple) else (pads,)):
            raise ArgumentError(f"{where}: with global_pooling, pad, dilation and stride must not be set")
        for v in (stride, dilation):
            if any(x != 1 for x in (v if isinstance(v, tuple) else (v,))):
                raise ArgumentError(f"{where}: with global_pooling, pad, dilation and stride must not be set")
    elif need_kernel:
        if kernel is None or any(k == 0 for k in (kernel if isinstance(kernel, tuple) else (kernel,))):
            raise ArgumentError(
                f"{where}: you need to set the kernel size explicitly (kernel, kernel_h+kernel_w or kernels)"
            )
    pad_lo = None if negative_pads else 0
    checks = (("kernel", kernel, 1), ("stride", stride, 1), ("dilation", dilation, 1), ("pad", pads, pad_lo))
    for name, v, lo in checks:
        vals = () if v is None else (v if isinstance(v, tuple) else (v,))
        if lo is not None and any(x < lo for x in vals) and not (glob and name == "kernel"):
            raise ArgumentError(f"{where}: {name} values must be >= {lo}, got {list(vals)}")
    # group with dilation: refused by Caffe2's 2018 ConvPoolOpBase, allowed since on the CPU (only old
    # cuDNN versions kept the restriction)
    return ConvPoolSpec(kernel, stride, dilation, pads, legacy, glob, group, order, rank)


def _expand(v: Any, rank: int, name: str, where: str) -> tuple[int, ...]:
    if isinstance(v, tuple):
        if len(v) != rank:
            raise ShapeError(f"{where}: {name} has {len(v)} values but the input has {rank} spatial dimensions")
        return v
    return (v,) * rank


def compute_size_and_pad(
    in_size: int, stride: int, kernel: int, dilation: int, legacy: int, head: int, tail: int
) -> tuple[int, int, int]:
    """(pad_head, pad_tail, out_size) exactly as Caffe2's ConvPoolOpBase::ComputeSizeAndPad.

    NOTSET: out = floor((in + head + tail - dkernel) / stride) + 1.
    VALID: no padding. SAME: TF-style, the extra pad on the tail (dilation must be 1).
    CAFFE_LEGACY_POOLING: Caffe's ceil mode; only the head pad is used, the tail pad
    is recomputed to fit the output size.
    """
    dk = dilation * (kernel - 1) + 1
    if legacy == NOTSET:
        if in_size + head + tail < dk:
            raise ShapeError(f"input size {in_size} with pads ({head}, {tail}) is smaller than the kernel extent {dk}")
        return head, tail, (in_size + head + tail - dk) // stride + 1
    if legacy == VALID:
        if in_size < dk:
            raise ShapeError(f"input size {in_size} is smaller than the kernel extent {dk} (legacy_pad VALID)")
        return 0, 0, (in_size - dk) // stride + 1
    if legacy == SAME:
        if dilation != 1:
            raise ShapeError("dilation is not supported with legacy_pad SAME")
        target = (in_size + stride - 1) // stride
        needed = (target - 1) * stride + kernel - in_size
        head = int(needed / 2)  # C++ division truncates toward zero
        tail = needed - head
        return head, tail, _cdiv(in_size + needed - dk, stride) + 1
    # CAFFE_LEGACY_POOLING
    out = math.ceil(float(in_size + 2 * head - kernel) / stride + 1)
    if head > 0 and (out - 1) * stride >= in_size + head:
        out -= 1
    standard = int(float(in_size + 2 * head - kernel) / stride + 1)
    if out < 1 or standard < 1:
        raise ShapeError(f"input size {in_size} with pad {head} is smaller than the kernel {kernel}")
    return head, head + stride * (out - standard), out


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def resolve(spec: ConvPoolSpec, spatial: Sequence[int], where: str, kernel: Sequence[int] | None = None) -> Geometry:
    """Geometry for input spatial sizes ``spatial`` (kernel from the filter if given)."""
    spatial = tuple(int(s) for s in spatial)
    r = len(spatial)
    if r < 1:
        raise ShapeError(f"{where}: input needs at least one spatial dimension")
    if spec.rank is not None and spec.rank != r:
        raise ShapeError(f"{where}: arguments are for {spec.rank}-D input but the input has {r} spatial dimensions")
    if spec.global_pooling:
        k = spatial
    elif kernel is not None:
        k = tuple(kernel)
    else:
        k = _expand(spec.kernel, r, "kernel", where)
    s = _expand(spec.stride, r, "stride", where)
    d = _expand(spec.dilation, r, "dilation", where)
    p = spec.pads if isinstance(spec.pads, tuple) else (spec.pads,) * (2 * r)
    if len(p) != 2 * r:
        raise ShapeError(f"{where}: pads has {len(p)} values but the input has {r} spatial dimensions (needs {2 * r})")
    heads, tails, outs = [], [], []
    for i in range(r):
        if spec.global_pooling:
            h, t, o = 0, 0, 1
        else:
            try:
                h, t, o = compute_size_and_pad(spatial[i], s[i], k[i], d[i], spec.legacy_pad, p[i], p[r + i])
            except ShapeError as e:
                raise ShapeError(f"{where}: spatial dimension {i}: {e}") from None
        heads.append(h)
        tails.append(t)
        outs.append(o)
    return Geometry(spatial, k, s, d, tuple(heads), tuple(tails), tuple(outs))


# -- layout helpers ------------------------------------------------------------------


def split_layout(shape: Sequence[int], order: str) -> tuple[int, int, tuple]:
    """(N, C, spatial) of an NCHW or NHWC shape."""
    if order == "NCHW":
        return shape[0], shape[1], tuple(shape[2:])
    return shape[0], shape[-1], tuple(shape[1:-1])


def join_layout(n: int, c: int, spatial: Sequence[int], order: str) -> tuple:
    return (n, c, *spatial) if order == "NCHW" else (n, *spatial, c)


def kernel_slices(geo: Geometry, out: Sequence[int] | None = None) -> list[tuple[tuple, tuple]]:
    """For each kernel offset ``k`` (C order): (k, spatial slices of the padded buffer it reads for all outputs)."""
    out = geo.out if out is None else tuple(out)
    res = []
    for k in itertools.product(*(range(x) for x in geo.kernel)):
        sl = tuple(
            slice(b + ki * d, b + ki * d + s * (o - 1) + 1, s)
            for b, ki, d, s, o in zip(geo.start, k, geo.dilation, geo.stride, out)
        )
        res.append((k, sl))
    return res


def index(order: str, spatial: tuple, lead: int = 1, chan: int = 1) -> tuple:
    """Full index tuple: ``lead`` leading full slices, then (NCHW) ``chan`` channel slices and
    the spatial part, or (NHWC) the spatial part and ``chan`` channel slices."""
    full = slice(None)
    if order == "NCHW":
        return (full,) * (lead + chan) + tuple(spatial)
    return (full,) * lead + tuple(spatial) + (full,) * chan


def as_shape(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """A view of ``a`` with ``shape``; raises instead of copying."""
    v = a.view()
    v.shape = tuple(shape)
    return v


def infer_geometry(args: Any, x_shape: Sequence[int], where: str, *, need_kernel: bool = True) -> tuple:
    """(spec, N, C, geometry) for shape inference over an input of ``x_shape``."""
    spec = parse_conv_pool(args, where, where, need_kernel=need_kernel)
    n, c, spatial = split_layout(x_shape, spec.order)
    return spec, n, c, resolve(spec, spatial, where)


# -- the operator base ------------------------------------------------------------------


class ConvPoolOp(Operator):
    """Base of the ops taking ConvPoolOpBase arguments: parses them once into ``self.spec``
    (``self.order`` its storage order) and resets ``self._key``, the input signature the
    op's buffers were prepared for."""

    need_kernel = True
    negative_pads = False

    def setup(self) -> None:
        self.spec = parse_conv_pool(
            self.args, self.describe(), self.type, need_kernel=self.need_kernel, negative_pads=self.negative_pads
        )
        self.order = self.spec.order
        self._key = None

    def geometry(self, shape: Sequence[int]) -> tuple[int, int, Geometry]:
        """(N, C, geometry) of an input of ``shape``; ShapeError naming the op."""
        if len(shape) < 3:
            raise ShapeError(
                f"{self.describe()}: the image must be {self.order} with at least one spatial dim (rank >= 3), "
                f"got shape {list(shape)}"
            )
        n, c, spatial = split_layout(shape, self.order)
        return n, c, resolve(self.spec, spatial, self.describe())

    def padded_buffer(self, n: int, c: int, geo: Geometry, dtype: Any, fill: Any = 0) -> tuple:
        """(buffer of the padded input filled with ``fill``, view of its interior where the input goes)."""
        shape = join_layout(n, c, geo.buf_spatial, self.order)
        check_elements(shape, np.dtype(dtype).itemsize, f"{self.describe()}: the padded input")
        buf = np.full(join_layout(n, c, geo.buf_spatial, self.order), fill, dtype)
        return buf, buf[index(self.order, geo.interior)]
