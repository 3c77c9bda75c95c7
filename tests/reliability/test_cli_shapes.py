"""`--shape` given to the CLI: negative, non-integer, nameless or enormous shapes are a user error
(exit 2, naming the flag), never accepted nor an internal error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET = 'name: "n" op { input: "x" output: "y" type: "Relu" } external_input: "x" external_output: "y"'


def _cli(*args, cwd):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT, FRAMEWORK_MAX_ALLOC_BYTES=str(1 << 30))
    return subprocess.run(
        [sys.executable, "-m", "framework", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.parametrize(
    "spec,words",
    [("x=-1,3", "negative"), ("x=a,3", "integers"), ("=3", "NAME="), ("x=99999999999,64", "allocation limit")],
)
def test_inspect_bad_shape_is_user_error(tmp_path, spec, words):
    (tmp_path / "net.pbtxt").write_text(NET)
    r = _cli("inspect", "net.pbtxt", "--shape", spec, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--shape" in r.stderr and words in r.stderr and "internal error" not in r.stderr


def test_inspect_good_shape(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET)
    r = _cli("inspect", "net.pbtxt", "--shape", "x=2,3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "y [2,3]" in r.stdout


def test_convert_negative_shape_is_user_error(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET)
    r = _cli("convert", "net.pbtxt", "--to", "onnx", "-o", "m.onnx", "--shape", "x=-1,3", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "negative" in r.stderr and not (tmp_path / "m.onnx").exists()


def _npy_with_header(path, shape, data=b""):
    import numpy as np
    from numpy.lib import format as npy_format

    with open(path, "wb") as f:
        npy_format.write_array_header_1_0(
            f, {"descr": np.dtype(np.float32).str, "fortran_order": False, "shape": shape}
        )
        f.write(data)


@pytest.mark.parametrize("shape,words", [((1 << 40,), "allocation limit"), ((1000, 3), "holds 12 bytes")])
def test_npy_header_lying_about_its_size_is_user_error(tmp_path, shape, words):
    (tmp_path / "net.pbtxt").write_text(NET)
    _npy_with_header(tmp_path / "x.npy", shape, b"\0" * 12)
    r = _cli("run", "net.pbtxt", "--input", "x=x.npy", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "x.npy" in r.stderr and words in r.stderr and "internal error" not in r.stderr
