"""Every ```pbtxt block of docs/netdef_format.md parses (as a NetDef, or a PlanDef if marked)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from framework.proto import parse_text
from framework.proto.framework_pb2 import NetDef, PlanDef

DOC = Path(__file__).resolve().parents[2] / "docs" / "netdef_format.md"
BLOCKS = re.findall(r"^```pbtxt\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_doc_has_blocks():
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_block_parses(index):
    text = BLOCKS[index]
    cls = PlanDef if text.startswith("# PlanDef") else NetDef
    msg = parse_text(text, cls, source=f"{DOC.name} block {index}")
    assert msg.name


def test_both_device_id_spellings_in_the_doc_mean_the_same():
    nets = {n.name: n for n in (parse_text(b, NetDef) for b in BLOCKS if not b.startswith("# PlanDef"))}
    old, new = nets["gpu_net_2018"], nets["gpu_net_later"]
    assert old.device_option.device_id == new.device_option.device_id == 0
    assert old.op[0].device_option.device_id == new.op[0].device_option.device_id == 1


def test_the_examples_run():
    pytest.importorskip("framework.net.base")
    import numpy as np

    from framework.memory.workspace import Workspace

    ran = 0
    for text in BLOCKS:
        ws = Workspace()
        if text.startswith("# PlanDef"):
            ws.run_plan(parse_text(text, PlanDef))
            assert ws.fetch_blob("iter") == [100]
            ran += 1
            continue
        net = parse_text(text, NetDef)
        if net.name == "nested":  # If is Caffe2 control flow, not an op here
            continue
        rng = np.random.default_rng(0)
        ws.feed_blob("X", rng.standard_normal((2, 3, 4, 4)).astype(np.float32))
        ws.feed_blob("W", rng.standard_normal((5, 48)).astype(np.float32))
        ws.feed_blob("b", np.zeros(5, np.float32))
        ws.run_net_once(net)
        for out in net.external_output:
            assert ws.has_blob(out)
        ran += 1
    assert ran >= 6
