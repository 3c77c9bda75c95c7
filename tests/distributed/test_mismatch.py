"""MPI jobs given hostile input: ranks disagreeing on a collective's dtypes or shapes get an error naming
op, blob and each rank's layout (not summed raw bytes, not MPI's "Message truncated"); a rank that fails
before MPI is initialised ends the whole job at once with its own error (not at the launcher's timeout)."""

import os
import re
import time

HERE = os.path.dirname(os.path.abspath(__file__))

PREFAIL = """
import os, sys
if os.environ.get("PMI_RANK") == "1":
    from framework.cli import main
    sys.exit(main(["run", "no_such_net.pbtxt"]))
import numpy as np
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
ws = Workspace()
run_operator_once(ws, CreateOperator("CreateCommonWorld", [], ["cw"]))
ws.feed_blob("x", np.ones(3, np.float32))
run_operator_once(ws, CreateOperator("Allreduce", ["cw", "x"], ["x"]))
print("rank 0 summed", ws.fetch_blob("x"))
"""


def test_collectives_check_dtype_and_shape_agreement(run_ranks):
    p = run_ranks(2, os.path.join(HERE, "mismatch_rank.py"), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(re.findall(r"OK rank (\d) tried (\d+)", p.stdout)) == [("0", "12"), ("1", "12")], p.stdout


def test_a_rank_failing_before_mpi_init_ends_the_job(run_ranks, tmp_path):
    script = tmp_path / "prefail.py"
    script.write_text(PREFAIL)
    t = time.monotonic()
    p = run_ranks(2, str(script), timeout=90, cwd=tmp_path)
    took = time.monotonic() - t
    assert p.returncode != 0 and took < 45, (p.returncode, took, p.stderr)
    assert "no_such_net.pbtxt" in p.stderr and "rank 1 of 2 failed: ending the job" in p.stderr, p.stderr
    assert "rank 0 summed" not in p.stdout
