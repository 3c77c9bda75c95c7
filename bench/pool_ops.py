"""Pooling ops of the torchvision models against onnxruntime, one op at a time.

    python -m bench.pool_ops [--models googlenet,squeezenet1_1] [--rounds 15] [--inner 20]

Each distinct MaxPool/AveragePool of the exported models (``bench.torchvision_onnx``'s ONNX files: same
export, same cache folder) becomes a one-node ONNX model: ours runs it through ``framework.onnx.backend``
(the created net alone, the op as the importer translates it, ceil_mode included), onnxruntime through a
one-thread session of the same model. Outputs are compared (equal bits, NaN aside) before timing; times are
CPU-time medians of interleaved rounds (``bench.common.time_round_robin``), one thread.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from bench.common import markdown_table, pin_blas_threads, time_round_robin


def pools(model: Any) -> list[tuple[str, list[int], dict, int]]:
    """(op type, input shape, attributes, how many of the model's nodes) of each distinct pooling node."""
    from onnx import helper, shape_inference

    m = shape_inference.infer_shapes(model)
    shapes = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in [*m.graph.value_info, *m.graph.input]
    }
    found: dict[tuple, list] = {}
    for node in m.graph.node:
        if node.op_type not in ("MaxPool", "AveragePool"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        shape = shapes[node.input[0]]
        key = (node.op_type, tuple(shape), repr(sorted(attrs.items())))
        found.setdefault(key, [node.op_type, shape, attrs, 0])[3] += 1
    return [tuple(v) for v in found.values()]


def one_node(op_type: str, shape: list[int], attrs: dict) -> Any:
    from onnx import TensorProto, helper

    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def measure(op_type: str, shape: list[int], attrs: dict, rounds: int, inner: int) -> dict[str, float]:
    import onnxruntime as ort

    from framework.onnx.backend import prepare

    model = one_node(op_type, shape, attrs)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rep = prepare(model)
    ours, ref = rep.run([x])[0], sess.run(None, {"x": x})[0]
    if ours.shape != ref.shape or not np.allclose(ours, ref, rtol=1e-6, atol=1e-6):
        raise SystemExit(f"{op_type} {shape} {attrs}: our output differs from onnxruntime's")
    ws, _, _, created = rep._entry({"x": x})
    net = created[0]
    ws.feed_blob("x", x)
    return time_round_robin(
        {"ours": net.run, "onnxruntime": lambda: sess.run(None, {"x": x})},
        rounds=rounds,
        inner=inner,
        clock=time.process_time,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="googlenet,squeezenet1_1")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--inner", type=int, default=20)
    args = p.parse_args(argv)
    pin_blas_threads(1)
    import onnx

    from bench.torchvision_onnx import default_cache, exported

    rows = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        path, _ = exported(name, default_cache())
        for op_type, shape, attrs, count in pools(onnx.load(str(path))):
            t = measure(op_type, shape, attrs, args.rounds, args.inner)
            geo = f"{attrs.get('kernel_shape')} s{attrs.get('strides', [1])[0]} pads {attrs.get('pads', [0] * 4)}"
            ceil = " ceil" if attrs.get("ceil_mode") else ""
            row = [name, f"{op_type} x{count}", "x".join(map(str, shape[1:])), geo + ceil]
            row += [
                f"{t['ours'] * 1e6:.0f} us",
                f"{t['onnxruntime'] * 1e6:.0f} us",
                f"{t['ours'] / t['onnxruntime']:.2f}",
            ]
            rows.append(row)
            print(" | ".join(row), file=sys.stderr, flush=True)
    header = ["model", "op", "input (CxHxW)", "window", "ours", "onnxruntime", "ours / ort"]
    print(markdown_table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
