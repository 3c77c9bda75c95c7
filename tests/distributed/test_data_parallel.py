"""data_parallel_model over MPI: N ranks x batch B train to the same weights as 1 rank x batch N*B."""

import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


TCP = {"MPIR_CVAR_CH4_NETMOD": "ofi", "MPIR_CVAR_NOLOCAL": "1", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}


def train(tmp_path, run_ranks, ranks, devices, tag, env=None, mode="sync"):
    out = str(tmp_path / f"{tag}.npz")
    args = [os.path.join(HERE, "dpm_rank.py"), "16", "6", str(devices), out, mode]
    if ranks == 1:
        p = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1"),
        )
    else:
        p = run_ranks(ranks, *args, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return dict(np.load(out))


@pytest.mark.parametrize("ranks, devices, env", [(2, 1, None), (4, 1, None), (2, 2, None), (2, 1, TCP)])
def test_ranks_train_like_one_big_batch(tmp_path, run_ranks, ranks, devices, env):
    """...also with MPICH forced onto TCP sockets (loopback): the path between machines."""
    one = train(tmp_path, run_ranks, 1, 1, "one")
    many = train(tmp_path, run_ranks, ranks, devices, "many", env)
    assert one.keys() == many.keys() == {"h_w", "h_b", "pred_w", "pred_b"}
    for k in one:
        np.testing.assert_allclose(many[k], one[k], rtol=2e-5, atol=2e-6, err_msg=k)
