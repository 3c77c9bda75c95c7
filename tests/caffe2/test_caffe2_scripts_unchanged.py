"""Caffe2 code runs with no edit through ``python -m framework.caffe2``.

- ``scripts/mnist_tutorial.py``: the MNIST tutorial (brew LeNet trained from a TensorProtos
  DB, net_drawer, visualize, a test net, predictor_exporter save/load).
- ``scripts/operator_tests.py``: a Caffe2-style ``HypothesisTestCase`` operator test file.

Both import only ``caffe2.python`` / ``caffe2.proto`` names.
"""

import os
import re
import subprocess
import sys

HERE = os.path.join(os.path.dirname(__file__), "scripts")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")


def _run(script, *args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "framework.caffe2", os.path.join(HERE, script), *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=600,
    )


def test_scripts_import_only_caffe2():
    for name in ("mnist_tutorial.py", "operator_tests.py"):
        with open(os.path.join(HERE, name)) as f:
            code = [line for line in f if not line.lstrip().startswith("#")]
        assert not any("framework" in line for line in code), name
        assert any(line.startswith("from caffe2.python import") for line in code), name


def test_mnist_tutorial_runs_unchanged(tmp_path):
    r = _run("mnist_tutorial.py", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    out = r.stdout
    assert out.strip().endswith("DONE")
    first, last = map(float, re.search(r"train loss ([\d.]+) -> ([\d.]+)", out).groups())
    assert last < first / 4, out  # it learns
    assert float(re.search(r"test_accuracy: ([\d.]+)", out).group(1)) > 0.9, out
    assert float(re.search(r"max abs difference to the test net: (\S+)", out).group(1)) < 1e-5, out
    for name in ("mnist_model.minidb", "data.png", "conv1.png", "curves.png", "train_net.pbtxt"):
        assert (tmp_path / name).stat().st_size > 0, name


def test_caffe2_operator_test_file_runs_unchanged(tmp_path):
    r = _run("operator_tests.py", "-v", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert re.search(r"Ran 7 tests", r.stderr) and r.stderr.rstrip().endswith("OK"), r.stderr[-2000:]
