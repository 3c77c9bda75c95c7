"""Reductions: ReduceSum/Mean/Max/Min (axes, keepdims), ReduceFront/Back Sum/Mean/Max
(num_reduce_dim, optional lengths), SumElements, SumSqrElements, RowwiseMax,
ColwiseMax, ArgMax, ArgMin, and their gradient ops.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.elementwise import check_kind
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, Arg, Cost, TensorSpec, numel_of

_NP = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min}


def _reduce_cost(args: Any, ins: list[TensorSpec], outs: list[TensorSpec]) -> Cost:
    n = numel_of(ins[0])
    item = ins[0].dtype.itemsize if ins[0].dtype is not None else 0
    return Cost(flops=n, bytes_moved=n * item + numel_of(outs[0]) * item)


def _lowest(dtype: np.dtype, largest: bool = False) -> Any:
    if dtype.kind == "f":
        return dtype.type(np.inf if largest else -np.inf)
    info = np.iinfo(dtype)
    return info.max if largest else info.min


# -- ReduceSum / ReduceMean / ReduceMax / ReduceMin ------------------------------------------------


def _canon_axes(axes: Any, ndim: int, where: str) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(ndim))
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"{where}: axis {a} is out of range for a {ndim}-D input")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"{where}: axes {list(axes)} repeat an axis")
    return tuple(sorted(out))


def _reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    axes = _canon_axes(args.axes, len(x.shape), "")
    return [TensorSpec(_reduced_shape(tuple(x.shape), axes, bool(args.keepdims)), x.dtype)]


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
            axes = _canon_axes(self.args.axes, x.ndim, self.describe())
            keep = bool(self.args.keepdims)
            self._axes_shape = (axes, _reduced_shape(x.shape, axes, keep), keep)
            self._key = x.shape
        return self._axes_shape

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind not in self.kinds:
            check_kind(self, 0, x, self.kinds)
        axes, shape, keep = self._plan(x)
        out = self.output(0, shape, x.dtype)
        if self.kind in ("Max", "Min") and x.size == 0:
            out.fill(_lowest(x.dtype, self.kind == "Min"))
            return
        _NP[self.kind](x, axis=axes, out=out, keepdims=keep)

    def compile(self) -> Any:
        """The reduction bound to the current arrays (the nets' fast path)."""
        x = self.input(0)
        if x.size == 0:
            return None
        axes, _, keep = self._plan(x)
        return partial(_NP[self.kind], x, axis=axes, out=self.outputs[0]._obj._array, keepdims=keep)


class _ReduceGradient(Operator):
    """dX from (dY, X, Y): dY broadcast back over the reduced axes (Sum), divided by their size
    (Mean), or routed to the elements equal to Y (Max, Min)."""

    kind = "Sum"

    def run(self) -> None:
        dy, x, y = self.input(0), self.input(1), self.input(2)
        axes = _canon_axes(self.args.axes, x.ndim, self.describe())
        kept = _reduced_shape(x.shape, axes, True)
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
        cost=_reduce_cost,
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
        cost=_reduce_cost,
        category="reduction",
        private=True,
    )(type(f"Reduce{_k}Gradient", (_ReduceGradient,), {"kind": _k, "__doc__": _ReduceGradient.__doc__}))


def _reduce_grad(g):
    return [g.op(g.def_.type + "Gradient", [g.GO(0), g.I(0), g.O(0)], [g.GI(0)])]


for _k in ("Sum", "Mean", "Max", "Min"):
    gradient(f"Reduce{_k}")(_reduce_grad)


# -- ReduceFront* / ReduceBack* --------------------------------------------------------------------------


def _fb_split(shape: tuple, k: int, front: bool, where: str) -> tuple[int, int, tuple]:
    """(rows, cols, output shape): the input viewed as rows x cols, reducing rows (front) or cols (back)."""
    if not 0 <= k <= len(shape):
        raise ShapeError(f"{where}: num_reduce_dim {k} is out of range for input shape {list(shape)}")
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
                o1.fill(_lowest(x.dtype))
            elif mask is None:
                np.max(x2, axis=0, out=o1)
            else:
                np.max(np.where(mask, x2, _lowest(x.dtype)), axis=0, out=o1)
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


