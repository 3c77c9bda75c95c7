"""Shared pieces of the ops whose blobs hold Python objects (queues, counters, mutexes, atomic
bools, stat registries): one lookup with one error, and the two op shapes they repeat.

- ``held(op, i, cls, maker)``: the ``cls`` object of input ``i``, else a TypeMismatchError naming
  op, blob, what it holds and the op that makes a ``cls``;
- ``unknown_outputs``: shape inference for object outputs (nothing known);
- ``register_create_op``: a 0-input, 1-output op putting a new object in its output;
- ``register_method_op``: a 1-input, 0-output op calling a method of the input's object
  (``CloseBlobsQueue``...).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from framework.errors import TypeMismatchError
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN, Arg

__all__ = ["held", "register_create_op", "register_method_op", "unknown_outputs"]


def held(op: Operator, i: int, cls: type, maker: str) -> Any:
    """The object of type ``cls`` in input ``i``; TypeMismatchError naming op, blob and maker otherwise."""
    obj = op.inputs[i].held
    if not isinstance(obj, cls):
        what = "nothing" if obj is None else type(obj).__qualname__
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') holds {what}, expected a {cls.__name__} "
            f"(made by {maker})"
        )
    return obj


def unknown_outputs(args: Any, ins: Any) -> list:
    return [UNKNOWN] * args.num_outputs


def _named(cls: type, op_type: str, module: str) -> type:
    cls.__name__ = cls.__qualname__ = op_type
    cls.__module__ = module  # the family module that registers it (docs group ops by it)
    return cls


def register_create_op(
    op_type: str, make: Callable[[Operator], Any], doc: str, output_doc: tuple[str, str], category: str,
    module: str, args: Sequence[Arg] = (), check: Callable[[Operator], None] | None = None,
) -> type:  # fmt: skip
    """Register ``op_type`` for the family module ``module`` (pass ``__name__``): no inputs, one
    output that gets ``make(op)``; ``check(op)`` validates the arguments at setup (raise
    ``op.arg_error``)."""

    class _Create(Operator):
        def setup(self) -> None:
            if check is not None:
                check(self)

        def run(self) -> None:
            self.outputs[0].reset(make(self))

    _Create.__doc__ = doc
    cls = _named(_Create, op_type, module)
    register_op(op_type, inputs=0, outputs=1, args=list(args), output_docs=[output_doc], infer=unknown_outputs,
                category=category)(cls)  # fmt: skip
    return cls


def register_method_op(
    op_type: str, cls: type, maker: str, method: str, doc: str, input_doc: tuple[str, str], category: str,
    module: str,
) -> type:  # fmt: skip
    """Register ``op_type`` for the family module ``module``: one input holding a ``cls`` (made by
    ``maker``), no outputs; runs ``obj.<method>()``."""

    class _Call(Operator):
        def run(self) -> None:
            getattr(held(self, 0, cls, maker), method)()

    _Call.__doc__ = doc
    op_cls = _named(_Call, op_type, module)
    register_op(op_type, inputs=1, outputs=0, input_docs=[input_doc], infer=unknown_outputs, category=category)(op_cls)
    return op_cls
