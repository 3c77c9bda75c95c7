"""Every distributed op against numpy, on 2 and 4 ranks (mpiexec from the mpich wheel, oversubscribed)."""

import os
import re

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_on_every_rank(run_ranks, n):
    p = run_ranks(n, os.path.join(HERE, "collectives_rank.py"))
    assert p.returncode == 0, p.stdout + p.stderr
    # ranks' lines may interleave in mpiexec's forwarded stdout: find each rank's mark anywhere
    assert sorted(re.findall(r"OK rank (\d+) of (\d+)", p.stdout)) == [(str(r), str(n)) for r in range(n)]


def test_tcp_transport(run_ranks):
    """The cross-machine path: MPICH forced onto TCP sockets instead of shared memory."""
    env = {"MPIR_CVAR_CH4_NETMOD": "ofi", "MPIR_CVAR_NOLOCAL": "1", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}
    p = run_ranks(2, os.path.join(HERE, "collectives_rank.py"), env=env)
    assert p.returncode == 0, p.stdout + p.stderr


def test_ops_without_a_world_fail_clearly():
    import numpy as np

    from framework.core import CreateOperator
    from framework.errors import FrameworkError
    from framework.memory.workspace import Workspace
    from framework.net.api import run_operator_once

    ws = Workspace()
    ws.feed_blob("x", np.ones(3, np.float32))
    ws.feed_blob("cw", np.ones(1))
    with pytest.raises(FrameworkError, match="holds .*expected a CommonWorld"):
        run_operator_once(ws, CreateOperator("Allreduce", ["cw", "x"], ["x"]))
    with pytest.raises(FrameworkError, match="'nothing' does not exist"):
        run_operator_once(ws, CreateOperator("Barrier", ["nothing"], []))


def test_single_process_world_and_store_handlers():
    """Without mpiexec a process is an MPI job of one: the collectives are identities."""
    import numpy as np

    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.net.api import run_operator_once

    ws = Workspace()
    run_operator_once(ws, CreateOperator("RedisStoreHandlerCreate", [], ["store"], host="10.0.0.1", port=1))
    assert "redis '10.0.0.1:1'" in repr(ws.get_blob("store")._obj)  # recorded; nothing connected
    run_operator_once(ws, CreateOperator("MPICreateCommonWorld", [], ["cw"]))
    assert ws.get_blob("cw")._obj.size == 1
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ws.feed_blob("x", x)
    run_operator_once(ws, CreateOperator("MPIAllreduce", ["cw", "x"], ["y"]))
    np.testing.assert_array_equal(ws.fetch_blob("y"), x)
    run_operator_once(ws, CreateOperator("MPIAllgather", ["cw", "x"], ["g"]))
    np.testing.assert_array_equal(ws.fetch_blob("g"), x)
