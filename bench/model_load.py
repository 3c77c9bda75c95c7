"""Loading real models: from files to the first prediction, one row per model, in CPU seconds.

    python -m bench.model_load                    # ResNet-50 (Caffe2 pair) and ResNet-18 (ONNX)
    python -m bench.model_load --only resnet50 --dir /tmp/models

Rows:

- ``resnet50``: a Caffe2-format ResNet-50 pair with the zoo model's 25.6 M weights as GivenTensorFill
  ops (``init_net.pb``, 128 MB) and its predict net (``predict_net.pb``), built by
  ``bench.real_models.nets`` (random weights; the zoo cannot be downloaded here). Columns: protobuf's
  own ``NetDef.ParseFromString`` of ``init_net.pb``; ``load_net_def`` of the file; running the init
  net; ``Predictor`` build (both files in, parameters loaded, inference pass); first and second
  prediction; import-to-first-prediction (a fresh process: interpreter start, ``import framework``,
  build, first run); ``framework predict --init --net`` (a fresh process, whole); onnxruntime's
  ``InferenceSession`` creation on the same weights (our ONNX export of the pair).
- ``resnet18_onnx``: torchvision's ResNet-18 (plain ``torch.nn``, ``bench/resnet18_torch.py``, random
  weights) exported by ``torch.onnx.export``: ``onnx.load``, ``framework.onnx.backend.prepare``, first
  and second ``run``, import-to-first-prediction, onnxruntime's ``InferenceSession`` creation.

Every figure is CPU time (``time.process_time``, or the child's rusage) of one run, measured in a fresh
child process after one untimed warm-up child (so numba's on-disk kernel cache and Python's bytecode
cache, kept under ``--dir``, are warm), with BLAS on one thread: robust to the other jobs on a shared
machine, and ratios come from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("resnet50", "resnet18_onnx")
_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# -- files ---------------------------------------------------------------------------------------------------------
def make_files(model: str, folder: str) -> dict[str, str]:
    """Write (once) the files of ``model`` into ``folder``; returns their paths by role."""
    os.makedirs(folder, exist_ok=True)
    x = os.path.join(folder, f"{model}_input.npy")
    if model == "resnet50":
        paths = {
            "init": os.path.join(folder, "resnet50_init_net.pb"),
            "predict": os.path.join(folder, "resnet50_predict_net.pb"),
            "onnx": os.path.join(folder, "resnet50.onnx"),
            "input": x,
        }
        if not all(os.path.exists(p) for p in paths.values()):
            _write_resnet50(paths)
        return paths
    paths = {"onnx": os.path.join(folder, "resnet18.onnx"), "input": x}
    if not all(os.path.exists(p) for p in paths.values()):
        import numpy as np

        from bench.resnet18_torch import export_resnet18

        export_resnet18(paths["onnx"])
        np.save(x, np.random.default_rng(1).random((1, 3, 224, 224), dtype=np.float32))
    return paths


def _write_resnet50(paths: dict[str, str]) -> None:
    import numpy as np
    import onnx

    from bench.onnx_models import exported
    from bench.real_models.nets import build
    from framework.proto.io import write_binary

    model = build("resnet50")
    write_binary(model.init_net(), paths["init"])
    write_binary(model.predict_net, paths["predict"])
    x = model.input_data()
    np.save(paths["input"], x)
    onnx.save(exported(model.predict_net, model.weights, {model.input_name: x}), paths["onnx"])


# -- one measured child process ---------------------------------------------------------------------------------------
def _child_caffe2(paths: dict[str, str]) -> dict[str, float]:
    clock = time.process_time
    import numpy as np

    from framework.predictor import Predictor

    out = {"start": clock()}  # from the process's start: interpreter, ``import framework``
    x = np.load(paths["input"])
    t = clock()
    p = Predictor(paths["init"], paths["predict"])
    out["build"] = clock() - t
    t = clock()
    p.run([x])
    out["first"] = clock() - t
    out["to_first"] = clock()  # from the process's start: interpreter, imports, build, first run
    t = clock()
    p.run([x])
    out["second"] = clock() - t
    del p

    from framework.memory.workspace import Workspace
    from framework.net.graph import load_net_def
    from framework.proto.framework_pb2 import NetDef

    with open(paths["init"], "rb") as f:
        data = f.read()
    t = clock()
    NetDef().ParseFromString(data)
    out["pb_parse"] = clock() - t
    del data
    t = clock()
    init = load_net_def(paths["init"])
    out["load_net_def"] = clock() - t
    t = clock()
    Workspace().run_net_once(init)
    out["init_run"] = clock() - t
    out.update(_ort_session(paths["onnx"]))
    return out


def _child_onnx(paths: dict[str, str]) -> dict[str, float]:
    clock = time.process_time
    import numpy as np
    import onnx

    from framework.onnx.backend import prepare

    out = {"start": clock()}
    x = np.load(paths["input"])
    t = clock()
    model = onnx.load(paths["onnx"])
    out["onnx_load"] = clock() - t
    t = clock()
    rep = prepare(model)
    out["prepare"] = clock() - t
    t = clock()
    rep.run([x])
    out["first"] = clock() - t
    out["to_first"] = clock()
    t = clock()
    rep.run([x])
    out["second"] = clock() - t
    out.update(_ort_session(paths["onnx"]))
    return out


def _ort_session(path: str) -> dict[str, float]:
    try:
        import onnxruntime as ort
    except ImportError:
        return {}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    t = time.process_time()
    ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return {"ort_session": time.process_time() - t}


def _run_child(model: str, paths: dict[str, str]) -> dict[str, float]:
    code = (
        "import json, sys; from bench.model_load import _child; "
        f"print('RESULT', json.dumps(_child({model!r}, json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(paths)],
        capture_output=True,
        text=True,
        env=_env(os.path.dirname(paths["input"])),
        cwd=ROOT,
    )
    if done.returncode:
        raise RuntimeError(f"{model}: the measuring process failed:\n{done.stderr[-3000:]}")
    line = next(s for s in done.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _child(model: str, paths: dict[str, str]) -> dict[str, float]:
    return _child_caffe2(paths) if model == "resnet50" else _child_onnx(paths)


def _env(folder: str) -> dict[str, str]:
    """The children's environment: BLAS on one thread, and Python's bytecode cache on (in ``folder``), as
    an installed package has it: with PYTHONDONTWRITEBYTECODE every child would compile the framework's
    sources again."""
    env = dict(os.environ, **_ENV)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(folder, "pycache")
    return env


def _cli_predict(paths: dict[str, str]) -> float:
    """CPU seconds of a whole ``framework predict --init --net --input`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [sys.executable, "-m", "framework", "predict", "--init", paths["init"], "--net", paths["predict"]]
    env = _env(os.path.dirname(paths["input"]))
    done = subprocess.run([*cmd, "--input", paths["input"]], capture_output=True, text=True, env=env, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(f"framework predict failed:\n{done.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(model: str, folder: str, warm: bool = True) -> dict[str, float]:
    """One row: the child's figures (and, for the Caffe2 pair, ``framework predict``'s)."""
    paths = make_files(model, folder)
    if warm:
        _run_child(model, paths)  # fills numba's kernel cache; not timed
    row = _run_child(model, paths)
    if model == "resnet50":
        row["cli_predict"] = _cli_predict(paths)
    return row


# -- report ----------------------------------------------------------------------------------------------------------
def _s(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} s"


def _x(v: float | None, ref: float | None) -> str:
    return "" if v is None or not ref else f" ({v / ref:.1f}x)"


def report(rows: dict[str, dict[str, float]]) -> str:
    """The markdown tables of ``rows`` (CPU seconds; ratios in parentheses)."""
    lines = []
    r = rows.get("resnet50")
    if r:
        lines += [
            "| model | protobuf parse | load_net_def | init-net run | start + imports | Predictor build | "
            "first prediction | second prediction | import to first prediction | `framework predict` | "
            "onnxruntime session |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| resnet50 (Caffe2 pair, 25.6 M weights) | {_s(r['pb_parse'])} | {_s(r['load_net_def'])}"
            f"{_x(r['load_net_def'], r['pb_parse'])} | {_s(r['init_run'])} | {_s(r['start'])} | {_s(r['build'])} | "
            f"{_s(r['first'])} | {_s(r['second'])} | {_s(r['to_first'])} | {_s(r.get('cli_predict'))} | "
            f"{_s(r.get('ort_session'))} |",
        ]
    r = rows.get("resnet18_onnx")
    if r:
        lines += [
            "",
            "| model | start + imports | onnx.load | prepare | first run | second run | import to first prediction | "
            "onnxruntime session |",
            "|---|---|---|---|---|---|---|---|",
            f"| resnet18 (ONNX, 11.7 M weights) | {_s(r['start'])} | {_s(r['onnx_load'])} | {_s(r['prepare'])}"
            f"{_x(r['prepare'], r.get('ort_session'))} | {_s(r['first'])} | {_s(r['second'])} | {_s(r['to_first'])} | "
            f"{_s(r.get('ort_session'))} |",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "framework-bench-model-load"))
    ap.add_argument("--no-warm", action="store_true", help="no warm-up process (kernel and bytecode caches as found)")
    ap.add_argument("--json", action="store_true", help="print the raw figures as JSON too")
    args = ap.parse_args(argv)
    rows = {m: measure(m, args.dir, warm=not args.no_warm) for m in args.only}
    print(report(rows))
    if args.json:
        print(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
