"""serialized_test_util: a Caffe2 SerializedTestCase file writes (-G) and then checks golden files."""

import io
import os
import subprocess
import sys
import zipfile

import numpy as np

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "serialized_tests.py")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def _run(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "framework.caffe2", SCRIPT, *args], capture_output=True, text=True, env=ENV, cwd=cwd
    )


def test_generate_then_compare_then_catch_a_change(tmp_path):
    r = _run("-G", "-O", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    golden = tmp_path / "operator_test" / "serialized_tests.test_sigmoid.zip"
    with zipfile.ZipFile(golden) as z:
        assert set(z.namelist()) >= {"op.pb", "inout.npz", "grad_0.pb"}
        arrays = dict(np.load(io.BytesIO(z.read("inout.npz")), allow_pickle=False))
        op_pb, grad_pb = z.read("op.pb"), z.read("grad_0.pb")
    np.testing.assert_allclose(arrays["output_0"], 1 / (1 + np.exp(-arrays["input_0"])), rtol=1e-5)
    r = _run("-O", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    arrays["output_0"] = arrays["output_0"] + 0.5  # a golden output that the op does not give
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with zipfile.ZipFile(golden, "w") as z:
        z.writestr("op.pb", op_pb)
        z.writestr("inout.npz", buf.getvalue())
        z.writestr("grad_0.pb", grad_pb)
    r = _run("-O", str(tmp_path), cwd=tmp_path)
    assert r.returncode != 0 and "Not equal to tolerance" in r.stderr
