"""The real-model suite through our ONNX backend: ``prepare(model).run`` on the ONNX files our
exporter writes, against our native NetDef path, onnxruntime and onnx's ReferenceEvaluator on
the same ONNX files (1 thread each, round-robin medians, process CPU time).

    python -m bench.onnx_backend [--models resnet20_cifar squeezenet1_1 ...] [--batch 1] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin

DEFAULT_MODELS = ["resnet20_cifar", "squeezenet1_1", "shufflenet_v2", "resnet50", "densenet121", "alexnet"]


def bench(name: str, batch: int, rounds: int, reference: bool) -> list[str]:
    import onnxruntime as ort

    from bench.real_models import build
    from framework.memory.workspace import Workspace
    from framework.onnx import backend, export

    m = build(name, batch=batch)
    x = m.input_data()
    ws = Workspace()
    for k, v in m.weights.items():
        ws.feed_blob(k, v)
    model = export(m.predict_net, input_shapes={m.input_name: x.shape}, workspace=ws, outputs=[m.logits_name])
    ws.feed_blob(m.input_name, x)
    net = ws.create_net(m.predict_net)
    rep = backend.prepare(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {m.input_name: x}
    contenders = {
        "native": net.run,
        "backend": lambda: rep.run(feeds),
        "ort": lambda: sess.run(None, feeds),
    }
    if reference:
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(model)
        contenders["reference"] = lambda: ref.run(None, feeds)
    net.run()
    got = rep.run(feeds)[0]
    want = ws.fetch_blob(m.logits_name)
    diff = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    t = time_round_robin(contenders, rounds=rounds, inner=1, warmup=1, clock=time.process_time)
    row = [name, str(batch), fmt_time(t["native"]), f"{fmt_time(t['backend'])} ({t['backend'] / t['native']:.2f}x)"]
    row.append(f"{fmt_time(t['ort'])} ({t['ort'] / t['native']:.2f}x)")
    row.append(f"{fmt_time(t['reference'])} ({t['reference'] / t['native']:.2f}x)" if reference else "-")
    row.append(f"{diff:.1e}")
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-reference", action="store_true", help="skip onnx's ReferenceEvaluator (slow)")
    a = p.parse_args()
    pin_blas_threads(1)
    rows = [bench(n, a.batch, a.rounds, not a.no_reference) for n in a.models]
    header = [
        "model",
        "batch",
        "native NetDef",
        "prepare(onnx).run",
        "onnxruntime",
        "ReferenceEvaluator",
        "max rel diff",
    ]
    print(markdown_table(rows, header))


if __name__ == "__main__":
    main()
