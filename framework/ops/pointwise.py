"""The machinery shared by pointwise activation ops and their gradients, so that an
activation module holds only the maths.

- ``activation_op(name, flops, ...)`` registers a one-input, in-place capable op whose
  output is shaped as X; its class (an ``Activation``) writes ``forward(x, y)``.
- ``pointwise_gradient(Forward, input_docs)`` registers ``<Forward>Gradient`` (reading
  X, Y and/or dY, writing dX) *and* the forward op's gradient maker; its class (a
  ``PointwiseGradient``) writes ``grad(*inputs, dx)``.
- ``scratch``, ``float_input`` and ``check_same_shape`` are the kernels' helpers.

Kernels may run in place (Y is X's blob, dX is dY's blob): they read an input fully, or
into a scratch buffer, before writing the output.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import pointwise_cost, same_as_input

X_DOCS = [("X", "input tensor")]
Y_DOC = "output tensor, shaped as X"
Y_DY_DOCS = [("Y", "output of the forward op"), ("dY", "gradient of Y")]


def scratch(op: Operator, name: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A per-op scratch buffer, reused while shape and dtype stay the same."""
    buf = op.__dict__.get(name)
    if buf is None or buf.shape != shape or buf.dtype != dtype:
        buf = np.empty(shape, dtype)
        op.__dict__[name] = buf
    return buf


def float_input(op: Operator, i: int) -> np.ndarray:
    """Input ``i``; TypeMismatchError naming op and blob unless it holds floats."""
    x = op.input(i)
    if x.dtype.kind != "f":
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must hold floats, got {x.dtype} {list(x.shape)}"
        )
    return x


def check_same_shape(op: Operator, i: int, j: int, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') has shape {list(a.shape)} but input {j} "
            f"('{op.input_names[j]}') has shape {list(b.shape)}; they must match"
        )


# -- forward ops ---------------------------------------------------------------------------------


class Activation(Operator):
    """A float activation Y = f(X): run() checks X and sizes Y; subclasses write ``forward``."""

    def run(self) -> None:
        x = float_input(self, 0)
        self.forward(x, self.output(0, x.shape, x.dtype))

    def forward(self, x: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError


def activation_op(name: str, flops: float, *, args: Any = (), y_doc: str = Y_DOC) -> Callable[[type], type]:
    """Class decorator registering the activation ``name``: one input X, one output Y shaped as
    X, in place allowed, ``flops`` per element. The class docstring is the op's doc."""
    return register_op(
        name,
        input_docs=X_DOCS,
        output_docs=[("Y", y_doc)],
        args=args,
        allow_inplace={(0, 0)},
        infer=same_as_input(0),
        cost=pointwise_cost(flops),
        category="activation",
        input_types="numeric",
    )


# -- gradient ops --------------------------------------------------------------------------------


class PointwiseGradient(Operator):
    """dX from same-shaped float inputs (some of X, Y, dY): run() checks them and sizes dX as the
    last input; subclasses write ``grad(*inputs, dx)``. With ``same_size`` (set by
    ``pointwise_gradient``) the inputs need only hold as many elements as input 0, whose shape
    they and dX take."""

    same_size = False

    def run(self) -> None:
        ins = [float_input(self, i) for i in range(len(self.inputs))]
        if self.same_size:
            for i in range(1, len(ins)):
                if ins[i].size != ins[0].size:
                    raise ShapeError(
                        f"{self.describe()}: input {i} ('{self.input_names[i]}') holds {ins[i].size} elements "
                        f"{list(ins[i].shape)} but input 0 ('{self.input_names[0]}') {ins[0].size} "
                        f"{list(ins[0].shape)}; the sizes must be equal"
                    )
            ins = [ins[0]] + [x.reshape(ins[0].shape) for x in ins[1:]]
            out = ins[0]
        else:
            for i in range(1, len(ins)):
                check_same_shape(self, 0, i, ins[0], ins[i])
            out = ins[-1]
        self.grad(*ins, self.output(0, out.shape, out.dtype))

    def grad(self, *arrays: np.ndarray) -> None:
        raise NotImplementedError


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def pointwise_gradient(
    forward: type[Operator], input_docs: list = Y_DY_DOCS, *, refuse_in_place: bool = False, same_size: bool = False
) -> Callable[[type[Operator]], type[Operator]]:
    """Class decorator registering ``<Forward>Gradient`` and the forward op's gradient maker.

    ``input_docs`` name the inputs, in order, among X (the forward input), Y (its output) and
    dY (Y's gradient); the op writes dX, may overwrite dY in place, takes the forward op's
    arguments (the maker copies them), and its doc is the class docstring. With
    ``refuse_in_place`` the maker raises GradientError for an in-place forward op (whose X the
    gradient needs but the op overwrote). With ``same_size`` (Caffe2 enforces only equal element
    counts, e.g. SeluGradient) the inputs may differ in shape and dX is shaped as input 0.
    """
    fwd = forward.schema.type
    wiring = {"X": lambda g: g.I(0), "Y": lambda g: g.O(0), "dY": lambda g: g.GO(0)}
    reads = [wiring[name] for name, _ in input_docs]
    dy_index = [name for name, _ in input_docs].index("dY")

    def maker(g):
        if refuse_in_place and g.I(0) == g.O(0):
            raise GradientError(
                f"{g._where()}: cannot compute the {fwd.lower()} gradient of an in-place {fwd} "
                f"('{g.I(0)}' is both input and output): the gradient needs X"
            )
        return [g.op(f"{fwd}Gradient", [read(g) for read in reads], [g.GI(0)])]

    def deco(cls: type[Operator]) -> type[Operator]:
        cls = register_op(
            f"{fwd}Gradient",
            inputs=len(input_docs),
            input_docs=input_docs,
            output_docs=[("dX", "gradient of X")],
            allow_inplace={(dy_index, 0)},
            infer=same_as_input(0 if same_size else len(input_docs) - 1),
            cost=pointwise_cost(2),
            category="activation",
            private=True,
            input_types="numeric",
            same_shape=[] if same_size else [tuple(range(len(input_docs)))],
        )(cls)
        cls.same_size = same_size  # type: ignore[attr-defined]
        # The gradient op reads the forward op's arguments: declare them so they parse without
        # "unknown argument" warnings.
        cls.schema.args = dict(forward.schema.args)
        # Named as a hand-written maker of the forward's module would be (the catalogue shows it).
        maker.__name__ = maker.__qualname__ = f"_{_snake(fwd)}_grad"
        maker.__module__ = cls.__module__
        gradient(fwd)(maker)
        return cls

    return deco
