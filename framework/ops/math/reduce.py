"""Axis reductions: ReduceSum/Mean/Max/Min (axes, keepdims) and ReduceFront/Back
Sum/Mean/Max (num_reduce_dim, optional lengths), with their gradient ops; the cost and
identity-value helpers the other reductions (``reductions``) share.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.math.elementwise import check_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, Arg, Cost, TensorSpec, numel_of
from framework.ops.validation import check_lengths, expect_axis, expect_in_range, expect_kind, expect_shape, expect_size

_NP = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min}


def reduce_cost(args: Any, ins: list[TensorSpec], outs: list[TensorSpec]) -> Cost:
    """One FLOP per input element; input read, output written."""
    n = numel_of(ins[0])
    item = ins[0].dtype.itemsize if ins[0].dtype is not None else 0
    return Cost(flops=n, bytes_moved=n * item + numel_of(outs[0]) * item)


def lowest(dtype: np.dtype, largest: bool = False) -> Any:
    """The identity of max (or, ``largest``, of min) for ``dtype``."""
    if dtype.kind == "f":
        return dtype.type(np.inf if largest else -np.inf)
    info = np.iinfo(dtype)
    return info.max if largest else info.min


# -- ReduceSum / ReduceMean / ReduceMax / ReduceMin ------------------------------------------------


def canon_axes(axes: Any, ndim: int, where: str) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(ndim))
    out = []
    for a in axes:
        out.append(expect_axis(where, a, ndim))
    if len(set(out)) != len(out):
        raise ShapeError(f"{where}: axes {list(axes)} repeat an axis")
    return tuple(sorted(out))


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    axes = canon_axes(args.axes, len(x.shape), "")
    return [TensorSpec(reduced_shape(tuple(x.shape), axes, bool(args.keepdims)), x.dtype)]


_REDUCE_ARGS = [
    Arg("axes", INTS, None, "axes to reduce (default: all)"),
    Arg("keepdims", INT, 1, "1 keeps the reduced axes with size 1, 0 drops them"),
]


class _Reduce(Operator):
    kind = "Sum"

    def setup(self) -> None:
        self._key: Any = None
        self.kinds = "f" if self.kind == "Mean" else "iuf"

    def _plan(self, x: np.ndarray) -> tuple:
        if self._key != x.shape:
            axes = canon_axes(self.args.axes, x.ndim, self.describe())
            keep = bool(self.args.keepdims)
            self._axes_shape = (axes, reduced_shape(x.shape, axes, keep), keep)
            self._key = x.shape
        return self._axes_shape

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind not in self.kinds:
            check_kind(self, 0, x, self.kinds)
        axes, shape, keep = self._plan(x)
        out = self.output(0, shape, x.dtype)
        if self.kind in ("Max", "Min") and x.size == 0:
            out.fill(lowest(x.dtype, self.kind == "Min"))
            return
        _NP[self.kind](x, axis=axes, out=out, keepdims=keep)

    def compile(self) -> Any:
        """The reduction bound to the current arrays (the nets' fast path)."""
        x = self.input(0)
        if x.size == 0:
            return None
        axes, _, keep = self._plan(x)
        return partial(_NP[self.kind], x, axis=axes, out=self.outputs[0].array, keepdims=keep)


class _ReduceGradient(Operator):
    """dX from (dY, X, Y): dY broadcast back over the reduced axes (Sum), divided by their size
    (Mean), or routed to the elements equal to Y (Max, Min)."""

    kind = "Sum"

    def run(self) -> None:
        dy, x, y = self.input(0), self.input(1), self.input(2)
        axes = canon_axes(self.args.axes, x.ndim, self.describe())
        kept = reduced_shape(x.shape, axes, True)
        n = int(np.prod(kept, dtype=np.int64))
        expect_size(self, 0, dy, n, f"the reduction of X {list(x.shape)} over axes {list(axes)}")
        if self.kind in ("Max", "Min"):
            expect_size(self, 2, y, n, f"the reduction of X {list(x.shape)} over axes {list(axes)}")
        dyk = dy.reshape(kept)
        dx = self.output(0, x.shape, dy.dtype)
        if self.kind == "Sum":
            np.copyto(dx, dyk)
        elif self.kind == "Mean":
            count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) or 1
            np.multiply(dyk, dy.dtype.type(1.0 / count), out=dx)
        else:
            np.multiply(dyk, x == y.reshape(kept), out=dx)


