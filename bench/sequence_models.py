"""Sequence models through the ONNX path against onnxruntime, one thread, CPU time.

Models: torch ``nn.LSTM`` and ``nn.GRU`` (2 layers, input 64, hidden 128, 50 steps, batch 8, random weights)
exported with ``torch.onnx.export`` (opset 17), run by ``framework.onnx.backend.prepare(model).run`` and by an
onnxruntime session with one intra-op thread. Outputs are compared before timing; rounds are interleaved
(bench/common.time_round_robin) and the clock is the process's CPU time, so the figures hold on a shared machine.

``inference_lstm``: Caffe2's InferenceLSTM op fed the same torch LSTM's weights, against onnxruntime on that
LSTM's export.

Run: ``python -m bench.sequence_models`` (``--quick`` for fewer rounds, ``--models lstm,gru``).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import warnings

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin  # noqa: E402

SHAPES = {"seq": 50, "batch": 8, "input": 64, "hidden": 128, "layers": 2}


def export_model(kind: str, seq: int, batch: int, isz: int, hidden: int, layers: int, bidirectional: bool = False):
    """(onnx ModelProto, input array, torch module) for a torch ``nn.LSTM``/``nn.GRU`` with random weights,
    opset 17."""
    import onnx
    import torch

    torch.manual_seed(0)
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[kind]
    mod = cls(isz, hidden, num_layers=layers, bidirectional=bidirectional).eval()
    x = torch.randn(seq, batch, isz)
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and batch-size notes
        torch.onnx.export(mod, (x,), buf, opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
    return onnx.load_from_string(buf.getvalue()), x.numpy(), mod


def inference_lstm(mod, x: np.ndarray):
    """(run, get_output) of Caffe2's InferenceLSTM op in a net, fed the torch LSTM's own flat weights."""
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.proto import caffe2_pb2

    dirs = 2 if mod.bidirectional else 1
    state = np.zeros((mod.num_layers * dirs, x.shape[1], mod.hidden_size), np.float32)
    weights = [p.detach().numpy() for p in mod._flat_weights]
    names = [f"w{k}" for k in range(len(weights))]
    ws = Workspace()
    for n, v in zip(["x", "h0", "c0"] + names, [x, state, state] + weights):
        ws.feed_blob(n, v)
    net_def = caffe2_pb2.NetDef(name="inference_lstm")
    op = CreateOperator(
        "InferenceLSTM", ["x", "h0", "c0"] + names, ["y", "h", "c"],
        num_layers=mod.num_layers, bidirectional=mod.bidirectional,
    )  # fmt: skip
    net_def.op.extend([op])
    net = ws.create_net(net_def)
    net.run()
    return net.run, lambda: ws.fetch_blob("y")


def ours(model, x: np.ndarray):
    """(run, get_output, prepare CPU seconds) through framework.onnx.backend."""
    from framework.onnx import backend

    t0 = time.process_time()
    rep = backend.prepare(model)
    prep = time.process_time() - t0
    res: list = [None]

    def run() -> None:
        res[0] = rep.run({"x": x})

    run()
    return run, lambda: np.asarray(res[0][0]), prep


def ort(model, x: np.ndarray):
    from bench.onnx_models import ort_runner

    return ort_runner(model, {"x": x}, threads=1)


def run(
    models=("lstm", "gru", "inference_lstm"), rounds=15, inner=5, bidirectional=False, log=print, shapes=None
) -> list[list[str]]:
    """Table rows [model, ours, onnxruntime, ratio, prepare, max abs diff]; ``shapes`` overrides SHAPES."""
    pin_blas_threads(1)
    s = {**SHAPES, **(shapes or {})}
    rows = []
    for kind in models:
        caffe2 = kind == "inference_lstm"
        model, x, mod = export_model(
            "lstm" if caffe2 else kind, s["seq"], s["batch"], s["input"], s["hidden"], s["layers"], bidirectional
        )
        if caffe2:
            (run_ours, get_ours), prep = inference_lstm(mod, x), None
        else:
            run_ours, get_ours, prep = ours(model, x)
        run_ort, get_ort = ort(model, x)
        a, b = np.asarray(get_ours()), np.asarray(get_ort())
        err = float(np.max(np.abs(a - b)))
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{kind}: outputs differ from onnxruntime (shapes {a.shape} {b.shape}, max err {err})")
        t = time_round_robin({"ours": run_ours, "ort": run_ort}, rounds=rounds, inner=inner, clock=time.process_time)
        what = "Caffe2 InferenceLSTM" if caffe2 else f"ONNX {kind.upper()}"
        name = f"{what} ({s['layers']} layers{', bidirectional' if bidirectional else ''})"
        rows.append([name, fmt_time(t["ours"]), fmt_time(t["ort"]), f"{t['ours'] / t['ort']:.2f}",
                     "-" if prep is None else f"{prep:.2f} s", f"{err:.1e}"])  # fmt: skip
        log(f"{name}: ours {fmt_time(t['ours'])}, onnxruntime {fmt_time(t['ort'])}, ratio {t['ours'] / t['ort']:.2f}")
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--models", default="lstm,gru,inference_lstm", help="comma-separated: lstm, gru, inference_lstm")
    p.add_argument("--bidirectional", action="store_true", help="export bidirectional layers")
    a = p.parse_args(argv)
    s = SHAPES
    print(f"seq {s['seq']}, batch {s['batch']}, input {s['input']}, hidden {s['hidden']}; 1 thread, CPU time")
    rows = run(tuple(a.models.split(",")), rounds=5 if a.quick else 15, bidirectional=a.bidirectional)
    print(markdown_table(rows, ["model", "ours", "onnxruntime", "ours / ort", "prepare", "max abs diff"]))


if __name__ == "__main__":
    main()
