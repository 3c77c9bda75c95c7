"""Int8 inference: Caffe2's Mask R-CNN 2Go (int8 and fp32 predict nets of Caffe2's model zoo) on one 320x427
image, per op kind and in total, int8 against fp32 in interleaved rounds.

    OPENBLAS_NUM_THREADS=1 python -m bench.int8_models [--rounds 5] [--profile-runs 3]

The zoo's predict nets (``mask_rcnn_2go/model/{int8,fp32}/model.pbtxt``) are read from a local git copy of
Caffe2's models repository (``--zoo``, default the mirror under ``/work/.mirror``). Their weights
(``model_init.pb``) are Git LFS objects that cannot be fetched here, so the weights are synthetic (seeded,
``bench.int8_weights``): every blob's shape comes from the zoo's own graph drawing of the fp32 net
(``model_def.svg``, which labels each blob with its shape on a 1x3x320x427 input); the fp32 weights are
He-initialized and then scaled layer by layer on the test image to unit output deviation (``calibrate``), and
the int8 weights are those same weights quantized as Caffe2's int8 models hold them (uint8 codes, per-tensor
scale, zero point 128; int32 biases at scale X.scale * W.scale, with X.scale the Y_scale of the op that makes
the conv's input). Timing and op-level arithmetic are real; the detections are not.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

import numpy as np  # noqa: E402

from bench.common import markdown_table, time_round_robin  # noqa: E402
from bench.int8_weights import load_zoo_model, synth_weights, test_image  # noqa: E402
from framework.proto.framework_pb2 import NetDef  # noqa: E402

ZOO = "/work/.mirror/facebookarchive+models/repo/.git"


class Model:
    """One of the two predict nets, created in its own workspace with its synthetic weights fed."""

    def __init__(self, kind: str, zoo: str, seed: int) -> None:
        from framework.caffe2.python import workspace

        self.kind = kind
        self.net_def, shapes = load_zoo_model(zoo, kind)
        fp32_net = self.net_def if kind == "fp32" else load_zoo_model(zoo, "fp32")[0]
        self.ws_name = f"int8_models_{kind}"
        prev = workspace.CurrentWorkspace()
        workspace.SwitchWorkspace(self.ws_name, True)
        try:
            for name, value in synth_weights(self.net_def, shapes, kind, seed, fp32_net).items():
                workspace.FeedBlob(name, value)
            data, im_info = test_image(seed)
            workspace.FeedBlob("data", data)
            workspace.FeedBlob("im_info", im_info)
        finally:
            workspace.SwitchWorkspace(prev)
        self.net_name = self.create(f"mask_rcnn_2go_{kind}", compiled=True)

    def create(self, name: str, compiled: bool) -> str:
        """Create the predict net under ``name`` (``compiled``: with the net's compiled fast path)."""
        from framework.caffe2.python import workspace

        net = NetDef()
        net.CopyFrom(self.net_def)
        net.name = name
        if not compiled:
            for sub in _nets(net):
                arg = sub.arg.add()
                arg.name, arg.i = "compile_ops", 0
        prev = workspace.CurrentWorkspace()
        workspace.SwitchWorkspace(self.ws_name)
        try:
            workspace.CreateNet(net, True)
        finally:
            workspace.SwitchWorkspace(prev)
        return name

    def run(self, name: str | None = None) -> None:
        from framework.caffe2.python import workspace

        prev = workspace.CurrentWorkspace()
        workspace.SwitchWorkspace(self.ws_name)
        try:
            workspace.RunNet(name or self.net_name)
        finally:
            workspace.SwitchWorkspace(prev)

    def fetch(self, name: str):
        from framework.caffe2.python import workspace

        prev = workspace.CurrentWorkspace()
        workspace.SwitchWorkspace(self.ws_name)
        try:
            return workspace.FetchBlob(name)
        finally:
            workspace.SwitchWorkspace(prev)


def profile(model: Model, runs: int) -> dict[str, list[float]]:
    """op type -> [CPU seconds per inference, calls per inference], every op of the net and of its nested
    nets (the If's mask head) timed by wrapping its class's ``run``; an If's own time excludes its ops."""
    from framework.ops.operator import Operator

    stats: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    stack: list[float] = []
    patched = {}

    def wrap(cls):
        orig = cls.run

        def timed(self, _orig=orig):
            stack.append(0.0)
            t = time.process_time()
            try:
                return _orig(self)
            finally:
                dt = time.process_time() - t
                inner = stack.pop()
                s = stats[op_label(self)]
                s[0] += dt - inner
                s[1] += 1
                if stack:
                    stack[-1] += dt

        return timed

    classes = {c for c in _all_subclasses(Operator) if "run" in c.__dict__}
    for cls in classes:
        patched[cls] = cls.__dict__["run"]
        cls.run = wrap(cls)
    try:
        name = model.create(model.net_name + "_profiled", compiled=False)
        model.run(name)
        stats.clear()
        gc.collect()
        gc.disable()
        for _ in range(runs):
            model.run(name)
        gc.enable()
    finally:
        for cls, fn in patched.items():
            cls.run = fn
    return {k: [v[0] / runs, v[1] / runs] for k, v in stats.items()}


def _nets(net: NetDef):
    yield net
    for op in net.op:
        for arg in op.arg:
            if arg.HasField("n"):
                yield from _nets(arg.n)


def op_label(op) -> str:
    """Op type, and for convolutions the filter's window and whether it is depthwise."""
    if op.type not in ("Conv", "Int8Conv", "Int8ConvRelu"):
        return op.type
    w = op.inputs[1].held
    shape = getattr(getattr(w, "t", w), "array", None)
    if shape is None:
        return op.type
    m, *rest = shape.shape
    kh, kw, cg = rest if op.type != "Conv" else (rest[1], rest[2], rest[0])
    kind = "depthwise" if cg == 1 and m > 1 else ""
    return f"{op.type} {kh}x{kw} {kind}".strip()


def _all_subclasses(cls):
    out, todo = set(), [cls]
    while todo:
        c = todo.pop()
        for s in c.__subclasses__():
            if s not in out:
                out.add(s)
                todo.append(s)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo", default=ZOO, help="git dir of Caffe2's models repository")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile-runs", type=int, default=2)
    p.add_argument("--no-ort", action="store_true", help="skip the int8 conv net against onnxruntime")
    a = p.parse_args(argv)
    models = {k: Model(k, a.zoo, a.seed) for k in ("int8", "fp32")}
    for m in models.values():
        m.run()
        rois = m.fetch("rois").shape[0]
        dets = m.fetch("bbox_nms").shape[0]
        print(f"{m.kind}: {rois} proposals, {dets} detections (synthetic weights)")
    profiles = {k: profile(m, a.profile_runs) for k, m in models.items()}
    for k, prof in profiles.items():
        total = sum(v[0] for v in prof.values())
        rows = [
            [op, f"{v[1]:.0f}", f"{v[0] * 1e3:.1f}", f"{100 * v[0] / total:.0f}%"]
            for op, v in sorted(prof.items(), key=lambda kv: -kv[1][0])
        ]
        print(f"\n{k}: per-op CPU time, total {total * 1e3:.0f} ms\n")
        print(markdown_table(rows, ["op", "calls", "ms", "share"]))
    times = time_round_robin(
        {k: m.run for k, m in models.items()}, rounds=a.rounds, inner=1, warmup=1, clock=time.process_time
    )
    print()
    print(
        markdown_table(
            [
                ["Mask R-CNN 2Go int8", f"{times['int8'] * 1e3:.0f}", f"{times['int8'] / times['fp32']:.2f}"],
                ["Mask R-CNN 2Go fp32", f"{times['fp32'] * 1e3:.0f}", "1.00"],
            ],  # fmt: skip
            ["net (1x3x320x427, 1 thread)", "CPU ms", "/ fp32"],
        )
    )
    if not a.no_ort:
        from bench.int8_ort import main as ort_main

        ort_main(["--rounds", str(a.rounds * 4)])


if __name__ == "__main__":
    np.set_printoptions(linewidth=120)
    main()
