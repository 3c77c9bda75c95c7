"""Transformer models through the ONNX path against onnxruntime and torch eager, one thread, CPU time.

Models, exported with ``torch.onnx.export`` (opset 17, random weights from a fixed seed):

- ``vit_b_16``: torchvision's ViT-B/16 architecture (built here in ``torch.nn``), batch 1, 224x224;
- ``bert``: a BERT-base-sized encoder, ``nn.TransformerEncoder`` (d_model 768, 12 heads, ff 3072, GELU,
  12 layers; ``--small``: 2 layers), sequence 128, batch 1;
- ``encoder``: the 2-layer d_model 64 ``nn.TransformerEncoder`` (4 heads, ff 256), sequence 32, batch 4.

Each model runs through ``framework.onnx.backend.prepare(model).run`` (with the inference pass, applied here
where this tree's ``prepare`` does not apply it yet), an onnxruntime session with one
intra-op thread, and torch eager. Outputs are compared before timing; rounds are interleaved
(bench/common.time_round_robin) and the clock is the process's CPU time, so the figures hold on a shared
machine. ``prepare`` is timed once (CPU time). Exports are cached in ``$FRAMEWORK_BENCH_CACHE`` (default
``/tmp/framework-bench-cache``), keyed by model and torch version.

Run: ``python -m bench.transformer_models`` (``--quick`` for fewer rounds, ``--small`` for a 2-layer BERT,
``--models vit_b_16,bert,encoder``).
"""

from __future__ import annotations

import argparse
import importlib.util
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

MODELS = ("vit_b_16", "bert", "encoder")


