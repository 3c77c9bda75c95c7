"""Mobile-net blocks and a whole MobileNetV2 as Caffe2 NetDefs of our ops, against onnxruntime and torch eager.

Blocks (batch 1, random weights, torchvision's shapes):
- ``v2_s1``/``v2_s2``: MobileNetV2 inverted residuals: 1x1 expand + BN + Relu6 (Clip 0..6), 3x3 depthwise
  (stride 1 / 2) + BN + Relu6, 1x1 project + BN, the residual Add at stride 1;
- ``v3_se``: a MobileNetV3 block: expand + BN + HardSwish, 5x5 depthwise + BN + HardSwish, squeeze-excitation
  (global average -> 1x1 conv -> Relu -> 1x1 conv -> HardSigmoid -> Mul over the channels), project + BN, Add;
- ``eff_se``: an EfficientNet MBConv: the same with SiLU (Swish) and a Sigmoid gate, 3x3 depthwise;
- ``mnas5``: a MnasNet block: expand + BN + Relu, 5x5 depthwise stride 2 + BN + Relu, project + BN;
- ``mobilenet_v2``, ``mnasnet1_0``, ``efficientnet_b0``: the whole nets (torchvision's layouts, 224x224, random
  weights) built from the same blocks (torchvision itself does not import in this environment, so its models are
  rebuilt here rather than exported).

Contenders: ``ours``, a ``Predictor`` over the NetDef (the inference pass on); ``ort``, onnxruntime over our
export of the same net (bench/onnx_models.py); ``torch``, torch eager (torch.nn.functional over the same op
list and weights). One thread, process CPU time, interleaved rounds, outputs compared before timing.
``--profile`` prints ours per op type (the optimized net under the ``prof_dag`` timing) for each block.

Run: ``python -m bench.mobile_blocks`` (``--quick`` for fewer rounds, ``--blocks v2_s1,eff_se``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench.common import fmt_time, markdown_table, pin_blas_threads, time_round_robin  # noqa: E402

# torchvision's MobileNetV2 settings: expansion t, output channels c, repeats n, first stride s
_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


class NetBuilder:
    """Appends Caffe2 ops and their random weights; ``act`` names the activation ops the blocks use."""

    def __init__(self, seed: int = 0) -> None:
        from framework.proto.framework_pb2 import NetDef

        self.net = NetDef(name="mobile")
        self.params: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def _name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def op(self, kind: str, ins: list[str], out: str | None = None, **args) -> str:
        from framework.core import CreateOperator

        out = out or self._name(kind.lower())
        self.net.op.append(CreateOperator(kind, ins, [out], **args))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        w = self._name("w")
        fan = cin // group * k * k
        self.params[w] = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan)).astype(np.float32)
        b = self._name("b")
        self.params[b] = (self.rng.standard_normal(cout) * 0.01).astype(np.float32)
        return self.op("Conv", [x, w, b], kernel=k, stride=stride, pad=k // 2, group=group)

    def bn(self, x: str, c: int) -> str:
        names = [self._name(p) for p in ("s", "o", "m", "v")]
        r = self.rng
        vals = [r.uniform(0.5, 1.5, c), r.standard_normal(c) * 0.1, r.standard_normal(c) * 0.1, r.uniform(0.5, 1.5, c)]
        for n, v in zip(names, vals):
            self.params[n] = v.astype(np.float32)
        return self.op("SpatialBN", [x, *names], is_test=1, epsilon=1e-5)

    def act(self, x: str, kind: str) -> str:
        if kind == "relu6":
            return self.op("Clip", [x], min=0.0, max=6.0)
        if kind == "relu":
            return self.op("Relu", [x])
        if kind == "hswish":  # x * HardSigmoid(x): Caffe2 has no HardSwish op
            return self.op("Mul", [x, self.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5)])
        if kind == "silu":
            return self.op("Swish", [x])
        if kind == "sigmoid":
            return self.op("Sigmoid", [x])
        if kind == "hsigmoid":
            return self.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5)
        raise KeyError(kind)

    def se(self, x: str, c: int, squeeze: int, act: str, gate: str) -> str:
        s = self.op("AveragePool", [x], global_pooling=1)
        s = self.act(self.conv(s, c, squeeze, 1), act)
        s = self.act(self.conv(s, squeeze, c, 1), gate)
        return self.op("Mul", [x, s])

    def block(self, x, cin, cout, expand, k, stride, act, se=None) -> str:
        """An inverted residual: (1x1 expand + BN + act), kxk depthwise + BN + act, (SE), 1x1 project + BN, (Add)."""
        mid = cin * expand
        y = self.act(self.bn(self.conv(x, cin, mid, 1), mid), act) if expand != 1 else x
        y = self.act(self.bn(self.conv(y, mid, mid, k, stride, group=mid), mid), act)
        if se:
            y = self.se(y, mid, se[0], se[1], se[2])
        y = self.bn(self.conv(y, mid, cout, 1), cout)
        return self.op("Add", [y, x]) if stride == 1 and cin == cout else y

    def finish(self, x: str, y: str) -> None:
        self.net.external_input.append(x)
        self.net.external_input.extend(self.params)
        self.net.external_output.append(y)


def mobilenet_v2(b: NetBuilder, x: str) -> str:
    y = b.act(b.bn(b.conv(x, 3, 32, 3, 2), 32), "relu6")
    cin = 32
    for t, c, n, s in _V2:
        for i in range(n):
            y = b.block(y, cin, c, t, 3, s if i == 0 else 1, "relu6")
            cin = c
    y = b.act(b.bn(b.conv(y, cin, 1280, 1), 1280), "relu6")
    y = b.op("AveragePool", [y], global_pooling=1)
    w, bias = b._name("fcw"), b._name("fcb")
    b.params[w] = (b.rng.standard_normal((1000, 1280)) * 0.01).astype(np.float32)
    b.params[bias] = np.zeros(1000, np.float32)
    return b.op("FC", [y, w, bias])


# torchvision's MnasNet 1.0 stacks: input, output channels, kernel, first stride, expansion, repeats
_MNAS = [(16, 24, 3, 2, 3, 3), (24, 40, 5, 2, 3, 3), (40, 80, 5, 2, 6, 3), (80, 96, 3, 1, 6, 2), (96, 192, 5, 2, 6, 4)]
_MNAS.append((192, 320, 3, 1, 6, 1))
# torchvision's EfficientNet-B0 stages: expansion, kernel, first stride, input, output channels, layers
_EFF = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3)]
_EFF += [(6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]


def _classifier(b: NetBuilder, y: str, cin: int, act: str) -> str:
    y = b.act(b.bn(b.conv(y, cin, 1280, 1), 1280), act)
    y = b.op("AveragePool", [y], global_pooling=1)
    w, bias = b._name("fcw"), b._name("fcb")
    b.params[w] = (b.rng.standard_normal((1000, 1280)) * 0.01).astype(np.float32)
    b.params[bias] = np.zeros(1000, np.float32)
    return b.op("FC", [y, w, bias])


def mnasnet1_0(b: NetBuilder, x: str) -> str:
    y = b.act(b.bn(b.conv(x, 3, 32, 3, 2), 32), "relu")
    y = b.act(b.bn(b.conv(y, 32, 32, 3, 1, group=32), 32), "relu")
    y = b.bn(b.conv(y, 32, 16, 1), 16)
    for cin, cout, k, s, t, n in _MNAS:
        for i in range(n):
            y = b.block(y, cin if i == 0 else cout, cout, t, k, s if i == 0 else 1, "relu")
    return _classifier(b, y, 320, "relu")


def efficientnet_b0(b: NetBuilder, x: str) -> str:
    y = b.act(b.bn(b.conv(x, 3, 32, 3, 2), 32), "silu")
    for t, k, s, cin, cout, n in _EFF:
        for i in range(n):
            c = cin if i == 0 else cout
            y = b.block(y, c, cout, t, k, s if i == 0 else 1, "silu", se=(max(1, c // 4), "silu", "sigmoid"))
    return _classifier(b, y, 320, "silu")


# name -> (input shape, build(builder, x) -> output)
BLOCKS = {
    "v2_s1": ((1, 32, 28, 28), lambda b, x: b.block(x, 32, 32, 6, 3, 1, "relu6")),
    "v2_s2": ((1, 24, 56, 56), lambda b, x: b.block(x, 24, 32, 6, 3, 2, "relu6")),
    "v3_se": ((1, 40, 28, 28), lambda b, x: b.block(x, 40, 40, 3, 5, 1, "hswish", se=(32, "relu", "hsigmoid"))),
    "eff_se": ((1, 40, 28, 28), lambda b, x: b.block(x, 40, 40, 6, 3, 1, "silu", se=(10, "silu", "sigmoid"))),
    "mnas5": ((1, 40, 28, 28), lambda b, x: b.block(x, 40, 80, 6, 5, 2, "relu")),
    "mobilenet_v2": ((1, 3, 224, 224), mobilenet_v2),
    "mnasnet1_0": ((1, 3, 224, 224), mnasnet1_0),
    "efficientnet_b0": ((1, 3, 224, 224), efficientnet_b0),
}


def build(name: str):
    """(NetDef, params, input array) of one benchmark net."""
    shape, fn = BLOCKS[name]
    b = NetBuilder()
    y = fn(b, "data")
    b.finish("data", y)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return b.net, b.params, x


def ours_runner(net_def, params, x):
    from framework.memory.tensor import Tensor
    from framework.memory.workspace import Workspace
    from framework.predictor.predictor import Predictor
    from framework.proto.framework_pb2 import NetDef

    ws = Workspace()
    for k, v in params.items():
        ws.create_blob(k).get_mutable(Tensor).share_external(v)
    pred = Predictor(NetDef(name="init"), net_def, parent=ws)
    pred.workspace.feed_blob("data", x)
    out = net_def.external_output[0]
    return pred, pred.run_net, lambda: pred.workspace.fetch_blob(out)


def torch_runner(net_def, params, x):
    """torch eager over the same op list: each op as its torch.nn.functional call."""
    import torch
    import torch.nn.functional as F

    from framework.ops.arg_reader import ArgReader

    torch.set_num_threads(1)
    p = {k: torch.from_numpy(v) for k, v in params.items()}
    steps = []
    for op in net_def.op:
        a = ArgReader(op)
        t, ins, out = op.type, list(op.input), op.output[0]
        if t == "Conv":
            s, pad, g = a.value("stride", 1), a.value("pad", 0), a.value("group", 1)
            steps.append((out, lambda e, i=ins, s=s, pad=pad, g=g: F.conv2d(e[i[0]], p[i[1]], p[i[2]], s, pad, 1, g)))
        elif t == "SpatialBN":
            eps = a.value("epsilon", 1e-5)
            steps.append(
                (
                    out,
                    lambda e, i=ins, eps=eps: F.batch_norm(e[i[0]], p[i[3]], p[i[4]], p[i[1]], p[i[2]], False, 0, eps),
                )
            )
        else:
            fns = {
                "Clip": lambda e, i: F.relu6(e[i[0]]),
                "Relu": lambda e, i: F.relu(e[i[0]]),
                "Swish": lambda e, i: F.silu(e[i[0]]),
                "Sigmoid": lambda e, i: torch.sigmoid(e[i[0]]),
                "HardSigmoid": lambda e, i: F.hardsigmoid(e[i[0]]),
                "AveragePool": lambda e, i: F.adaptive_avg_pool2d(e[i[0]], 1),
                "Mul": lambda e, i: e[i[0]] * e[i[1]],
                "Add": lambda e, i: e[i[0]] + e[i[1]],
                "FC": lambda e, i: F.linear(e[i[0]].flatten(1), p[i[1]], p[i[2]]),
            }
            steps.append((out, lambda e, i=ins, f=fns[t]: f(e, i)))
    env0 = {"data": torch.from_numpy(x)}
    res = [None]
    last = net_def.external_output[0]

    def run() -> None:
        with torch.inference_mode():
            env = dict(env0)
            for out, fn in steps:
                env[out] = fn(env)
            res[0] = env[last]

    run()
    return run, lambda: res[0].numpy()


def profile_ours(pred, runs: int = 20) -> list[tuple[str, float, int]]:
    """Per op type of the optimized net: (type, seconds per run, count), from timing each op's run."""
    import collections

    net = pred.net
    ops = getattr(net, "ops", None) or getattr(net, "_ops", None)
    if ops is None:
        return []
    tot: dict[str, float] = collections.defaultdict(float)
    cnt: dict[str, int] = collections.Counter()
    for _ in range(runs):
        for op in ops:
            label = _label(op)
            t0 = time.process_time()
            op.run()
            tot[label] += time.process_time() - t0
    for op in ops:
        cnt[_label(op)] += 1
    return sorted(((k, v / runs, cnt[k]) for k, v in tot.items()), key=lambda r: -r[1])


