"""Caffe2's shuffles (std::shuffle with a default-seeded std::default_random_engine, GNU C++
library) reproduced: the engine against the C++ standard's check value, the distribution and
shuffle against draws worked out by hand, and SortAndShuffle against Caffe2's own recorded order."""

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops.io.std_shuffle import MinstdRand0, std_shuffle


def test_engine_matches_the_cxx_standard():
    g = MinstdRand0()
    first = [g() for _ in range(3)]
    assert first == [16807, 282475249, 1622650073]  # 16807**k mod (2**31 - 1)
    for _ in range(10000 - 3):
        last = g()
    assert last == 1043618065  # [rand.predef]: the 10000th value of a default-constructed minstd_rand0


def test_uniform_downscales_one_draw():
    # uniform(0, 1): scaling = (2**31 - 2) // 2 = 1073741822; draw 16807 - 1 -> 0
    assert MinstdRand0().uniform(1) == 0
    # uniform(0, 2): scaling 715827882; second draw 282475249 - 1 -> 0, third 1622650073 - 1 -> 2
    g = MinstdRand0()
    g()
    assert g.uniform(2) == 0 and g.uniform(2) == 2


def test_shuffle_by_hand():
    # i=1: uniform(0,1) from 16806 -> 0, swap(1,0): [b a c d]
    # i=2: uniform(0,2) from 282475248 // 715827882 = 0, swap(2,0): [c a b d]
    # i=3: uniform(0,3) from 1622650072 // 536870911 = 3, no move: [c a b d]
    v = np.array(list("abcd"))
    std_shuffle(v)
    assert "".join(v) == "cabd"


def test_sort_and_shuffle_gives_caffe2s_recorded_order():
    # Caffe2's dataset test: 3 records, int_lists lengths [2, 0, 1], sorted by it, batch_size 2,
    # shuffle_size 1 -> it reads records [2, 1, 0]
    ws = Workspace()
    ws.feed_blob("len", np.array([2, 0, 1], np.int32))
    ws.feed_blob("val", np.arange(3, dtype=np.int64))
    fields = ["a:lengths", "a:values"]
    ws.run_operator_once(CreateOperator("CreateTreeCursor", [], ["cur"], fields=fields))
    op = CreateOperator("SortAndShuffle", ["cur", "len", "val"], ["idx"], sort_by_field_idx=0, batch_size=2)
    ws.run_operator_once(op)
    assert ws.fetch_blob("idx").tolist() == [2, 1, 0]
    ws.run_operator_once(op)  # the same order on every run (a fresh engine per shuffle)
    assert ws.fetch_blob("idx").tolist() == [2, 1, 0]
