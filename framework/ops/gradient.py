"""Gradient makers: how each op's gradient is expressed as more ops.

A maker is a function of a ``GradientContext`` that returns the gradient
OperatorDefs of one forward op, in terms of its inputs ``I(i)``, outputs
``O(i)``, output gradients ``GO(i)`` and input gradients ``GI(i)`` (named
``<input>_grad``), as Caffe2's GradientMakerBase does:

    @gradient("Relu")
    def _(g):
        return [g.op("ReluGradient", [g.O(0), g.GO(0)], [g.GI(0)])]

Gradient ops inherit the forward op's device option, engine and arguments
unless the maker says otherwise (``@gradient(..., copy_arguments=False)``).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from framework.errors import GradientError
from framework.ops.registry import get_schema, set_gradient
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef


class GradientSlice(NamedTuple):
    """A sparse gradient: rows ``indices`` of the blob get ``values``."""

    indices: str
    values: str


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_GRADIENT = _Marker("NO_GRADIENT")  # the op has no gradient: produces nothing
SHOULD_NOT_DO_GRADIENT = _Marker("SHOULD_NOT_DO_GRADIENT")  # asking is an error
GRADIENT_NOT_IMPLEMENTED = _Marker("GRADIENT_NOT_IMPLEMENTED")


class GradientContext:
    """What a maker sees: the forward op and its output gradients."""

    def __init__(
        self,
        op_def: OperatorDef,
        g_output: Sequence[Any],
        *,
        copy_arguments: bool = True,
        copy_device: bool = True,
        copy_engine: bool = True,
    ) -> None:
        self.def_ = op_def
        self.g_output = list(g_output)
        self.g_input: list[Any] = [None] * len(op_def.input)
        self.copy_arguments = copy_arguments
        self.copy_device = copy_device
        self.copy_engine = copy_engine

    # -- names ----------------------------------------------------------------
    def I(self, i: int) -> str:  # noqa: E743 - Caffe2's names
        return self.def_.input[i]

    def O(self, i: int) -> str:  # noqa: E743
        return self.def_.output[i]

    def GI(self, i: int) -> str:
        name = f"{self.def_.input[i]}_grad"
        self.g_input[i] = name
        return name

    def GI_I(self, i: int) -> str:
        return self._sparse(i)[0]

    def GI_V(self, i: int) -> str:
        return self._sparse(i)[1]

    def _sparse(self, i: int) -> GradientSlice:
        g = self.g_input[i]
        if not isinstance(g, GradientSlice):
            base = self.def_.input[i]
            g = GradientSlice(f"{base}_grad_indices", f"{base}_grad_values")
            self.g_input[i] = g
        return g

    def GO(self, i: int) -> str:
        g = self._go(i)
        if isinstance(g, GradientSlice):
            raise GradientError(
                f"{self._where()}: gradient of output '{self.def_.output[i]}' is sparse (expected dense)"
            )
        return g

    def GO_I(self, i: int) -> str:
        return self._go_sparse(i).indices

    def GO_V(self, i: int) -> str:
        return self._go_sparse(i).values

    def _go(self, i: int) -> Any:
        g = self.g_output[i] if i < len(self.g_output) else None
        if g is None:
            raise GradientError(f"{self._where()}: gradient of output '{self.def_.output[i]}' is not provided!")
        return g

    def _go_sparse(self, i: int) -> GradientSlice:
        g = self._go(i)
        if not isinstance(g, GradientSlice):
            raise GradientError(
                f"{self._where()}: gradient of output '{self.def_.output[i]}' is dense (expected sparse)"
            )
        return g

    def has_go(self, i: int) -> bool:
        return i < len(self.g_output) and self.g_output[i] is not None

    def set_dense(self, i: int, name: str) -> None:
        """Pass a gradient through to input ``i`` without an op (Sum, Add do this)."""
        self.g_input[i] = name

    def set_sparse(self, i: int, indices: str, values: str) -> None:
        self.g_input[i] = GradientSlice(indices, values)

    def arg(self, name: str, default: Any = None) -> Any:
        from framework.ops.arg_reader import ArgReader

        return ArgReader(self.def_).value(name, default)

    def has_arg(self, name: str) -> bool:
        """Does the forward op set argument ``name``?"""
        from framework.ops.arg_reader import ArgReader

        return ArgReader(self.def_).has(name)

    # -- building ops ---------------------------------------------------------
    def op(self, type_name: str, inputs: Sequence[str], outputs: Sequence[str], **kwargs: Any) -> OperatorDef:
        """An OperatorDef inheriting device/engine/arguments of the forward op (per flags)."""
        op = OperatorDef(type=type_name, input=list(inputs), output=list(outputs))
        op.is_gradient_op = True
        if self.copy_device and self.def_.HasField("device_option"):
            op.device_option.CopyFrom(self.def_.device_option)
        if self.copy_engine and self.def_.engine:
            op.engine = self.def_.engine
        if self.def_.name:
            op.name = self.def_.name + "_grad" if not self.def_.name.endswith("_grad") else self.def_.name
        overridden = set(kwargs)
        if self.copy_arguments:
            for a in self.def_.arg:
                if a.name not in overridden:
                    op.arg.add().CopyFrom(a)
        for k, v in kwargs.items():
            if v is not None:
                op.arg.append(make_argument(k, v))
        return op

    def _where(self) -> str:
        return f"gradient of {self.def_.type}" + (f' "{self.def_.name}"' if self.def_.name else "")


Maker = Callable[[GradientContext], list]


def gradient(
    type_name: str, *, copy_arguments: bool = True, copy_device: bool = True, copy_engine: bool = True
) -> Callable[[Maker], Maker]:
    """Decorator registering a gradient maker for ``type_name``."""

    def deco(fn: Maker) -> Maker:
        # read back by the gradient builder with getattr (a maker is a plain function)
        fn.copy_arguments = copy_arguments  # type: ignore[attr-defined]
        fn.copy_device = copy_device  # type: ignore[attr-defined]
        fn.copy_engine = copy_engine  # type: ignore[attr-defined]
        set_gradient(type_name, fn)
        return fn

    return deco


def no_gradient(*type_names: str) -> None:
    for t in type_names:
        set_gradient(t, NO_GRADIENT)


def should_not_do_gradient(*type_names: str) -> None:
    for t in type_names:
        set_gradient(t, SHOULD_NOT_DO_GRADIENT)


def gradient_not_implemented(*type_names: str) -> None:
    for t in type_names:
        set_gradient(t, GRADIENT_NOT_IMPLEMENTED)


def get_gradient_for_op(op_def: OperatorDef, g_output: Sequence[Any]) -> tuple[list[OperatorDef], list[Any]]:
    """(gradient ops, per-input gradient names or GradientSlices or None) for one forward op."""
    schema = get_schema(op_def.type)
    maker = schema.gradient
    if len(g_output) != len(op_def.output):
        raise GradientError(
            f"gradient of {op_def.type}: expected {len(op_def.output)} output gradients, got {len(g_output)}"
        )
    if maker is None or maker is GRADIENT_NOT_IMPLEMENTED:
        raise GradientError(f"gradient maker for operator {op_def.type} not implemented")
    if maker is SHOULD_NOT_DO_GRADIENT:
        raise GradientError(f"operator {op_def.type} should not be differentiated (its gradient must not be asked for)")
    if maker is NO_GRADIENT:
        return [], [None] * len(op_def.input)
    from framework.ops.operator import check_schema

    check_schema(schema, op_def)
    ctx = GradientContext(
        op_def,
        g_output,
        copy_arguments=maker.copy_arguments,
        copy_device=maker.copy_device,
        copy_engine=maker.copy_engine,
    )
    ops = maker(ctx) or []
    for op in ops:
        op.is_gradient_op = True
    for g in ctx.g_input:
        if isinstance(g, GradientSlice) and (not g.indices or not g.values):
            raise GradientError(f"gradient of {op_def.type}: a sparse gradient needs both indices and values")
    return list(ops), ctx.g_input