def _label(op) -> str:
    d = op.op_def if hasattr(op, "op_def") else None
    t = d.type if d is not None else type(op).__name__
    if d is not None and t in ("Conv", "ConvFusion"):
        from framework.ops.arg_reader import ArgReader

        a = ArgReader(d)
        g, k = a.value("group", 1), a.value("kernel", 0)
        t += f"[k{k}{' dw' if g > 1 else ''} s{a.value('stride', 1)} f{a.value('fusion_type', 0)}]"
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", default=",".join(BLOCKS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    pin_blas_threads(1)
    from framework.runtime.parallel import set_num_threads

    set_num_threads(1)
    from bench.onnx_models import exported, ort_runner

    rows = []
    for name in a.blocks.split(","):
        net_def, params, x = build(name)
        pred, ours, ours_get = ours_runner(net_def, params, x)
        ours()
        ort, ort_get = ort_runner(exported(net_def, params, {"data": x}), {"data": x})
        tr, tr_get = torch_runner(net_def, params, x)
        ref = tr_get()
        scale = float(np.abs(ref).max()) or 1.0
        errs = {k: float(np.abs(g() - ref).max()) / scale for k, g in (("ours", ours_get), ("ort", ort_get))}
        for k, e in errs.items():
            if e > 1e-3:
                raise SystemExit(f"{name}: {k} differs from torch by {e:.2e} (relative to max |y|)")
        big = x.shape[2] == 224
        t = time_round_robin(
            {"ours": ours, "ort": ort, "torch": tr},
            rounds=(5 if a.quick else 15) if big else (7 if a.quick else 25),
            inner=2 if big else 10,
            clock=time.process_time,
        )
        rows.append(
            [
                name,
                fmt_time(t["ours"]),
                fmt_time(t["ort"]),
                fmt_time(t["torch"]),
                f"{t['ours'] / t['ort']:.2f}",
                f"{t['ours'] / t['torch']:.2f}",
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
        if a.profile:
            for label, sec, n in profile_ours(pred, 5 if big else 30):
                print(f"    {label:40s} {n:4d} {sec * 1e6:9.1f} us")
    header = ["net", "ours", "onnxruntime", "torch eager", "ours/ort", "ours/torch"]
    print()
    print(markdown_table(rows, header))


if __name__ == "__main__":
    main()