def vit_b_16():
    """torchvision's ``vit_b_16`` architecture in plain ``torch.nn`` (torchvision has no wheel for this torch):
    16x16/16 patch conv to 768 channels, a class token, learned position embeddings, 12 pre-norm blocks
    (LayerNorm eps 1e-6, 12-head ``nn.MultiheadAttention``, MLP 3072 with GELU), a final LayerNorm and a
    1000-way head on the class token; 86.6 M parameters, as torchvision's."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(768, eps=1e-6)
            self.self_attention = nn.MultiheadAttention(768, 12, batch_first=True)
            self.ln_2 = nn.LayerNorm(768, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(768, 3072), nn.GELU(), nn.Linear(3072, 768))

        def forward(self, x):
            y = self.ln_1(x)
            x = x + self.self_attention(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.ln_2(x))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv_proj = nn.Conv2d(3, 768, 16, 16)
            self.class_token = nn.Parameter(torch.zeros(1, 1, 768))
            self.pos_embedding = nn.Parameter(torch.empty(1, 197, 768).normal_(std=0.02))
            self.layers = nn.Sequential(*[Block() for _ in range(12)])
            self.ln = nn.LayerNorm(768, eps=1e-6)
            self.head = nn.Linear(768, 1000)

        def forward(self, x):
            x = self.conv_proj(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
            return self.head(self.ln(self.layers(x))[:, 0])

    return ViT()


def build(kind: str, small: bool = False):
    """(torch module in eval mode, input tensor, description) for ``kind``, weights from seed 0."""
    import torch

    torch.manual_seed(0)
    if kind == "vit_b_16":
        return vit_b_16().eval(), torch.randn(1, 3, 224, 224), "ViT-B/16 (1x224x224)"
    if kind in ("bert", "encoder"):
        d, heads, ff, layers, seq, batch = (768, 12, 3072, 12, 128, 1) if kind == "bert" else (64, 4, 256, 2, 32, 4)
        if kind == "bert" and small:
            layers = 2
        layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True)
        mod = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
        title = "BERT-base-sized encoder" if kind == "bert" else "TransformerEncoder"
        name = f"{title} ({layers} layers, d {d}, seq {seq})"
        return mod, torch.randn(batch, seq, d), name
    raise SystemExit(f"unknown model {kind!r}; choose from {', '.join(MODELS)}")


def onnx_bytes(mod, x) -> bytes:
    """``mod`` (one input ``x``, one output) exported by torch's exporter at opset 17, inputs named ``x``, outputs
    ``y``; attention runs unfused during the export (the fused path of eval-mode encoders has no ONNX form)."""
    import torch

    buf = io.BytesIO()
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation notes
            torch.onnx.export(mod, (x,), buf, opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return buf.getvalue()


def export_model(kind: str, small: bool = False):
    """(onnx ModelProto, input array, torch module, description); the export is cached on disk."""
    import onnx
    import torch

    mod, x, name = build(kind, small)
    folder = os.environ.get("FRAMEWORK_BENCH_CACHE", "/tmp/framework-bench-cache")
    os.makedirs(folder, exist_ok=True)
    tag = f"{kind}{'-small' if small and kind == 'bert' else ''}-torch{torch.__version__.split('+')[0]}"
    path = os.path.join(folder, f"{tag}.onnx")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(onnx_bytes(mod, x))
        os.replace(tmp, path)
    return onnx.load(path), x.numpy(), mod, name


def ours(model, x: np.ndarray):
    """(run, get_output, prepare CPU seconds) through framework.onnx.backend."""
    from framework.onnx import backend

    t0 = time.process_time()
    rep = backend.prepare(model)
    prep = time.process_time() - t0
    res: list = [None]
    if importlib.util.find_spec("framework.onnx.engine") is None:
        prep += _apply_inference_pass(rep, x)

    def run() -> None:
        res[0] = rep.run({"x": x})

    run()
    return run, lambda: np.asarray(res[0][0]), prep


def _apply_inference_pass(rep, x: np.ndarray) -> float:
    """Where ``prepare`` does not yet hand its net to the inference pass (a tree without
    framework/onnx/engine.py), do what it will: optimize the translated net with the graph outputs
    observable and run that. CPU seconds the pass and the net's creation take (counted in the prepare
    time; the first run that creates the translated net is not)."""
    from framework.net.optimize import optimize_inference

    rep.run({"x": x})  # creates the translated net in the rep's workspace (a run: not counted)
    t0 = time.process_time()
    ws, _, predict, created = rep._cache[None]
    optimized = optimize_inference(predict, ws, outputs=list(rep.outputs), shapes={"x": x.shape})
    created[:] = [ws.create_net(optimized, overwrite=True)]
    return time.process_time() - t0


def torch_runner(mod, x: np.ndarray):
    import torch

    torch.set_num_threads(1)
    xt = torch.from_numpy(x)
    res: list = [None]

    def run() -> None:
        with torch.inference_mode():
            res[0] = mod(xt)

    run()
    return run, lambda: res[0].numpy()


def run(models=MODELS, rounds=10, inner=2, small=False, log=print) -> list[list[str]]:
    """Table rows [model, ours, onnxruntime, torch, ours/ort, prepare, max abs diff]."""
    from bench.onnx_models import ort_runner

    pin_blas_threads(1)
    rows = []
    for kind in models:
        model, x, mod, name = export_model(kind, small)
        run_ours, get_ours, prep = ours(model, x)
        run_ort, get_ort = ort_runner(model, {"x": x}, threads=1)
        run_torch, get_torch = torch_runner(mod, x)
        a, b, c = np.asarray(get_ours()), np.asarray(get_ort()), np.asarray(get_torch())
        err = float(np.max(np.abs(a - b)))
        scale = float(np.max(np.abs(b))) or 1.0
        if a.shape != b.shape or err > 1e-3 * scale + 1e-4:
            raise SystemExit(f"{kind}: outputs differ from onnxruntime (shapes {a.shape} {b.shape}, max err {err})")
        if c.shape != b.shape or float(np.max(np.abs(c - b))) > 1e-3 * scale + 1e-4:
            raise SystemExit(f"{kind}: torch and onnxruntime disagree; the export is wrong")
        t = time_round_robin(
            {"ours": run_ours, "ort": run_ort, "torch": run_torch}, rounds=rounds, inner=inner, warmup=1,
            clock=time.process_time,
        )  # fmt: skip
        ratio = t["ours"] / t["ort"]
        rows.append([name, fmt_time(t["ours"]), fmt_time(t["ort"]), fmt_time(t["torch"]), f"{ratio:.2f}",
                     f"{prep:.2f} s", f"{err:.1e}"])  # fmt: skip
        log(f"{name}: ours {fmt_time(t['ours'])}, onnxruntime {fmt_time(t['ort'])}, torch {fmt_time(t['torch'])}, "
            f"ratio {ratio:.2f}, prepare {prep:.2f} s")  # fmt: skip
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--small", action="store_true", help="a 2-layer BERT-sized encoder instead of 12 layers")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    a = p.parse_args(argv)
    print("1 thread, process CPU time, interleaved rounds (medians)")
    rows = run(tuple(a.models.split(",")), rounds=3 if a.quick else 10, small=a.small)
    header = ["model", "ours", "onnxruntime", "torch eager", "ours / ort", "prepare", "max abs diff vs ort"]
    print(markdown_table(rows, header))


if __name__ == "__main__":
    main()
