"""N-ary elementwise ops: Sum, Mean, Max, Min, WeightedSum, with the gradient
ops MeanGradient, MaxGradient, MinGradient and WeightedSumGradient.

All inputs of one op share shape and dtype (as in Caffe2). Output 0 may be
input 0's blob (in place); ``WeightedSum(param, ONE, grad, lr) -> param`` is
the plain SGD update.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.math.elementwise import bind_ufunc, check_kind
from framework.ops.operator import Operator
from framework.ops.pointwise import scratch
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, Arg, TensorSpec, pointwise_cost, same_as_input
from framework.ops.validation import expect_shape, expect_size
from framework.runtime.parallel import run_parallel, work_split

_MANY = (1, float("inf"))


class _Nary(Operator):
    """Checks that every input has input 0's shape and dtype."""

    kinds = "iuf"

    def check_inputs(self, arrays: list[np.ndarray]) -> None:
        x0 = arrays[0]
        check_kind(self, 0, x0, self.kinds)
        for i, x in enumerate(arrays[1:], 1):
            if x.dtype != x0.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') is {x.dtype}, "
                    f"input 0 ('{self.input_names[0]}') is {x0.dtype}; all inputs must share a dtype"
                )
            if x.shape != x0.shape:
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') has shape {list(x.shape)}, "
                    f"input 0 ('{self.input_names[0]}') has {list(x0.shape)}; all inputs must share a shape"
                )

    def gather(self) -> list[np.ndarray]:
        xs = [self.input(i) for i in range(len(self.inputs))]
        x0 = xs[0]
        for x in xs:
            if x.shape != x0.shape or x.dtype != x0.dtype:
                self.check_inputs(xs)
        if x0.dtype.kind not in self.kinds:
            check_kind(self, 0, x0, self.kinds)
        return xs


def _fold(ufunc: Callable, xs: list[np.ndarray], out: np.ndarray) -> None:
    """out = ufunc(...ufunc(x0, x1)..., xn); safe when out is x0."""
    if len(xs) == 1:
        if out is not xs[0]:
            np.copyto(out, xs[0])
        return
    ufunc(xs[0], xs[1], out=out)
    for x in xs[2:]:
        ufunc(out, x, out=out)


def _fold_callable(ufunc: Callable, xs: list[np.ndarray], out: np.ndarray) -> Callable:
    if len(xs) == 2:
        return bind_ufunc(ufunc, xs[0], xs[1], out=out)
    return partial(_fold, ufunc, xs, out)


def nary_schema(doc: str, out_doc: str) -> dict:
    """register_op keywords of the n-ary ops (and of ops built on them, e.g. SumRelu)."""
    return dict(
        inputs=_MANY,
        doc=doc,
        input_docs=[("X0, X1, ...", "tensors of one shape and dtype")],
        output_docs=[("Y", out_doc)],
        allow_inplace={(0, 0)},
        infer=same_as_input(0),
        cost=pointwise_cost(1),
        category="math",
    )


def _register(name: str, doc: str, out_doc: str, kinds: str = "iuf") -> Callable[[type], type]:
    return register_op(name, **nary_schema(doc, out_doc))


@_register("Sum", "Elementwise sum of all inputs; in place with input 0.", "X0 + X1 + ...")
class Sum(_Nary):
    ufunc = staticmethod(np.add)

    def run(self) -> None:
        xs = self.gather()
        _fold(self.ufunc, xs, self.output(0, xs[0].shape, xs[0].dtype))

    def compile(self) -> Any:
        """The sum bound to the current arrays (the nets' fast path); a large one split into flat ranges over
        the intra-op threads (elementwise: every element as on one thread)."""
        xs = [self.input(i) for i in range(len(self.inputs))]
        out = self.outputs[0].array
        parts = work_split(out.size, out.size * max(len(xs) - 1, 1)) if out is not None else None
        if parts is not None and all(a.flags.c_contiguous and a.size == out.size for a in (*xs, out)):
            if self.ufunc is np.add and len(xs) == 2:
                from framework.kernels import bn_train

                job = bn_train.add_job(xs[0], xs[1], out)  # a native job: no GIL handed between the parts
                if job is not None:
                    return job
            flat, fout = [x.reshape(-1) for x in xs], out.reshape(-1)
            tasks = [_fold_callable(self.ufunc, [x[a:b] for x in flat], fout[a:b]) for a, b in parts]
            return partial(run_parallel, tasks, True)
        return _fold_callable(self.ufunc, xs, out)


@_register("Max", "Elementwise maximum of all inputs; in place with input 0.", "max(X0, X1, ...)")
class Max(Sum):
    ufunc = staticmethod(np.maximum)


@_register("Min", "Elementwise minimum of all inputs; in place with input 0.", "min(X0, X1, ...)")
class Min(Sum):
    ufunc = staticmethod(np.minimum)