for _k in ("Sum", "Mean", "Max", "Min"):
    register_op(
        f"Reduce{_k}",
        args=_REDUCE_ARGS,
        doc=f"{_k} of the input's elements along `axes` (all axes by default); keepdims=1 keeps "
        "the reduced axes with size 1.",
        input_docs=[("data", "input tensor")],
        output_docs=[("reduced", "the reduction")],
        infer=_reduce_infer,
        cost=reduce_cost,
        category="reduction",
    )(type(f"Reduce{_k}", (_Reduce,), {"kind": _k, "__doc__": f"Reduce{_k}."}))
    register_op(
        f"Reduce{_k}Gradient",
        inputs=3,
        args=_REDUCE_ARGS,
        doc=_ReduceGradient.__doc__,
        input_docs=[("dY", "gradient of the reduction"), ("X", "forward input"), ("Y", "forward output")],
        output_docs=[("dX", "gradient of X")],
        infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype)],
        cost=reduce_cost,
        category="reduction",
        private=True,
        input_types=["float", "numeric", "numeric"],
        same_type=[(1, 2)],
    )(type(f"Reduce{_k}Gradient", (_ReduceGradient,), {"kind": _k, "__doc__": _ReduceGradient.__doc__}))


def _reduce_grad(g):
    return [g.op(g.def_.type + "Gradient", [g.GO(0), g.I(0), g.O(0)], [g.GI(0)])]


for _k in ("Sum", "Mean", "Max", "Min"):
    gradient(f"Reduce{_k}")(_reduce_grad)


# -- ReduceFront* / ReduceBack* --------------------------------------------------------------------------


def _fb_split(shape: tuple, k: int, front: bool, where: str) -> tuple[int, int, tuple]:
    """(rows, cols, output shape): the input viewed as rows x cols, reducing rows (front) or cols (back)."""
    expect_in_range(where, "num_reduce_dim", k, 0, len(shape), inclusive=True, of=f"input shape {list(shape)}")
    split = k if front else len(shape) - k
    rows = int(np.prod(shape[:split], dtype=np.int64))
    cols = int(np.prod(shape[split:], dtype=np.int64))
    return rows, cols, tuple(shape[k:]) if front else tuple(shape[:split])


def _fb_infer(front: bool):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        x = ins[0]
        if x.shape is None:
            return [TensorSpec(None, x.dtype)]
        return [TensorSpec(_fb_split(tuple(x.shape), args.num_reduce_dim, front, "")[2], x.dtype)]

    return infer


class _FrontBack(Operator):
    kind = "Sum"
    front = True

    def _view(self, x: np.ndarray) -> tuple[np.ndarray, tuple, np.ndarray | None]:
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        rows, cols, out_shape = _fb_split(x.shape, self.args.num_reduce_dim, self.front, self.describe())
        x2 = x.reshape(rows, cols)
        if not self.front:
            x2 = x2.T  # reduce along axis 0 in both cases
        mask = None
        if len(self.inputs) > 1:
            lengths = self.input(1)
            n_seg, seg_len = x2.shape[1], x2.shape[0]
            expect_kind(self, 1, lengths, "int")
            if lengths.shape != (n_seg,):
                raise ShapeError(
                    f"{self.describe()}: lengths ('{self.input_names[1]}') must have shape [{n_seg}], "
                    f"got {list(lengths.shape)}"
                )
            if lengths.size and (lengths.min() < 0 or lengths.max() > seg_len):
                raise ShapeError(f"{self.describe()}: lengths must lie in [0, {seg_len}]")
            mask = np.arange(seg_len)[:, None] < lengths[None, :]
        return x2, out_shape, mask

    def run(self) -> None:
        x = self.input(0)
        x2, out_shape, mask = self._view(x)
        out = self.output(0, out_shape, x.dtype)
        o1 = out.reshape(-1)
        if self.kind == "Max":
            if x2.shape[0] == 0:
                o1.fill(lowest(x.dtype))
            elif mask is None:
                np.max(x2, axis=0, out=o1)
            else:
                np.max(np.where(mask, x2, lowest(x.dtype)), axis=0, out=o1)
            return
        if mask is None:
            np.sum(x2, axis=0, out=o1)
            if self.kind == "Mean":
                np.multiply(o1, x.dtype.type(1.0 / max(x2.shape[0], 1)), out=o1)
        else:
            np.sum(np.where(mask, x2, 0), axis=0, out=o1)
            if self.kind == "Mean":
                lengths = self.input(1)
                np.divide(o1, np.maximum(lengths, 1), out=o1)


def _is_shape_tensor(kind: str, spec: Any) -> bool:
    """Caffe2's Sum/Mean gradients take X or, from older models, X's shape as a 1-D int64 tensor."""
    return kind != "Max" and spec.dtype == np.dtype(np.int64) and spec.shape is not None and len(spec.shape) == 1


