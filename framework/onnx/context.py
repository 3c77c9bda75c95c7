"""The state of one export: ONNX nodes emitted so far, initializers, SSA names and blob shapes.

Caffe2 nets write blobs in place (``Relu(X) -> X``); ONNX graphs are SSA. Every write of a blob
gets a fresh ONNX name (the first write keeps the blob's name, later ones ``name__1``,
``name__2``...); readers see the current version. ``finish()`` gives the net's external outputs
their Caffe2 names back (the last version is renamed, earlier ones keep SSA names).

Converters (``framework/onnx/convert_*.py``) see each op with its parsed arguments (``Args``,
Caffe2 defaults filled) and the exact shapes and dtypes of its inputs and outputs, taken from a
run of the net in our engine, so Caffe2's shape-dependent semantics (legacy broadcast, legacy_pad,
FC flattening...) become explicit ONNX attributes and constants.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from framework.errors import FrameworkError

__all__ = ["ExportContext", "NotExportable", "OnnxExportError", "register_converter", "CONVERTERS"]


class OnnxExportError(FrameworkError, ValueError):
    """The net cannot be exported: lists every op that has no ONNX expression."""


class NotExportable(Exception):
    """Raised by a converter: this op, with these arguments, has no ONNX expression (the reason)."""


# Caffe2 op type -> converter(ctx, op) emitting ONNX nodes.
CONVERTERS: dict[str, Callable[["ExportContext", "OpView"], None]] = {}


def register_converter(*types: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for t in types:
            CONVERTERS[t] = fn
        return fn

    return deco


class OpView:
    """One Caffe2 op as a converter sees it: type, args, input/output blob names, shapes and dtypes."""

    def __init__(self, index: int, op_def: Any, args: Any, in_specs: list, out_specs: list) -> None:
        self.index = index
        self.type = op_def.type
        self.name = op_def.name
        self.inputs = list(op_def.input)
        self.outputs = list(op_def.output)
        self.args = args
        self.in_shapes = [tuple(s[0]) for s in in_specs]
        self.in_dtypes = [s[1] for s in in_specs]
        self.out_shapes = [tuple(s[0]) for s in out_specs]
        self.out_dtypes = [s[1] for s in out_specs]

    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)

    def has(self, name: str) -> bool:
        return self.args.has(name)


class ExportContext:
    def __init__(self, opset: int, reserved: Sequence[str] = ()) -> None:
        from onnx import helper

        self.helper = helper
        self.opset = opset
        self.batch: int | None = None  # the traced batch size when axis 0 is dynamic (exporter.export)
        self.nodes: list = []
        self.initializers: dict[str, np.ndarray] = {}
        self.current: dict[str, str] = {}  # Caffe2 blob -> current ONNX name
        self.used: set[str] = set(reserved)
        self._counter = 0
        self.pending_transposes: list = []  # (tmp, perm, out) of an NHWC op's output Transpose
        self.initial_values: dict[str, np.ndarray] = {}  # Caffe2 blob -> value from the init net

    def initial_value(self, blob: str) -> np.ndarray | None:
        """The init-net value of ``blob`` if it still holds it (never written by the predict net)."""
        if self.current.get(blob) == blob and blob in self.initial_values:
            return self.initial_values[blob]
        return None

    # -- names -------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        name = hint
        while name in self.used:
            self._counter += 1
            name = f"{hint}__{self._counter}"
        self.used.add(name)
        return name

    def bind_input(self, blob: str) -> None:
        """A graph input or initializer: readable under its own name."""
        self.used.add(blob)
        self.current[blob] = blob

    def read(self, blob: str) -> str:
        if blob not in self.current:
            raise NotExportable(f"reads blob '{blob}' that is neither an input, an initializer nor written before")
        return self.current[blob]

    def write(self, blob: str) -> str:
        """A fresh ONNX name for a new version of ``blob`` (made current)."""
        name = self.fresh(blob)
        self.current[blob] = name
        return name

    # -- emission ----------------------------------------------------------------------
    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | int = 1, **attrs: Any) -> list[str]:
        """Append one ONNX node; ``outputs`` as names or a count of fresh temporaries. Returns the outputs."""
        if isinstance(outputs, int):
            outputs = [self.fresh(f"{op_type.lower()}_tmp") for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.helper.make_node(op_type, list(inputs), list(outputs), **attrs))
        return list(outputs)

    def const(self, value: Any, hint: str = "const", dtype: Any = None) -> str:
        """An initializer holding ``value``."""
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.initializers[name] = arr
        return name

    def ints(self, values: Sequence[int], hint: str = "shape") -> str:
        return self.const(np.asarray(list(values), dtype=np.int64), hint)

    # -- common idioms -----------------------------------------------------------------
    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        """Reshape ``x`` to ``shape``; with a dynamic batch (``self.batch``, the traced size) a leading
        dim equal to it is left free (-1): the element count fixes it, so a tensor that does not grow
        with the batch keeps its size."""
        outs = [out] if out else 1
        shape = list(shape)
        if self.batch is not None and shape and shape[0] == self.batch and -1 not in shape:
            shape[0] = -1
        return self.node("Reshape", [x, self.ints(shape)], outs)[0]

    def transpose(self, x: str, perm: Sequence[int], out: str | None = None) -> str:
        outs = [out] if out else 1
        return self.node("Transpose", [x], outs, perm=list(perm))[0]

    def unsqueeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        outs = [out] if out else 1
        return self.node("Unsqueeze", [x, self.ints(axes, "axes")], outs)[0]

    def reduce(self, kind: str, x: str, axes: Sequence[int] | None, keepdims: int, out: str | None = None) -> str:
        """ONNX ReduceX with ``axes`` (None: all), as attribute or input by opset."""
        outs = [out] if out else 1
        if axes is None:
            return self.node(kind, [x], outs, keepdims=keepdims)[0]
        as_input = self.opset >= 18 or (kind == "ReduceSum" and self.opset >= 13)
        if as_input:
            return self.node(kind, [x, self.ints(axes, "axes")], outs, keepdims=keepdims)[0]
        return self.node(kind, [x], outs, axes=list(axes), keepdims=keepdims)[0]