@_register("Mean", "Elementwise mean of all inputs (floating point); in place with input 0.", "(X0 + ...) / n", "f")
class Mean(_Nary):
    kinds = "f"

    def run(self) -> None:
        xs = self.gather()
        out = self.output(0, xs[0].shape, xs[0].dtype)
        _fold(np.add, xs, out)
        if len(xs) > 1:
            np.multiply(out, out.dtype.type(1.0 / len(xs)), out=out)


@gradient("Sum")
def _sum_grad(g):
    for i in range(len(g.def_.input)):
        g.set_dense(i, g.GO(0))
    return []


# -- gradient ops ------------------------------------------------------------------------------------


def _mean_grad_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [ins[0]] * args.num_outputs


@register_op(
    "MeanGradient",
    outputs=_MANY,
    input_docs=[("dY", "gradient of Y")],
    output_docs=[("dX0, dX1, ...", "dY / n for each of the n forward inputs")],
    allow_inplace={(0, 0)},
    infer=_mean_grad_infer,
    cost=pointwise_cost(1),
    category="math",
    private=True,
    input_types="float",
)
class MeanGradient(Operator):
    """dX_i = dY / n for each of the n inputs of Mean."""

    def run(self) -> None:
        dy = self.input(0)
        n = len(self.outputs)
        scale = dy.dtype.type(1.0 / n)
        # Output 0 may be dY itself: write it last.
        for k in list(range(1, n)) + [0]:
            np.multiply(dy, scale, out=self.output(k, dy.shape, dy.dtype))


def _minmax_grad_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec(s.shape, ins[1].dtype) for s in ins[2:]][: args.num_outputs]


class MaxGradient(Operator):
    """dX_i = dY where X_i == Y, else 0 (every input equal to the extreme gets the gradient)."""

    def run(self) -> None:
        y, dy = self.input(0), self.input(1)
        for k in range(len(self.outputs)):
            x = self.input(2 + k)
            if x.shape != y.shape:
                raise ShapeError(
                    f"{self.describe()}: input '{self.input_names[2 + k]}' has shape {list(x.shape)}, "
                    f"Y ('{self.input_names[0]}') has {list(y.shape)}"
                )
            np.multiply(dy, x == y, out=self.output(k, x.shape, dy.dtype))


for _t in ("MaxGradient", "MinGradient"):
    register_op(
        _t,
        inputs=(3, float("inf")),
        outputs=_MANY,
        doc=MaxGradient.__doc__,
        input_docs=[("Y", "forward output"), ("dY", "gradient of Y"), ("X0, X1, ...", "forward inputs")],
        output_docs=[("dX0, dX1, ...", "gradients of the forward inputs")],
        infer=_minmax_grad_infer,
        cost=pointwise_cost(2),
        category="math",
        private=True,
        input_types={0: "numeric", 1: "float", "*": "numeric"},
        same_shape=[(0, 1)],
    )(MaxGradient)


@gradient("Mean")
def _mean_grad(g):
    return [g.op("MeanGradient", [g.GO(0)], [g.GI(i) for i in range(len(g.def_.input))])]


def _minmax_maker(grad_type: str) -> Callable:
    def maker(g):
        n = len(g.def_.input)
        return [g.op(grad_type, [g.O(0), g.GO(0)] + [g.I(i) for i in range(n)], [g.GI(i) for i in range(n)])]

    return maker


gradient("Max")(_minmax_maker("MaxGradient"))
gradient("Min")(_minmax_maker("MinGradient"))


# -- WeightedSum ----------------------------------------------------------------------------------------


def _even_positive(n: int) -> bool:
    """an even number (X0, w0, X1, w1, ...)"""
    return n > 0 and n % 2 == 0


_GRAD_ON_W = Arg("grad_on_w", BOOL, 0, "the gradient op also computes the weights' gradients")


