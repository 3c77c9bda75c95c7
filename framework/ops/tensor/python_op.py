"""``Python`` / ``PythonGradient`` (Caffe2's python ops, ``core.CreatePythonOperator``): an op
that calls a Python function registered *in this process*.

A net names its function by a token (argument ``token``). Tokens come only from
``register_python_function`` in the running program; a NetDef read from a file can name a
token, never code: an unknown token is an error, and nothing is imported or evaluated.

``f`` may also be a builder ``(func, args, kwargs)`` (Caffe2's tuple form, ``Net.Python``): each
operator instance calls ``func(*args, **kwargs)`` once when it is created and uses the callable it
returns (so every instance of a task run with ``num_instances`` keeps its own Python state). Caffe2
pickles the tuple into the op; here it is registered in this process like a function.

The function is called as ``f(inputs, outputs)`` (``f(inputs, outputs, workspace)`` with
``pass_workspace``), as in Caffe2: ``inputs[i].data`` is input i as a numpy array (and
``.shape``); ``outputs[j].reshape(shape)`` then ``outputs[j].data[...] = ...`` writes an
output in place, or ``outputs[j].feed(array)`` stores a copy. The gradient op calls
``grad_f(inputs, outputs)`` with inputs = forward inputs + forward outputs + output gradients
and outputs = input gradients (``grad_input_indices`` / ``grad_output_indices`` pick subsets).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

import numpy as np

from framework.errors import ArgumentError, GradientError, OperatorError, error_like
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, REQUIRED, STRING, UNKNOWN, Arg

_FUNCTIONS: dict[str, tuple[Callable, Callable | None, bool]] = {}
_LOCK = threading.Lock()
_COUNTER = itertools.count()


class PythonBuilder:
    """A ``(func, args, kwargs)`` builder: ``build()`` returns ``func(*args, **kwargs)``."""

    def __init__(self, spec: tuple) -> None:
        if len(spec) != 3 or not callable(spec[0]):
            raise TypeError("a Python op builder is a tuple (func, args, kwargs) with a callable func")
        self.func, self.args, self.kwargs = spec[0], tuple(spec[1]), dict(spec[2])

    def build(self) -> Callable:
        fn = self.func(*self.args, **self.kwargs)
        if not callable(fn):
            raise TypeError(f"the Python op builder {self.func!r} returned a non-callable {type(fn).__name__}")
        return fn


def register_python_function(f: Any, grad_f: Any = None, pass_workspace: bool = False, name: str | None = None) -> str:
    """Register ``f`` (and its gradient ``grad_f``) for Python ops; returns the token to pass.
    Either may be a ``(func, args, kwargs)`` builder tuple (module doc); both or neither."""
    if isinstance(f, tuple) or isinstance(grad_f, tuple):
        if grad_f is not None and isinstance(f, tuple) != isinstance(grad_f, tuple):
            raise TypeError("A tuple has to be passed to both f and grad_f or neither.")
        f = PythonBuilder(f)
        grad_f = PythonBuilder(grad_f) if grad_f is not None else None
    elif not callable(f) or (grad_f is not None and not callable(grad_f)):
        raise TypeError("register_python_function: f and grad_f must be callables")
    target = f.func if isinstance(f, PythonBuilder) else f
    base = name or getattr(target, "__qualname__", None) or type(target).__name__
    with _LOCK:
        token = f"{base}:{next(_COUNTER)}"
        _FUNCTIONS[token] = (f, grad_f, bool(pass_workspace))
    return token


def registered_function(token: str) -> tuple[Callable, Callable | None, bool] | None:
    return _FUNCTIONS.get(token)


class _In:
    """A forward input as Caffe2's TensorCPU view: ``data`` (numpy, no copy), ``shape``."""

    def __init__(self, array: np.ndarray) -> None:
        self.data = array
        self.shape = array.shape
        self._shape = array.shape

    def fetch(self) -> np.ndarray:
        return self.data.copy()


class _Out:
    """An output: ``reshape(shape)`` + ``data``, or ``feed(array)``; float32 unless fed."""

    def __init__(self, op: Operator, i: int) -> None:
        self._op, self._i = op, i
        self._shape: tuple | None = None
        self._dtype: Any = np.dtype(np.float32)

    def reshape(self, shape: Any) -> None:
        self._shape = tuple(int(d) for d in shape)

    def init(self, shape: Any, data_type: Any = None) -> None:
        self.reshape(shape)
        if data_type is not None:
            from framework.memory.typemeta import TypeMeta

            self._dtype = TypeMeta.from_proto(int(data_type)).dtype

    @property
    def shape(self) -> tuple:
        return self._shape if self._shape is not None else ()

    @property
    def data(self) -> np.ndarray:
        if self._shape is None:
            raise OperatorError(
                f"{self._op.describe()}: output {self._i} ('{self._op.output_names[self._i]}') was read "
                "before reshape(); call outputs[i].reshape(shape) or outputs[i].feed(array) first"
            )
        return self._op.output(self._i, self._shape, self._dtype)

    def feed(self, value: Any) -> bool:
        arr = np.asarray(value)
        self._shape, self._dtype = arr.shape, arr.dtype
        np.copyto(self._op.output(self._i, arr.shape, arr.dtype), arr)
        return True


