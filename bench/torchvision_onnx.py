"""Standard torchvision models through the ONNX path against onnxruntime and torch eager, one thread, CPU time.

Models: torchvision resnet18, squeezenet1_1, densenet121, shufflenet_v2_x1_0, googlenet, mobilenet_v2,
mnasnet1_0, efficientnet_b0, random weights from a fixed seed (BatchNorm statistics randomized too, so
folding them is exercised), ``eval()``, batch 1, 224x224, exported with ``torch.onnx.export`` (opset 17).
The exported files are cached (``--cache``, default the user cache folder) so reruns skip the export.
``--models`` also takes mobilenet_v3_large and mobilenet_v3_small (not in the default set).

For each model: ``framework.onnx.backend.prepare`` CPU time (the first model's includes loading the op
families) and its first run's (net creation, the inference pass, filter packing), then ``rep.run`` against
the same translated net run without the inference pass ("no pass", in the rep's workspace), an onnxruntime
session with one intra-op thread and torch eager (``torch.set_num_threads(1)``), process CPU time, medians
of interleaved rounds (``bench.common.time_round_robin``); the outputs are compared first (max abs and max
relative difference against onnxruntime are printed). The last rows give the median and the worst ratio.
``--ort-basic`` adds onnxruntime with its basic graph optimizations only (no NCHWc channel-blocked layout).

    python -m bench.torchvision_onnx [--models resnet18,googlenet] [--rounds 9] [--inner 3] [--cache DIR] [--ort-basic]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from bench.common import fmt_time, markdown_table, time_round_robin

MODELS = (
    "resnet18",
    "squeezenet1_1",
    "densenet121",
    "shufflenet_v2_x1_0",
    "googlenet",
    "mobilenet_v2",
    "mnasnet1_0",
    "efficientnet_b0",
)
# Outside the issue's set (not run by default; ``--models`` names them): squeeze-excitation with HardSigmoid gates
# and HardSwish.
EXTRA = ("mobilenet_v3_large", "mobilenet_v3_small")
OPSET = 17
SEED = 0


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "framework" / "torchvision_onnx"


def torchvision_models() -> Any:
    """``torchvision.models``. A torchvision whose compiled ops do not match the installed torch fails at
    import (its package ``__init__`` registers those ops); the model definitions need none of them, so the
    package is then entered without its ``__init__``."""
    import importlib
    import importlib.util
    import types

    try:
        return importlib.import_module("torchvision.models")
    except (RuntimeError, OSError):
        for key in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[key]
        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            raise
        pkg = types.ModuleType("torchvision")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec
        sys.modules["torchvision"] = pkg
        return importlib.import_module("torchvision.models")


def build(name: str, seed: int = SEED) -> Any:
    """The eval-mode torchvision model ``name`` with random weights from ``seed``."""
    import torch

    models = torchvision_models()
    torch.manual_seed(seed)
    kwargs: dict[str, Any] = {"weights": None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    model = getattr(models, name)(**kwargs)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():  # non-trivial statistics: the BN fold must be exact, not a no-op
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.num_features, generator=gen) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                    m.bias.copy_(torch.rand(m.num_features, generator=gen) * 0.2 - 0.1)
    return model.eval()


def exported(name: str, cache: Path) -> tuple[Path, Any]:
    """(path of the ONNX file, the torch model); the file is written once per cache folder."""
    import torch

    model = build(name)
    path = cache / f"{name}_opset{OPSET}_seed{SEED}.onnx"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        x = torch.zeros(1, 3, 224, 224)
        with torch.no_grad():
            torch.onnx.export(
                model, (x,), str(tmp), input_names=["data"], output_names=["logits"], opset_version=OPSET, dynamo=False
            )
        os.replace(tmp, path)
    return path, model


def _ort_session(path: Path, basic: bool = False) -> Any:
    """An onnxruntime session with one intra-op thread; ``basic``: its graph optimizations up to the
    basic level only (no NCHWc channel-blocked layout with its fused conv kernels)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if basic:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def measure(name: str, cache: Path, rounds: int, inner: int, ort_basic: bool = False) -> dict[str, Any]:
    """prepare time, per-run medians of ours/onnxruntime/torch and the output differences for one model."""
    import onnx
    import torch

    from framework.onnx.backend import prepare

    path, model = exported(name, cache)
    proto = onnx.load(str(path))
    x = np.random.default_rng(SEED).standard_normal((1, 3, 224, 224)).astype(np.float32)
    t0 = time.process_time()
    rep = prepare(proto)
    prep = time.process_time() - t0
    rep.run([x])
    first = time.process_time() - t0 - prep
    sess = _ort_session(path)
    xt = torch.from_numpy(x)
    ours = rep.run([x])[0]
    ref = sess.run(None, {"data": x})[0]
    with torch.no_grad():
        eager = model(xt).numpy()
    diff = float(np.abs(ours - ref).max())
    rel = diff / max(float(np.abs(ref).max()), 1e-30)
    torch_diff = float(np.abs(eager - ref).max())

    def run_ours() -> None:
        rep.run([x])

    # the net as translated, without the inference pass, in the rep's workspace (the original weights stay)
    ws = rep._cache[None][0]
    plain_def = type(rep.predict_net)()
    plain_def.CopyFrom(rep.predict_net)
    plain_def.name += "_as_translated"
    plain = ws.create_net(plain_def)
    out_name = rep.outputs[0]

    def run_plain() -> None:
        ws.feed_blob("data", x)
        plain.run()
        ws.fetch_blob(out_name)

    run_plain()
    plain_diff = float(np.abs(ws.fetch_blob(out_name) - ref).max())

    def run_ort() -> None:
        sess.run(None, {"data": x})

    def run_torch() -> None:
        with torch.no_grad():
            model(xt)

    contenders = {"ours": run_ours, "as translated": run_plain, "onnxruntime": run_ort, "torch": run_torch}
    if ort_basic:
        basic = _ort_session(path, basic=True)
        contenders["ort basic"] = lambda: basic.run(None, {"data": x})
    times = time_round_robin(
        contenders,
        rounds=rounds,
        inner=inner,
        warmup=2,
        clock=time.process_time,
    )
    diff = max(diff, plain_diff)
    return dict(name=name, prepare=prep, first=first, diff=diff, rel=rel, torch_diff=torch_diff, **times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated, of " + ", ".join(MODELS + EXTRA))
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--inner", type=int, default=3)
    p.add_argument("--cache", type=Path, default=None, help="folder of the exported ONNX files")
    p.add_argument(
        "--ort-basic",
        action="store_true",
        help="also time onnxruntime with basic graph optimizations only (no NCHWc layout): ours / that column",
    )
    args = p.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS + EXTRA]
    if unknown:
        p.error(f"unknown models {unknown}; choose from {', '.join(MODELS + EXTRA)}")
    import torch

    torch.set_num_threads(1)
    cache = args.cache or default_cache()
    rows, ratios = [], []
    for name in names:
        r = measure(name, cache, args.rounds, args.inner, args.ort_basic)
        ratio = r["ours"] / r["onnxruntime"]
        ratios += [ratio] if name in MODELS else []
        print(
            f"{name}: prepare {r['prepare']:.2f} s, ours {fmt_time(r['ours'])}, onnxruntime "
            f"{fmt_time(r['onnxruntime'])}, torch {fmt_time(r['torch'])}, ours/ort {ratio:.2f}, "
            f"max abs diff {r['diff']:.2e} (rel {r['rel']:.1e}; torch vs ort {r['torch_diff']:.1e})",
            file=sys.stderr,
            flush=True,
        )
        rows.append(
            [
                name,
                f"{r['prepare']:.2f} s",
                f"{r['first']:.2f} s",
                fmt_time(r["ours"]),
                f"{r['as translated'] / r['onnxruntime']:.2f}",
                fmt_time(r["onnxruntime"]),
                fmt_time(r["torch"]),
                f"{ratio:.2f}",
                f"{r['ours'] / r['torch']:.2f}",
                f"{r['diff']:.1e}",
            ]
            + ([f"{r['ours'] / r['ort basic']:.2f}"] if args.ort_basic else [])
        )
    header = [
        "model",
        "prepare (CPU)",
        "first run (CPU)",
        "ours",
        "no pass / ort",
        "onnxruntime",
        "torch eager",
        "ours / ort",
        "ours / torch",
        "max abs diff",
    ] + (["ours / ort basic"] if args.ort_basic else [])
    print(markdown_table(rows, header))
    if ratios:
        print(f"\nmedian ours/onnxruntime {statistics.median(ratios):.2f}, worst {max(ratios):.2f} (the default set)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