class _FrontBackGradient(_FrontBack):
    """dX from dY (and X, and Y for Max), with the forward op's num_reduce_dim and lengths.
    For Sum and Mean input 1 may be X or, as Caffe2 also accepts (older models), X's shape as
    a 1-D int64 tensor."""

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        xshape = x.shape
        if self.kind != "Max" and x.ndim == 1 and x.dtype == np.int64:
            if x.size and x.min() < 0:
                raise ShapeError(f"{self.describe()}: shape input '{self.input_names[1]}' holds negative sizes {x}")
            xshape = tuple(int(v) for v in x)
        rows, cols, _ = _fb_split(xshape, self.args.num_reduce_dim, self.front, self.describe())
        seg_len, n_seg = (rows, cols) if self.front else (cols, rows)
        has_y = self.kind == "Max"
        lengths = self.input(3 if has_y else 2) if len(self.inputs) > (3 if has_y else 2) else None
        expect_size(self, 0, dy, n_seg, f"X {list(xshape)} reduced over num_reduce_dim={self.args.num_reduce_dim}")
        if has_y:
            expect_size(self, 2, self.input(2), n_seg, "the forward output")
        if lengths is not None:
            li = 3 if has_y else 2
            expect_shape(self, li, lengths, (n_seg,), "one length per output element")
            check_lengths(self, li, lengths)
            if lengths.size and int(lengths.max()) > seg_len:
                raise ShapeError(f"{self.describe()}: lengths must lie in [0, {seg_len}], got {int(lengths.max())}")
        dx = self.output(0, xshape, dy.dtype)
        dx2 = dx.reshape(rows, cols)
        if not self.front:
            dx2 = dx2.T
        g = dy.reshape(1, n_seg)
        if self.kind == "Mean":
            denom = np.maximum(lengths, 1) if lengths is not None else max(seg_len, 1)
            g = g / denom
        if self.kind == "Max":
            x2 = x.reshape(rows, cols)
            x2 = x2 if self.front else x2.T
            np.multiply(g, x2 == self.input(2).reshape(1, n_seg), out=dx2)
        else:
            dx2[...] = g
        if lengths is not None:
            dx2 *= np.arange(seg_len)[:, None] < lengths[None, :]


for _k in ("Sum", "Mean", "Max"):
    for _front in (True, False):
        _side = "Front" if _front else "Back"
        _name = f"Reduce{_side}{_k}"
        register_op(
            _name,
            inputs=(1, 2),
            args=[Arg("num_reduce_dim", INT, 1, f"number of {'leading' if _front else 'trailing'} dims to reduce")],
            doc=f"{_k} over the {'first' if _front else 'last'} `num_reduce_dim` dims. With the optional "
            f"`lengths` input, only the first lengths[j] entries of each reduced {'column' if _front else 'row'} "
            "count.",
            input_docs=[("X", "float tensor"), ("lengths", "optional int lengths, one per output element")],
            output_docs=[("Y", f"X reduced over its {'leading' if _front else 'trailing'} dims")],
            infer=_fb_infer(_front),
            cost=reduce_cost,
            category="reduction",
        )(type(_name, (_FrontBack,), {"kind": _k, "front": _front, "__doc__": _name}))
        n_in = (3, 4) if _k == "Max" else (2, 3)
        register_op(
            _name + "Gradient",
            inputs=n_in,
            args=[Arg("num_reduce_dim", INT, 1, "as the forward op")],
            doc=_FrontBackGradient.__doc__,
            input_docs=[
                ("dY", "gradient of Y"),
                ("X", "forward input" + ("" if _k == "Max" else " (or its int64 shape)")),
            ]
            + ([("Y", "forward output")] if _k == "Max" else [])
            + [("lengths", "optional forward lengths")],
            output_docs=[("dX", "gradient of X")],
            infer=lambda args, ins, k=_k: [
                TensorSpec(None if _is_shape_tensor(k, ins[1]) else ins[1].shape, ins[0].dtype)
            ],
            cost=reduce_cost,
            category="reduction",
            private=True,
            input_types={
                0: "float",
                1: "float" if _k == "Max" else "numeric",
                2: "float" if _k == "Max" else "int",
                3: "int",
            },
        )(type(_name + "Gradient", (_FrontBackGradient,), {"kind": _k, "front": _front}))


def _fb_grad(g):
    ins = [g.GO(0), g.I(0)]
    if g.def_.type.endswith("Max"):
        ins.append(g.O(0))
    if len(g.def_.input) == 2:
        ins.append(g.I(1))
    return [g.op(g.def_.type + "Gradient", ins, [g.GI(0)])]


for _k in ("Sum", "Mean", "Max"):
    for _side in ("Front", "Back"):
        gradient(f"Reduce{_side}{_k}")(_fb_grad)
