"""``caffe2.python.onnx.helper``: run Caffe2 ops and nets in a private workspace (the reference side of
ONNX conversion tests), read and write NetDef files, time a net or a PyTorch model.

- ``c2_native_run_op(op_def, inputs)`` / ``c2_native_run_net(init_net, predict_net, inputs)``: feed
  ``inputs`` (a dict by name, or a list: the op's inputs in order / the predict net's external inputs
  the init net left unset, else its first external inputs), run, and return ``(workspace, outputs)``
  with the outputs as a namedtuple by output name.
- ``dummy_name()`` (2018): a fresh helper-blob name; ``dummy_name(names)`` restarts the namer.
- ``load_caffe2_net(path)`` / ``save_caffe2_net(net, path, output_txt=False)``: binary NetDef files
  (``output_txt`` also writes the text form to ``path + "txt"``).
- ``benchmark_caffe2_model(init_net, predict_net, warmup_iters=3, main_iters=10, layer_details=True)``
  returns milliseconds per run; ``benchmark_pytorch_model(model, inputs, ...)`` the same for a callable.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from framework.caffe2.python.onnx.workspace import Workspace
from framework.errors import FrameworkError
from framework.proto import framework_pb2 as caffe2_pb2

__all__ = [
    "benchmark_caffe2_model",
    "benchmark_pytorch_model",
    "c2_native_run_net",
    "c2_native_run_op",
    "dummy_name",
    "load_caffe2_net",
    "save_caffe2_net",
]

log = logging.getLogger(__name__)


def _outputs(names: Sequence[str], values: Sequence[Any]) -> Any:
    """A namedtuple of ``values`` by ``names`` that also answers ``out["name"]`` (as onnx's namedtupledict)."""
    from onnx.backend.base import namedtupledict

    return namedtupledict("Outputs", list(names))(*values)


def dummy_name(used_names: Any = None) -> str | None:
    """The 2018 API: a fresh ``OC2_DUMMY_<n>`` name from the process-wide namer, or, given
    ``used_names``, restart that namer with those names taken (returns None)."""
    from framework.caffe2 import c_onnx

    if used_names is None:
        return c_onnx.new_dummy_name()
    c_onnx.reset_dummy_name(set(used_names))
    return None


def c2_native_run_op(op_def: Any, inputs: Any) -> tuple:
    ws = Workspace()
    if isinstance(inputs, dict):
        pairs = list(inputs.items())
    else:
        if len(op_def.input) != len(inputs):
            raise FrameworkError(
                f"c2_native_run_op: op {op_def.type} has {len(op_def.input)} inputs, {len(inputs)} values given"
            )
        pairs = list(zip(op_def.input, inputs))
    for key, value in pairs:
        ws.FeedBlob(key, value, op_def.device_option)
    ws.RunOperatorOnce(op_def)
    names = list(op_def.output)
    return ws, _outputs(names, [ws.FetchBlob(n) for n in names])


def c2_native_run_net(init_net: Any, predict_net: Any, inputs: Any, debug_arg: Any = None) -> tuple:
    ws = Workspace()
    if init_net:
        ws.RunNetOnce(init_net)
    if isinstance(inputs, dict):
        pairs = list(inputs.items())
    else:
        unset = [n for n in predict_net.external_input if not ws.HasBlob(n)]
        if len(unset) == len(inputs):
            pairs = list(zip(unset, inputs))
        else:
            if len(inputs) > len(predict_net.external_input):
                raise FrameworkError(
                    f"c2_native_run_net: {len(inputs)} inputs for net '{predict_net.name}' with "
                    f"{len(predict_net.external_input)} external inputs"
                )
            pairs = list(zip(predict_net.external_input, inputs))
    for key, value in pairs:
        ws.FeedBlob(key, value, predict_net.device_option)
    ws.RunNetOnce(predict_net)
    names = list(predict_net.external_output)
    return ws, _outputs(names, [ws.FetchBlob(n) for n in names])


def load_caffe2_net(file: str) -> Any:
    net = caffe2_pb2.NetDef()
    with open(file, "rb") as f:
        net.ParseFromString(f.read())
    return net


def save_caffe2_net(net: Any, file: str, output_txt: bool = False) -> None:
    with open(file, "wb") as f:
        f.write(net.SerializeToString())
    if output_txt:
        with open(file + "txt", "w") as f:
            f.write(str(net))


def benchmark_caffe2_model(
    init_net: Any, predict_net: Any, warmup_iters: int = 3, main_iters: int = 10, layer_details: bool = True
) -> float:
    """Milliseconds per run of ``predict_net`` (after ``init_net`` ran once)."""
    ws = Workspace()
    if init_net:
        ws.RunNetOnce(init_net)
    ws.CreateNet(predict_net)
    results = ws.BenchmarkNet(predict_net.name, warmup_iters, main_iters, layer_details)
    del ws
    return results[0]


def benchmark_pytorch_model(
    model: Any, inputs: Sequence[Any], training: bool = False, warmup_iters: int = 3, main_iters: int = 10,
    verbose: bool = False,
) -> float:  # fmt: skip
    """Milliseconds per call of ``model(*inputs)`` over ``main_iters`` calls after ``warmup_iters``."""
    for _ in range(warmup_iters):
        model(*inputs)
    total = 0.0
    for _ in range(main_iters):
        start = time.time()
        model(*inputs)
        total += time.time() - start
    log.info("The PyTorch model execution time per iter is %s milliseconds", total / main_iters * 1000)
    return total * 1000 / main_iters
