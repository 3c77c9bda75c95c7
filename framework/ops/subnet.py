"""What control-flow ops need from the net layer, received rather than imported.

Control-flow ops (If, While, Do, ONNXWhile, RecurrentNetwork) hold nested
NetDefs. Building and running a net is the net layer's job, and the ops layer
must not import it (docs/architecture.md: imports point down), so the net layer
hands these callables down (``framework.runtime.services.NET``) when it loads:

- ``create_net(net_def, ws)``: validate ``net_def`` and build it bound to the
  blobs of ``ws``; returns an object with ``run()`` (a compiled net: its ops
  are built once and reused on every run, no re-validation);
- ``compile_net(net_def)`` / ``bind_net(compiled, ws)``: the same in two
  halves, so a step net validated once is bound to one workspace per time step;
- ``backward_pass(ops, ys)``: the gradient ops of ``ops`` for the initial
  gradients ``ys`` ({blob: gradient blob}) and the map blob -> gradient, used
  by the gradient makers of If, Do and While.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from framework.errors import ArgumentError, NetError
from framework.proto.framework_pb2 import NetDef
from framework.runtime.services import NET

MAX_NESTING = 64  # nested nets being built at once, per thread
_DEPTH = threading.local()


def create_net(net_def: NetDef, ws: Any) -> Any:
    return NET.get("create_subnet")(net_def, ws)


def compile_net(net_def: NetDef) -> Any:
    """Validate ``net_def`` once; the result is bound to any number of workspaces by bind_net."""
    return NET.get("compile_subnet")(net_def)


def bind_net(compiled: Any, ws: Any, compile_when_stable: bool = False) -> Any:
    """Build the ops of a compiled net against ``ws`` (no re-validation); returns an object with run().
    ``compile_when_stable``: compile its ops' fast paths only once two runs in a row saw the same arrays
    (for nets run few times per binding)."""
    return NET.get("bind_subnet")(compiled, ws, compile_when_stable=compile_when_stable)


def backward_pass(ops: Any, ys: dict[str, Any]) -> tuple[list, dict[str, Any]]:
    return NET.get("backward_pass")(ops, ys)


def net_arg(op: Any, name: str, required: bool = True) -> NetDef | None:
    """The NetDef argument ``name`` of ``op`` (an Operator), checked; None if absent and optional."""
    value = op.args.get(name)
    if value is None or (isinstance(value, list) and not value):
        if required:
            raise op.arg_error(f"argument '{name}' (a NetDef) is required")
        return None
    if not isinstance(value, NetDef):
        raise ArgumentError(f"{op.describe()}: argument '{name}' must be a NetDef, got {type(value).__name__}")
    return value


def subnet_error(op: Any, label: str, e: BaseException) -> BaseException:
    """An error raised while building nested net ``label`` of ``op``, with the path in front."""
    text = f"{op.describe()} / {label}: {e}"
    try:
        return type(e)(text)
    except Exception:
        return NetError(text)


def build(op: Any, net_def: NetDef, ws: Any, label: str) -> Any:
    """create_net with errors naming ``op / label``; NetError past MAX_NESTING nested nets (a file's
    nesting depth must end in a clear error, not in Python's recursion limit or a stack overflow)."""
    with nesting(op, label):
        try:
            return create_net(net_def, ws)
        except NetError as e:
            if getattr(e, "nesting", False):
                raise
            raise subnet_error(op, label, e) from e
        except Exception as e:
            raise subnet_error(op, label, e) from e


@contextlib.contextmanager
def nesting(op: Any, label: str) -> Iterator[None]:
    """One more level of nested nets (built or running) in this thread; NetError past MAX_NESTING.
    Ops that build their body lazily hold it while running the body too."""
    depth = getattr(_DEPTH, "n", 0)
    if depth >= MAX_NESTING:
        err = NetError(
            f"{op.describe()} / {label}: nets nested more than {MAX_NESTING} deep (If/Do/While/Loop bodies); "
            "deeper nesting is refused"
        )
        err.nesting = True  # raised as is through the levels above: one short message
        raise err
    _DEPTH.n = depth + 1
    try:
        yield
    finally:
        _DEPTH.n = depth