class _PythonBase(Operator):
    pick = 0  # 0: the forward function, 1: the gradient function

    def setup(self) -> None:
        entry = registered_function(self.args.token)
        if entry is None:
            raise ArgumentError(
                f"{self.describe()}: no Python function is registered under token {self.args.token!r} in this "
                "process (a net names functions the program registered with core.CreatePythonOperator; "
                "it never carries code)"
            )
        fn = entry[self.pick]
        if fn is None:
            raise ArgumentError(f"{self.describe()}: the function of token {self.args.token!r} has no gradient")
        if isinstance(fn, PythonBuilder):  # one function per operator instance
            try:
                fn = fn.build()
            except Exception as e:
                raise error_like(
                    type(e), OperatorError, f"{self.describe()}: the Python op builder raised {type(e).__name__}: {e}"
                ) from e
        self._fn, self._pass_ws = fn, entry[2]

    def run(self) -> None:
        ins = [_In(self.input(i)) for i in range(len(self.inputs))]
        outs = [_Out(self, j) for j in range(len(self.outputs))]
        try:
            if self._pass_ws:
                self._fn(ins, outs, _caffe2_view(self.workspace))
            else:
                self._fn(ins, outs)
        except Exception as e:
            raise error_like(
                type(e), OperatorError, f"{self.describe()}: the Python function raised {type(e).__name__}: {e}"
            ) from e


class _BlobsOf:
    """Caffe2's ``ws.blobs``: ``ws.blobs["x"]`` is the Blob (``.fetch()``, ``.feed(v)``), ``"x" in ws.blobs``;
    calling it lists the names, as this framework's ``Workspace.blobs()``."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws

    def __call__(self) -> list[str]:
        return self._ws.blobs()

    def __getitem__(self, name: Any) -> Any:
        return self._ws.get_blob(str(name))

    def __contains__(self, name: Any) -> bool:
        return self._ws.has_blob(str(name))

    def __iter__(self) -> Any:
        return iter(self._ws.blobs())

    def __len__(self) -> int:
        return len(self._ws.blobs())

    def keys(self) -> list[str]:
        return self._ws.blobs()


class _Caffe2Workspace:
    """The workspace a ``pass_workspace`` function receives: the op's workspace (every attribute passes
    through) whose ``blobs`` is Caffe2's mapping, as the ``C.Workspace`` Caffe2 hands its Python ops."""

    __slots__ = ("_ws",)

    def __init__(self, ws: Any) -> None:
        object.__setattr__(self, "_ws", ws)

    @property
    def blobs(self) -> _BlobsOf:
        return _BlobsOf(self._ws)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)


def _caffe2_view(ws: Any) -> Any:
    """``ws`` itself when its ``blobs`` is already Caffe2's mapping (a ``C.Workspace``), else a view that adds it."""
    return ws if isinstance(getattr(type(ws), "blobs", None), property) else _Caffe2Workspace(ws)


_ARGS = [
    Arg("token", STRING, REQUIRED, "the function's token from register_python_function / CreatePythonOperator"),
    Arg("grad_input_indices", INTS, [], "inputs that get a gradient (default: all)"),
    Arg("grad_output_indices", INTS, [], "outputs whose gradients the gradient function reads (default: all)"),
    Arg("pass_workspace", INT, 0, "ignored here: fixed when the function is registered, as in Caffe2"),
]


@register_op(
    "Python",
    inputs=(0, float("inf")),
    outputs=(0, float("inf")),
    args=_ARGS,
    input_docs=[("inputs", "any tensors, given to the function as inputs[i].data")],
    output_docs=[("outputs", "written by the function")],
    infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
    allow_inplace=lambda i, o: True,  # as Caffe2's schema: any output may be any input
    category="python",
)
class Python(_PythonBase):
    """Calls the Python function registered under ``token`` in this process (Caffe2's Python op;
    see ``core.CreatePythonOperator``). Output shapes are whatever the function writes."""


@register_op(
    "PythonGradient",
    inputs=(0, float("inf")),
    outputs=(0, float("inf")),
    args=_ARGS,
    input_docs=[("inputs", "forward inputs, forward outputs, then output gradients")],
    output_docs=[("grads", "input gradients")],
    infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
    allow_inplace=lambda i, o: True,
    category="python",
    private=True,
)
class PythonGradient(_PythonBase):
    """Calls the gradient function registered with the forward op's token."""

    pick = 1


@gradient("Python")
def _python_grad(g):
    """Caffe2's GetPythonGradient: (inputs, outputs, output grads) -> input grads."""
    token = g.arg("token")
    entry = registered_function(token) if token is not None else None
    if entry is not None and entry[1] is None:
        raise GradientError(f"{g._where()}: the Python function {token!r} was registered without grad_f")
    gi_idx = list(g.arg("grad_input_indices", []) or range(len(g.def_.input)))
    go_idx = list(g.arg("grad_output_indices", []) or range(len(g.def_.output)))
    ins = [g.I(i) for i in range(len(g.def_.input))] + [g.O(j) for j in range(len(g.def_.output))]
    ins += [g.GO(j) for j in go_idx]
    return [g.op("PythonGradient", ins, [g.GI(i) for i in gi_idx])]