@register_op(
    "WeightedSum",
    inputs=_even_positive,
    args=[_GRAD_ON_W],
    input_docs=[("X0, w0, X1, w1, ...", "tensors of one shape and their 1-element float weights")],
    output_docs=[("Y", "w0 * X0 + w1 * X1 + ...")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(2),
    category="math",
)
class WeightedSum(Operator):
    """Y = sum_i w_i * X_i over pairs (X_i, w_i); each weight is a 1-element tensor.
    In place with X0; WeightedSum(param, ONE, grad, lr) -> param is the plain SGD update."""

    def setup(self) -> None:
        self._tmp: np.ndarray | None = None

    def _weight(self, i: int) -> np.ndarray:
        w = self.input(i)
        if w.size != 1:
            raise ShapeError(
                f"{self.describe()}: weight input {i} ('{self.input_names[i]}') must have 1 element, "
                f"has shape {list(w.shape)}"
            )
        if w.dtype.kind != "f":
            check_kind(self, i, w, "f")
        return w.reshape(())

    def _operands(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        x0 = self.input(0)
        if x0.dtype.kind != "f":
            check_kind(self, 0, x0, "f")
        xs, ws = [x0], [self._weight(1)]
        for i in range(2, len(self.inputs), 2):
            x = self.input(i)
            if x.shape != x0.shape:
                if x.size != x0.size:
                    raise ShapeError(
                        f"{self.describe()}: input {i} ('{self.input_names[i]}') has shape {list(x.shape)}, "
                        f"X0 ('{self.input_names[0]}') has {list(x0.shape)}"
                    )
                x = x.reshape(x0.shape)
            xs.append(x)
            ws.append(self._weight(i + 1))
        return xs, ws

    def _scratch(self, like: np.ndarray) -> np.ndarray:
        return scratch(self, "_tmp", like.shape, like.dtype)

    def run(self) -> None:
        xs, ws = self._operands()
        out = self.output(0, xs[0].shape, xs[0].dtype)
        tmp = self._scratch(out) if len(xs) > 1 else None
        _weighted_sum(xs, ws, out, tmp)

    def compile(self) -> Any:
        """The update bound to the current arrays (the nets' fast path)."""
        xs, ws = self._operands()
        out = self.outputs[0].array
        return partial(_weighted_sum, xs, ws, out, self._scratch(out) if len(xs) > 1 else None)


def _weighted_sum(xs: list[np.ndarray], ws: list[np.ndarray], out: np.ndarray, tmp: np.ndarray | None) -> None:
    if out is xs[0] and ws[0] == 1.0:
        pass  # in place with weight 1 (the SGD case): nothing to scale
    else:
        np.multiply(xs[0], ws[0], out=out)
    for x, w in zip(xs[1:], ws[1:]):
        np.multiply(x, w, out=tmp)
        np.add(out, tmp, out=out)


def _wsg_counts(n: int) -> bool:
    """dY followed by (X_i, w_i) pairs"""
    return n >= 3 and n % 2 == 1


def _wsg_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    dt = ins[0].dtype
    xs = [TensorSpec(ins[i].shape, dt) for i in range(1, len(ins), 2)]
    wts = [TensorSpec(ins[i].shape, ins[i].dtype) for i in range(2, len(ins), 2)]
    return (xs + wts)[: args.num_outputs]


@register_op(
    "WeightedSumGradient",
    inputs=_wsg_counts,
    outputs=_MANY,
    args=[_GRAD_ON_W],
    input_docs=[("dY", "gradient of Y"), ("X0, w0, X1, w1, ...", "forward inputs")],
    output_docs=[("dX0, dX1, ..., [dw0, dw1, ...]", "dX_i = w_i * dY; with grad_on_w, dw_i = sum(dY * X_i)")],
    infer=_wsg_infer,
    cost=pointwise_cost(2),
    category="math",
    private=True,
    input_types="float",
)
class WeightedSumGradient(Operator):
    """dX_i = w_i * dY; with grad_on_w=1 also dw_i = sum(dY * X_i) (shaped as w_i)."""

    def setup(self) -> None:
        n = (len(self.input_names) - 1) // 2
        want = 2 * n if self.args.grad_on_w else n
        if len(self.output_names) != want:
            raise ShapeError(
                f"{self.describe()}: {n} (X, w) pairs with grad_on_w={int(self.args.grad_on_w)} need {want} outputs, "
                f"got {len(self.output_names)}"
            )

    def run(self) -> None:
        dy = self.input(0)
        n = (len(self.inputs) - 1) // 2
        for k in range(n):
            expect_size(self, 2 + 2 * k, self.input(2 + 2 * k), 1, "a weight is a scalar")
            if self.args.grad_on_w:
                expect_shape(self, 1 + 2 * k, self.input(1 + 2 * k), dy.shape, "dY's shape")
        if self.args.grad_on_w:
            for k in range(n):
                x, w = self.input(1 + 2 * k), self.input(2 + 2 * k)
                dw = self.output(n + k, w.shape, w.dtype)
                dw.reshape(-1)[0] = np.vdot(dy, x.reshape(dy.shape))
        for k in range(n):
            w = self.input(2 + 2 * k).reshape(())
            np.multiply(dy, w, out=self.output(k, dy.shape, dy.dtype))


@gradient("WeightedSum")
def _weighted_sum_grad(g):
    n = len(g.def_.input)
    inputs = [g.GO(0)] + [g.I(i) for i in range(n)]
    outputs = [g.GI(i) for i in range(0, n, 2)]
    if g.arg("grad_on_w", 0):
        outputs += [g.GI(i) for i in range(1, n, 2)]
    return [g.op("WeightedSumGradient", inputs, outputs)]
