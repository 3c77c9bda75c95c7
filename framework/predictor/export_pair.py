"""Export a trained model for inference: a predict net cut out of the training
net, and an init net that recreates the trained weights.

- ``extract_predict_net(net, inputs, outputs)``: the forward ops between the
  first op reading ``inputs`` and the last op writing ``outputs`` whose inputs
  are known and that the outputs depend on. Gradient ops, the loss (reads the
  labels), ``Iter``/``LearningRate``/update ops fall away. ``SpatialBN`` and
  ``Dropout`` are switched to test mode (``is_test=1``, one output).
- ``init_net_from_workspace(ws, blobs)``: ``GivenTensor*Fill`` ops holding
  the current values of ``blobs`` (Caffe2's mobile_exporter format).
- ``export_model(ws, model_or_net, inputs, outputs, folder)``: both, written
  as ``predict_net.pb`` / ``predict_net.pbtxt`` and ``init_net.pb`` / ``init_net.pbtxt``.

>>> # predict, init = export_model(ws, model, ["data"], ["softmax"], "out/")
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.predictor.mobile_exporter import add_tensor
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef, OperatorDef

__all__ = ["export_model", "extract_predict_net", "init_net_from_workspace", "write_net"]

_TEST_MODE_OPS = {"SpatialBN", "Dropout"}


def _net_def(net: Any) -> NetDef:
    if isinstance(net, NetDef):
        return net
    for attr in ("net", "Proto"):
        if attr == "net" and hasattr(net, "param_init_net"):
            return net.net.Proto()
        if attr == "Proto" and hasattr(net, "Proto"):
            return net.Proto()
    raise TypeError(f"expected a NetDef, a core.Net or a ModelHelper, got {type(net).__name__}")


def _test_mode(op: OperatorDef) -> OperatorDef:
    op = OperatorDef.FromString(op.SerializeToString())
    if op.type not in _TEST_MODE_OPS:
        return op
    kept = [a for a in op.arg if a.name != "is_test"]
    del op.arg[:]
    op.arg.extend(kept)
    op.arg.append(make_argument("is_test", 1))
    del op.output[1:]
    return op


def extract_predict_net(
    net: Any,
    input_blobs: Sequence[str],
    output_blobs: Sequence[str],
    name: str | None = None,
    params: Iterable[str] | None = None,
) -> tuple[NetDef, list[str]]:
    """The inference net and the list of parameters it reads (its other external inputs).

    ``params``: the blobs the inference net may read besides the inputs (a
    ModelHelper's parameters by default). Without it, any blob the net reads
    before writing it counts (labels too, so ask for outputs that need no label).
    Raises FrameworkError if no op reads the inputs or none writes the outputs.
    """
    if params is None and hasattr(net, "GetAllParams"):
        params = [str(p) for p in net.GetAllParams("")]
    src = _net_def(net)
    inputs = [str(b) for b in input_blobs]
    outputs = [str(b) for b in output_blobs]
    ops = [op for op in src.op if not op.is_gradient_op]
    first = [j for j, op in enumerate(ops) if set(inputs) & set(op.input) and op.type != "StopGradient"]
    last = [j for j, op in enumerate(ops) if set(outputs) & set(op.output)]
    if not first:
        raise FrameworkError(f"export: no op of net '{src.name}' reads the inputs {inputs}")
    if not last:
        raise FrameworkError(f"export: no op of net '{src.name}' writes the outputs {outputs}")
    window = ops[first[0] : last[-1] + 1]

    # Forward: keep ops whose inputs are known (the inputs or parameters, never labels or
    # blobs made by skipped ops).
    read_first: set[str] = set()  # blobs read in the window before any window op writes them
    written: set[str] = set()
    for op in window:
        read_first.update(b for b in op.input if b not in written)
        written.update(op.output)
    if params is not None:
        known = {str(p) for p in params}
    else:
        known = read_first - {b for op in ops[: first[0]] for b in op.output if b not in src.external_input}
    known |= set(inputs)
    forward = []
    for op in window:
        if known.issuperset(op.input):
            forward.append(op)
            known.update(op.output)
    # Backward: only what the outputs depend on.
    needed = set(outputs)
    keep: list[OperatorDef] = []
    for op in reversed(forward):
        if needed & set(op.output):
            keep.append(op)
            needed.update(op.input)
    keep.reverse()
    missing = set(outputs) - {b for op in keep for b in op.output}
    if missing:
        raise FrameworkError(f"export: outputs {sorted(missing)} cannot be computed from the inputs {inputs}")

    out = NetDef(name=name or f"{src.name}_predict")
    if src.HasField("type"):
        out.type = src.type
    out.op.extend(_test_mode(op) for op in keep)
    written = set()
    used: list[str] = []
    for op in out.op:
        for b in op.input:
            if b not in written and b not in inputs and b not in used:
                used.append(b)
        written.update(op.output)
    out.external_input.extend(inputs + used)
    out.external_output.extend(outputs)
    return out, used


def init_net_from_workspace(ws: Workspace, blobs: Iterable[str], name: str = "init") -> NetDef:
    """An init net of GivenTensor*Fill ops holding the values of ``blobs`` in ``ws``.

    The ops are made by ``predictor.mobile_exporter.add_tensor``. Raises
    FrameworkError for a blob missing from ``ws`` or of a dtype no fill holds.
    """
    net = NetDef(name=name)
    for b in blobs:
        if not ws.has_blob(b):
            raise FrameworkError(f"export: parameter '{b}' is not in the workspace (run the init net / train first)")
        try:
            add_tensor(net, b, ws.fetch_blob(b))
        except FrameworkError as e:
            raise FrameworkError(f"export: parameter '{b}' cannot go into the init net: {e}") from e
        net.external_output.append(b)
    return net


def write_net(net: NetDef, path_without_ext: str | os.PathLike) -> tuple[str, str]:
    """Write ``<path>.pb`` (binary) and ``<path>.pbtxt`` (text); returns both paths."""
    from framework.proto.io import write_binary, write_text

    base = os.fspath(path_without_ext)
    write_binary(net, base + ".pb")
    write_text(net, base + ".pbtxt")
    return base + ".pb", base + ".pbtxt"


def export_model(
    ws: Workspace,
    model_or_net: Any,
    input_blobs: Sequence[str],
    output_blobs: Sequence[str],
    folder: str | os.PathLike | None = None,
) -> tuple[NetDef, NetDef]:
    """(predict_net, init_net) of a trained model; written to ``folder`` if given."""
    predict, params = extract_predict_net(model_or_net, input_blobs, output_blobs)
    init = init_net_from_workspace(ws, params, name=predict.name.replace("_predict", "") + "_init")
    if folder is not None:
        os.makedirs(folder, exist_ok=True)
        write_net(predict, os.path.join(folder, "predict_net"))
        write_net(init, os.path.join(folder, "init_net"))
    return predict, init
