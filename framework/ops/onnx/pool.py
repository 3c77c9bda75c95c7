"""ONNXPool: ONNX's AveragePool / LpPool / MaxPool in the cases Caffe2's pooling ops do not cover
(dilated average and Lp pooling, ceil_mode with count_include_pad), N-d, as onnx's reference
defines them.

Output size per spatial dim: ``(in + pads - ((k - 1) * dilation + 1)) / stride + 1``, floored, or
ceiled (``ceil_mode``) with the last window dropped when it would start past ``in + pad_head``.
The input is padded to what the windows reach (the extra beyond ``pads`` split half to the head,
half to the tail, as the reference does); window taps at or past ``in + pad_head + pad_tail`` are
left out. Pad cells count as 0 in average and Lp pooling with ``count_include_pad``, and are left
out otherwise (and always for max). ``auto_pad`` SAME_UPPER / SAME_LOWER / VALID: output
``floor((in - 1) / stride) + 1`` (SAME) or ``floor((in - k) / stride) + 1`` (VALID), pads from the
undilated kernel. No gradient (an inference op of the ONNX backend).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, INTS, REQUIRED, STRING, UNKNOWN, Arg, TensorSpec


def geometry(args, spatial: tuple) -> tuple[list, list, list]:
    """(output sizes, pads to apply, limit per dim) of onnx's reference pooling."""
    r = len(spatial)
    k = list(args.kernel_shape)
    st = list(args.strides) or [1] * r
    dil = list(args.dilations) or [1] * r
    pads = list(args.pads) or [0] * (2 * r)
    if len(k) != r or len(st) != r or len(dil) != r or len(pads) != 2 * r:
        raise ValueError(f"kernel_shape/strides/dilations/pads do not fit {r} spatial dimensions")
    if min(k + st + dil) < 1 or min(pads) < 0:
        raise ValueError("kernel_shape, strides and dilations must be >= 1, pads >= 0")
    auto = args.auto_pad
    if auto in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        if auto == "VALID":
            out = [(n - kk) // s + 1 for n, kk, s in zip(spatial, k, st)]
        else:
            out = [(n - 1) // s + 1 for n, s in zip(spatial, st)]
        total = [(o - 1) * s + kk - n if auto != "VALID" else 0 for o, s, kk, n in zip(out, st, k, spatial)]
        if auto == "SAME_UPPER":
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            pads = [t - t // 2 for t in total] + [t // 2 for t in total]
        return out, pads, [n + pads[i] + pads[r + i] for i, n in enumerate(spatial)], pads
    out = []
    applied = list(pads)
    for i, n in enumerate(spatial):
        window = dil[i] * (k[i] - 1) + 1
        size = (n + pads[i] + pads[r + i] - window) / st[i] + 1
        o = int(math.ceil(size)) if args.ceil_mode else int(math.floor(size))
        if args.ceil_mode and (o - 1) * st[i] >= n + pads[i]:
            o -= 1
        out.append(o)
        extra = (o - 1) * st[i] + window - n - pads[i] - pads[r + i]
        if extra > 0:
            applied[i] += extra // 2
            applied[r + i] += extra - extra // 2
    return out, applied, [n + pads[i] + pads[r + i] for i, n in enumerate(spatial)], pads


def _infer(args, ins):
    x = ins[0]
    if x.shape is None or None in x.shape or len(x.shape) < 3:
        return [TensorSpec(None, x.dtype), TensorSpec(None, np.dtype(np.int64))][: args.num_outputs]
    try:
        out = geometry(args, tuple(x.shape[2:]))[0]
    except ValueError:
        return [UNKNOWN] * args.num_outputs
    shape = tuple(x.shape[:2]) + tuple(out)
    return [TensorSpec(shape, x.dtype), TensorSpec(shape, np.dtype(np.int64))][: args.num_outputs]


@register_op(
    "ONNXPool",
    args=[
        Arg("mode", STRING, "avg", "avg, lp or max", choices=("avg", "lp", "max")),
        Arg("kernel_shape", INTS, REQUIRED, "window size per spatial dim"),
        Arg("strides", INTS, [], "per spatial dim (default 1)"),
        Arg("dilations", INTS, [], "per spatial dim (default 1)"),
        Arg("pads", INTS, [], "head pads then tail pads (default 0)"),
        Arg(
            "auto_pad",
            STRING,
            "NOTSET",
            "NOTSET, SAME_UPPER, SAME_LOWER or VALID",
            choices=("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"),
        ),
        Arg("ceil_mode", BOOL, False, "ceil the output size"),
        Arg("count_include_pad", BOOL, False, "avg/lp: pad cells count as zeros"),
        Arg("p", FLOAT, 2.0, "lp: the norm's exponent"),
        Arg("storage_order", INT, 0, "max Indices: 0 row-major, 1 column-major", choices=(0, 1)),
    ],
    outputs=(1, 2),
    input_docs=[("X", "(N, C, d1, ..., dk)")],
    output_docs=[
        ("Y", "(N, C, o1, ..., ok)"),
        ("Indices", "optional (max, ceil_mode 0): int64 flat index into X of each maximum (the first one)"),
    ],
    infer=_infer,
    category="onnx",
    input_types="float",
    ranks={0: (3, None)},
)
class ONNXPool(Operator):
    """ONNX average / Lp / max pooling with dilations, ceil_mode and count_include_pad (see the module doc)."""

    def run(self) -> None:
        x = self.input(0)
        r = x.ndim - 2
        try:
            out, applied, limit, _ = geometry(self.args, x.shape[2:])
        except ValueError as e:
            raise ShapeError(f"{self.describe()}: {e} (input '{self.input_names[0]}' {x.shape})") from None
        if min(out, default=1) < 1:
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' {x.shape} leaves no output {out}")
        k = list(self.args.kernel_shape)
        st = list(self.args.strides) or [1] * r
        dil = list(self.args.dilations) or [1] * r
        check_elements(list(x.shape[:2]) + out + k, x.itemsize, "pooling windows")
        mode = self.args.mode
        fill = 0.0 if (mode != "max" and self.args.count_include_pad) else np.nan
        padded = np.pad(x, [(0, 0), (0, 0)] + [(applied[i], applied[r + i]) for i in range(r)], constant_values=fill)
        index, valid = [], np.ones([1] * (2 * r), bool)
        for i in range(r):
            pos = st[i] * np.arange(out[i])[:, None] + dil[i] * np.arange(k[i])[None, :]
            ok = pos < min(limit[i], padded.shape[2 + i])
            shape = [1] * (2 * r)
            shape[2 * i], shape[2 * i + 1] = out[i], k[i]
            index.append(np.where(ok, pos, 0).reshape(shape))
            valid = valid & ok.reshape(shape)
        win = padded[(slice(None), slice(None), *index)]  # (N, C, o1, k1, o2, k2, ...)
        win = np.where(valid, win, np.nan)
        axes = tuple(3 + 2 * i for i in range(r))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-pad windows: NaN, as the reference
            if mode == "max":
                y = np.max(np.where(np.isnan(win), -np.inf, win), axis=axes)
                y = np.where(np.all(np.isnan(win), axis=axes), np.nan, y)
            elif mode == "avg":
                y = np.nanmean(win, axis=axes) if win.size else np.zeros(x.shape[:2] + tuple(out))
            else:
                p = float(self.args.p)
                y = np.nansum(np.abs(win) ** p, axis=axes) ** (1.0 / p)
        if self.args.num_outputs == 2:
            if mode != "max" or self.args.ceil_mode:
                raise self.arg_error("the Indices output goes with mode max and ceil_mode 0")
            ind = self._indices(x, win, valid, out, k, st, dil, applied)
            self.output(1, ind.shape, np.int64)[...] = ind
        self.output(0, tuple(x.shape[:2]) + tuple(out), x.dtype)[...] = y

    def _indices(self, x, win, valid, out, k, st, dil, applied) -> np.ndarray:
        """Flat index into X of each window's first maximum (row- or column-major per storage_order)."""
        r = len(out)
        perm = [0, 1] + [2 + 2 * i for i in range(r)] + [3 + 2 * i for i in range(r)]
        lead = tuple(x.shape[:2]) + tuple(out)
        w = win.transpose(perm).reshape(lead + (-1,))
        vperm = [2 * i for i in range(r)] + [2 * i + 1 for i in range(r)]
        ok = valid.transpose(vperm).reshape(tuple(out) + (-1,))
        ok = np.broadcast_to(ok, w.shape) & ~np.isnan(w)
        tap = np.argmax(np.where(ok, w, -np.inf), axis=-1)
        chosen_ok = np.take_along_axis(ok, tap[..., None], -1)[..., 0]
        tap = np.where(chosen_ok, tap, np.argmax(ok, axis=-1))
        taps = np.unravel_index(tap, tuple(k))
        spatial = x.shape[2:]
        flat = np.zeros(lead, np.int64)
        order = range(r) if self.args.storage_order == 0 else reversed(range(r))
        for i in order:
            o = np.arange(out[i]).reshape([1, 1] + [out[i] if j == i else 1 for j in range(r)])
            pos = st[i] * o + dil[i] * taps[i] - applied[i]
            flat = flat * spatial[i] + pos
        base = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1]) * int(np.prod(spatial))
        return flat + base.reshape(x.shape[:2] + (1,) * r)


no_gradient("ONNXPool")