class _FrontBackGradient(_FrontBack):
    """dX from dY (and X, and Y for Max), with the forward op's num_reduce_dim and lengths."""

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        rows, cols, _ = _fb_split(x.shape, self.args.num_reduce_dim, self.front, self.describe())
        seg_len, n_seg = (rows, cols) if self.front else (cols, rows)
        has_y = self.kind == "Max"
        lengths = self.input(3 if has_y else 2) if len(self.inputs) > (3 if has_y else 2) else None
        dx = self.output(0, x.shape, dy.dtype)
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
            cost=_reduce_cost,
            category="reduction",
        )(type(_name, (_FrontBack,), {"kind": _k, "front": _front, "__doc__": _name}))
        n_in = (3, 4) if _k == "Max" else (2, 3)
        register_op(
            _name + "Gradient",
            inputs=n_in,
            args=[Arg("num_reduce_dim", INT, 1, "as the forward op")],
            doc=_FrontBackGradient.__doc__,
            input_docs=[("dY", "gradient of Y"), ("X", "forward input")]
            + ([("Y", "forward output")] if _k == "Max" else [])
            + [("lengths", "optional forward lengths")],
            output_docs=[("dX", "gradient of X")],
            infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype)],
            cost=_reduce_cost,
            category="reduction",
            private=True,
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


# -- SumElements / SumSqrElements -------------------------------------------------------------------------


def _scalar_like(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec((), ins[0].dtype)]


_AVERAGE = [Arg("average", BOOL, 0, "divide the sum by the number of elements")]


@register_op(
    "SumElements",
    args=_AVERAGE,
    input_docs=[("X", "float tensor")],
    output_docs=[("sum", "scalar (0-d) sum, or mean with average=1")],
    infer=_scalar_like,
    cost=_reduce_cost,
    category="reduction",
)
class SumElements(Operator):
    """Sum of all elements of X as a scalar; their mean with average=1."""

    square = False

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        out = self.output(0, (), x.dtype)
        if self.square:
            out[...] = np.vdot(x, x) if x.size else 0
        else:
            np.sum(x, out=out)
        if self.args.average and x.size:
            np.multiply(out, x.dtype.type(1.0 / x.size), out=out)


@register_op(
    "SumSqrElements",
    args=_AVERAGE,
    input_docs=[("X", "float tensor")],
    output_docs=[("sum", "scalar (0-d) sum of squares, or their mean with average=1")],
    infer=_scalar_like,
    cost=_reduce_cost,
    category="reduction",
)
class SumSqrElements(SumElements):
    """Sum of the squares of all elements of X as a scalar; their mean with average=1."""

    square = True


class SumElementsGradient(Operator):
    """dX = dY (divided by the element count with average=1), for every element of X."""

    square = False

    def run(self) -> None:
        x, dy = self.input(0), self.input(1)
        dx = self.output(0, x.shape, dy.dtype)
        g = dy.reshape(())
        if self.args.average and x.size:
            g = g / x.size
        if self.square:
            np.multiply(x, 2 * g, out=dx)
        else:
            dx.fill(g)


for _name, _sq in (("SumElementsGradient", False), ("SumSqrElementsGradient", True)):
    register_op(
        _name,
        inputs=2,
        args=_AVERAGE,
        doc="dX = 2 * X * dY (over the count with average=1)." if _sq else SumElementsGradient.__doc__,
        input_docs=[("X", "forward input"), ("dY", "gradient of the scalar")],
        output_docs=[("dX", "gradient of X")],
        infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[1].dtype)],
        cost=_reduce_cost,
        category="reduction",
        private=True,
    )(type(_name, (SumElementsGradient,), {"square": _sq}))


