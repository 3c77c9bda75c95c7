"""Input shapes "from the net" when the user gives none.

An input read first by ``FC``/``FCTransposed`` (axis 1) is ``(1, K)`` with K from the weight.
An input read first by a ``Conv`` (or pooling) of a 4-D net gets ``(1, C, S, S)``, C from the
filter and S the smallest square size in 1..256 for which shape inference of the whole net
succeeds, when the sizes that fit are a few (a later FC fixes the size up to pooling's
rounding); when many fit (global pooling makes any size work) or none, the caller must give the
shape (``--shape``). Batch size 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.net.inference import infer_net
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import TensorSpec


def _first_reader(net: Any, blob: str) -> Any:
    for op in net.op:
        if blob in op.input:
            return op
    return None


def guess_input_shapes(net: Any, inputs: list[str], params: dict[str, TensorSpec]) -> dict[str, tuple]:
    """{input: shape} for the inputs whose shape the net determines; others are left out."""
    f32 = np.dtype(np.float32)
    out: dict[str, tuple] = {}
    for blob in inputs:
        op = _first_reader(net, blob)
        if op is None or op.input[0] != blob:
            continue
        w = params.get(op.input[1]) if len(op.input) > 1 else None
        if op.type in ("FC", "FCTransposed") and w is not None and w.shape and len(w.shape) == 2:
            out[blob] = (1, int(w.shape[1] if op.type == "FC" else w.shape[0]))
        elif op.type.startswith("Conv") and w is not None and w.shape and len(w.shape) == 4:
            nhwc = str(ArgReader(op).value("order", "")).upper() == "NHWC"
            c = int(w.shape[3] if nhwc else w.shape[1])
            fits = []
            for s in range(1, 257):
                shape = (1, s, s, c) if nhwc else (1, c, s, s)
                specs = infer_net(net, {**params, blob: TensorSpec(shape, f32)})
                ends = [specs.get(b) for b in net.external_output] or [specs.get(op.output[0])]
                if all(e is not None and e.known for e in ends):
                    fits.append(shape)
                    if len(fits) > 16:
                        break
            if 1 <= len(fits) <= 16:
                out[blob] = fits[0]
    return out
