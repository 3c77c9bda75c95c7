"""The benchmarked nets exported to ONNX by our own exporter, and runners for onnxruntime and onnx's
``ReferenceEvaluator`` over them: every contender runs the framework's own net, with the same weights.
``onnx`` and ``onnxruntime`` are optional: callers catch ImportError and leave the column empty.

    model = exported(mlp_net_def(), {"W0": w0, ...}, {"data": x})
    run, get = ort_runner(model, {"data": x})   # run() does one inference; get() returns the output
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def exported(net_def: Any, params: dict[str, np.ndarray], inputs: dict[str, np.ndarray]):
    """The framework's own ``net_def`` as ONNX, through our exporter (``framework.onnx.export``): the weights
    in ``params`` become initializers, ``inputs`` the graph inputs (their shapes fixed)."""
    from framework.memory.workspace import Workspace
    from framework.onnx import export

    ws = Workspace()
    for name, value in params.items():  # blobs in the workspace become initializers; inputs stay inputs
        ws.feed_blob(name, value)
    return export(net_def, input_shapes={k: v.shape for k, v in inputs.items()}, workspace=ws)


def ort_runner(model, feeds: dict[str, np.ndarray], threads: int = 1) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(run, get_output) over an onnxruntime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out_name = sess.get_outputs()[0].name
    res: list = [None]
    run_inner = sess.run

    def run() -> None:
        res[0] = run_inner([out_name], feeds)

    run()
    return run, lambda: res[0][0]


def reference_runner(model, feeds: dict[str, np.ndarray]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(run, get_output) over ``onnx.reference.ReferenceEvaluator``."""
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    res: list = [None]
    run_inner = ref.run

    def run() -> None:
        res[0] = run_inner(None, feeds)

    run()
    return run, lambda: res[0][0]