@gradient("SumElements")
def _sum_elements_grad(g):
    return [g.op("SumElementsGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


@gradient("SumSqrElements")
def _sum_sqr_elements_grad(g):
    return [g.op("SumSqrElementsGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


# -- RowwiseMax / ColwiseMax ------------------------------------------------------------------------------


def _rc_infer(rowwise: bool):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        x = ins[0]
        if x.shape is None or len(x.shape) != 3:
            return [TensorSpec(None, x.dtype)]
        b, m, n = x.shape
        return [TensorSpec((b, m) if rowwise else (b, n), x.dtype)]

    return infer


class RowwiseMax(Operator):
    """Max over the last dim of a 3-D X (B x M x N -> B x M)."""

    axis = 2

    def run(self) -> None:
        x = self.input(0)
        if x.ndim != 3:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') must be 3-D, got {list(x.shape)}")
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        shape = (x.shape[0], x.shape[1]) if self.axis == 2 else (x.shape[0], x.shape[2])
        out = self.output(0, shape, x.dtype)
        if x.shape[self.axis] == 0:
            out.fill(_lowest(x.dtype))
        else:
            np.max(x, axis=self.axis, out=out)


class RowwiseMaxGradient(Operator):
    """dX = dY routed to the elements equal to the max, from (X, Y, dY)."""

    axis = 2

    def run(self) -> None:
        x, y, dy = self.input(0), self.input(1), self.input(2)
        dx = self.output(0, x.shape, dy.dtype)
        np.multiply(np.expand_dims(dy, self.axis), x == np.expand_dims(y, self.axis), out=dx)


for _name, _axis, _doc in (
    ("RowwiseMax", 2, "Max over the last dim of a 3-D X (B x M x N -> B x M)."),
    ("ColwiseMax", 1, "Max over the middle dim of a 3-D X (B x M x N -> B x N)."),
):
    register_op(
        _name,
        doc=_doc,
        input_docs=[("X", "3-D float tensor B x M x N")],
        output_docs=[("Y", "B x M (rowwise) or B x N (colwise)")],
        infer=_rc_infer(_axis == 2),
        cost=_reduce_cost,
        category="reduction",
    )(type(_name, (RowwiseMax,), {"axis": _axis}))
    register_op(
        _name + "Gradient",
        inputs=3,
        doc=RowwiseMaxGradient.__doc__,
        input_docs=[("X", "forward input"), ("Y", "forward output"), ("dY", "gradient of Y")],
        output_docs=[("dX", "gradient of X")],
        infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[2].dtype)],
        cost=_reduce_cost,
        category="reduction",
        private=True,
    )(type(_name + "Gradient", (RowwiseMaxGradient,), {"axis": _axis}))


def _rc_grad(g):
    return [g.op(g.def_.type + "Gradient", [g.I(0), g.O(0), g.GO(0)], [g.GI(0)])]


gradient("RowwiseMax")(_rc_grad)
gradient("ColwiseMax")(_rc_grad)


# -- ArgMax / ArgMin ---------------------------------------------------------------------------------------


def _arg_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, np.dtype(np.int64))]
    (axis,) = _canon_axes([args.axis], len(x.shape), "")
    return [TensorSpec(_reduced_shape(tuple(x.shape), (axis,), bool(args.keepdims)), np.dtype(np.int64))]


class ArgMax(Operator):
    """Index (int64) of the first maximum along `axis`; keepdims=1 keeps that axis with size 1."""

    fn = staticmethod(np.argmax)

    def run(self) -> None:
        x = self.input(0)
        if x.ndim == 0:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') must have at least 1 dim")
        (axis,) = _canon_axes([self.args.axis], x.ndim, self.describe())
        if x.shape[axis] == 0:
            raise ShapeError(f"{self.describe()}: cannot take an arg-extreme over the empty axis {axis}")
        out = self.output(0, _reduced_shape(x.shape, (axis,), bool(self.args.keepdims)), np.int64)
        self.fn(x, axis=axis, out=out, keepdims=bool(self.args.keepdims))


for _name, _fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
    register_op(
        _name,
        args=[
            Arg("axis", INT, -1, "the axis to search"),
            Arg("keepdims", BOOL, 1, "keep the searched axis with size 1"),
        ],
        doc=f"Index (int64) of the first {'maximum' if _name == 'ArgMax' else 'minimum'} along `axis`; "
        "keepdims=1 keeps that axis with size 1.",
        input_docs=[("X", "input tensor")],
        output_docs=[("Indices", "int64 indices")],
        infer=_arg_infer,
        cost=_reduce_cost,
        category="reduction",
    )(type(_name, (ArgMax,), {"fn": staticmethod(_fn)}))
should_not_do_gradient("ArgMax", "ArgMin")
