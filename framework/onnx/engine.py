"""How the ONNX backend hands a translated predict net to the engine.

An ONNX model's only observable values are its graph outputs (a rep's ``run`` returns them and nothing
else), so the predict net goes through the same inference pass a Caffe2 net gets through ``Predictor``
(``framework.net.optimize.optimize_inference``: identities dropped, BN and per-channel affine ops
folded into convs, Conv+Sum/Relu fused, concatenations written in place, buffers shared by liveness)
with the graph outputs as the only observable blobs, and the memory planner sizing buffers from the
shapes of the first inputs fed. The folded parameters are written into the rep's workspace; the
originals stay, so the net as translated can run again there to explain an error of the optimized one.
A net holding nested nets (control flow: their bodies read outer blobs by name) runs as translated.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.net.optimize import optimize_inference

__all__ = ["engine_net"]


def engine_net(ws: Any, predict: Any, outputs: Sequence[str], feeds: dict[str, Any]) -> tuple[Any, Any]:
    """(the created net, the NetDef it runs) for ``predict`` in ``ws``: the inference-optimized copy
    of ``predict`` with ``outputs`` observable; ``feeds`` (name -> value) give the input shapes."""
    if any(_holds_net(op) for op in predict.op):  # nested nets read outer blobs by name: keep every name
        return ws.create_net(predict, overwrite=True), predict
    shapes = {k: tuple(v.shape) for k, v in feeds.items() if isinstance(v, np.ndarray)}
    optimized = optimize_inference(predict, ws, outputs=list(outputs), shapes=shapes)
    return ws.create_net(optimized, overwrite=True), optimized


def _holds_net(op: Any) -> bool:
    """Does ``op`` carry a nested NetDef (ONNX If/Loop/Scan bodies, Caffe2's If/While/RecurrentNetwork)?"""
    return bool(op.control_input) or any(a.HasField("n") or len(a.nets) for a in op.arg)
