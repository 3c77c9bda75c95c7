"""Framework overhead per op: a net of 200 chained Relu ops on a float32 tensor of shape (4,).

Contenders (timed round-robin in one process, medians; see bench/common.py):
- ``numpy loop``: a hand-written loop of prebound ``np.maximum(a, 0, out=b)`` calls (the floor);
- ``simple net`` / ``dag net (1 worker)``: the framework's executors;
- ``simple net, run() only``: the simple executor with op compilation disabled;
- ``torch eager``: ``torch.clamp(a, min=0, out=b)`` in a loop, if torch is importable.

Run: ``python -m bench.op_overhead``. Prints us/op and ratios to the numpy loop.
"""

from __future__ import annotations

import numpy as np

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin

N_OPS = 200
SHAPE = (4,)


def relu_chain(name: str, net_type: str = "simple", compile_ops: bool = True):
    from framework.core import CreateOperator
    from framework.proto.args import make_argument
    from framework.proto.framework_pb2 import NetDef

    net = NetDef(name=name, type=net_type, external_input=["x0"], external_output=[f"x{N_OPS}"])
    net.op.extend(CreateOperator("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(N_OPS))
    if not compile_ops:
        net.arg.append(make_argument("compile_ops", 0))
    if net_type == "dag":
        net.num_workers = 1
    return net


def contenders() -> dict:
    from framework.memory.workspace import Workspace

    ws = Workspace()
    ws.feed_blob("x0", np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32))
    out = {}
    for label, name, kind, comp in (
        ("simple net", "simple", "simple", True),
        ("simple net, run() only", "simple_nocompile", "simple", False),
        ("dag net (1 worker)", "dag", "dag", True),
    ):
        net = ws.create_net(relu_chain(name, kind, comp))
        net.run()
        out[label] = net.run
    arrs = [np.zeros(SHAPE, np.float32) for _ in range(N_OPS + 1)]
    pairs = list(zip(arrs[:-1], arrs[1:]))

    def numpy_loop() -> None:
        for a, b in pairs:
            np.maximum(a, 0, out=b)

    out["numpy loop"] = numpy_loop
    try:
        import torch

        torch.set_num_threads(1)
        ts = [torch.zeros(SHAPE) for _ in range(N_OPS + 1)]
        tpairs = list(zip(ts[:-1], ts[1:]))

        def torch_eager() -> None:
            for a, b in tpairs:
                torch.clamp(a, min=0, out=b)

        torch_eager()
        out["torch eager"] = torch_eager
    except ImportError:  # torch is optional
        pass
    return out


def main() -> dict[str, float]:
    pin_blas_threads(1)
    fns = contenders()
    times = time_round_robin(fns, rounds=40, inner=20)
    base = times["numpy loop"]
    rows = [[k, fmt_time(v / N_OPS), f"{v / base:.2f}x"] for k, v in times.items()]
    print(f"per-op overhead, {N_OPS} chained Relu ops on float32 {SHAPE} (medians, round-robin)")
    print(markdown_table(rows, ["contender", "per op", "vs numpy loop"]))
    return {k: v / N_OPS for k, v in times.items()}


if __name__ == "__main__":
    main()
