"""Math ops in a net vs hand-written preallocated numpy: the SGD update (WeightedSum in place),
a broadcast Add, a Sum of three gradients, and ReduceSum. Ratios from one run.

    python -m bench.math_ops
"""

from __future__ import annotations

import numpy as np

from bench.common import fmt_time, time_round_robin
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.api import create_net
from framework.proto.framework_pb2 import NetDef


def _net(ws: Workspace, ops: list, feeds: dict) -> object:
    net = NetDef(name="bench")
    net.op.extend(ops)
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    net.external_input.extend(feeds)
    return create_net(ws, net)


def main() -> None:
    rng = np.random.RandomState(0)
    cases = {}
    # SGD update of a 512x784 weight: param += lr * grad
    p, g = rng.randn(512, 784).astype(np.float32), rng.randn(512, 784).astype(np.float32)
    ws = Workspace()
    net = _net(
        ws,
        [CreateOperator("WeightedSum", ["p", "one", "g", "lr"], ["p"])],
        {"p": p, "g": g, "one": np.ones(1, np.float32), "lr": np.full(1, -0.01, np.float32)},
    )
    hp, hg, tmp, lr = p.copy(), g.copy(), np.empty_like(p), np.array(-0.01, np.float32)

    def hand_sgd() -> None:
        np.multiply(hg, lr, out=tmp)
        np.add(hp, tmp, out=hp)

    cases["WeightedSum SGD 512x784"] = (net.run, hand_sgd)
    # broadcast Add 64x512 + 512 (legacy)
    a, b = rng.randn(64, 512).astype(np.float32), rng.randn(512).astype(np.float32)
    ws2 = Workspace()
    net2 = _net(ws2, [CreateOperator("Add", ["a", "b"], ["c"], broadcast=1)], {"a": a, "b": b})
    c = np.empty_like(a)
    cases["Add broadcast 64x512"] = (net2.run, lambda: np.add(a, b, out=c))
    # Sum of three 64x512
    xs = [rng.randn(64, 512).astype(np.float32) for _ in range(3)]
    ws3 = Workspace()
    net3 = _net(ws3, [CreateOperator("Sum", ["x0", "x1", "x2"], ["s"])], {f"x{i}": x for i, x in enumerate(xs)})

    def hand_sum() -> None:
        np.add(xs[0], xs[1], out=c)
        np.add(c, xs[2], out=c)

    cases["Sum 3x 64x512"] = (net3.run, hand_sum)
    # ReduceSum over the batch axis
    ws4 = Workspace()
    net4 = _net(ws4, [CreateOperator("ReduceSum", ["a"], ["r"], axes=[0], keepdims=0)], {"a": a})
    r = np.empty(512, np.float32)
    cases["ReduceSum axis 0 64x512"] = (net4.run, lambda: np.sum(a, axis=0, out=r))

    for name, (fw, hand) in cases.items():
        t = time_round_robin({"framework": fw, "numpy": hand}, rounds=30, inner=20)
        print(
            f"{name:28s} framework {fmt_time(t['framework']):>10s}  numpy {fmt_time(t['numpy']):>10s}  "
            f"ratio {t['framework'] / t['numpy']:.2f}"
        )


if __name__ == "__main__":
    main()
