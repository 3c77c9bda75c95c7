"""Run a Caffe2 net in our engine, export it, and run the ONNX model in onnxruntime and in onnx's
ReferenceEvaluator on the same inputs; outputs must agree."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from framework.memory.workspace import Workspace
from framework.onnx import export


def run_caffe2(net, ws: Workspace, feeds: dict, outputs: Sequence[str]) -> list:
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(net)
    return [np.asarray(ws.fetch_blob(b)) for b in outputs]


# onnx 1.23's ReferenceEvaluator LRN loops over the batch dimension instead of the channels
# (onnx/reference/ops/op_lrn.py: ``for c in range(x.shape[0])``): its LRN results are wrong.
REFERENCE_BUGS = {"LRN"}


def run_onnx(model, feeds: dict) -> tuple[list, list | None]:
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    f = {k: v for k, v in feeds.items() if k in names}
    if any(n.op_type in REFERENCE_BUGS for n in model.graph.node):
        return sess.run(None, f), None
    return sess.run(None, f), ReferenceEvaluator(model).run(None, f)


def assert_close(name: str, got, want, rtol: float, atol: float) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=name)


def check_export(
    net, ws: Workspace, feeds: dict, rtol: float = 1e-4, atol: float = 1e-5, opset=None, scale_tol: float = 0.0, **kw
):
    """Export ``net`` (parameters from ``ws``), compare onnxruntime and ReferenceEvaluator to our engine.
    ``scale_tol``: absolute tolerance as a fraction of each output's largest magnitude (deep nets)."""
    value_info = {k: (_elem(v.dtype), v.shape) for k, v in feeds.items()}
    model = export(net, value_info=value_info, workspace=ws, opset=opset, **kw)
    outs = [o.name for o in model.graph.output]
    want = run_caffe2(net, ws, feeds, outs)
    got_ort, got_ref = run_onnx(model, feeds)
    for i, (n, w, g) in enumerate(zip(outs, want, got_ort)):
        if scale_tol and w.size and w.dtype.kind == "f":
            atol = max(atol, scale_tol * float(np.abs(w).max()))
        assert_close(f"{n} (onnxruntime)", g, w, rtol, atol)
        if got_ref is not None:
            assert_close(f"{n} (ReferenceEvaluator)", got_ref[i], w, rtol, atol)
    return model


def _elem(dtype) -> int:
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
