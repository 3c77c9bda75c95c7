"""A ReceiveTensor no message can ever answer is refused at once, not left waiting forever (the op fuzzer's
one-rank world: a receive from rank 0 by rank 0 blocked inside MPI)."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace

pytest.importorskip("mpi4py")


@pytest.mark.parametrize("src", [0, 3, -1])
def test_a_receive_nothing_can_answer_is_refused_and_changes_nothing(src):
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateCommonWorld", [], ["cw"]))
    ws.feed_blob("got", np.arange(4, dtype=np.float32))
    with pytest.raises(FrameworkError, match="nothing can arrive from .*rank 0 of a world of 1"):
        ws.run_operator_once(CreateOperator("ReceiveTensor", ["cw", "got"], ["got", "src", "tag"], src=src))
    np.testing.assert_array_equal(ws.fetch_blob("got"), np.arange(4, dtype=np.float32))
