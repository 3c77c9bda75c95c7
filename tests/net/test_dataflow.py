"""framework/net/dataflow.py: the readers, writers and producers it answers are those a scan of the op list
gives, after any sequence of rewrites made through it; the inference pass keeps it exact on real models."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.net import optimize
from framework.net.dataflow import DataFlow
from framework.proto.framework_pb2 import OperatorDef

BLOBS = "abcde"


# -- answers by scanning the list (the definitions) ----------------------------------------------------
def scan_readers(ops, i, blob):
    out = []
    for j in range(i + 1, len(ops)):
        if blob in ops[j].input:
            out.append(j)
        if blob in ops[j].output:
            break
    return out


def scan_producer(ops, j, blob):
    return next((i for i in range(j - 1, -1, -1) if blob in ops[i].output), None)


def scan_next_writer(ops, i, blob):
    return next((j for j in range(i + 1, len(ops)) if blob in ops[j].output), None)


def scan_written_between(ops, blob, i, j):
    return any(blob in ops[k].output for k in range(max(i + 1, 0), min(j, len(ops))))


def scan_touched_between(ops, blobs, i, j):
    return any(b in blobs for k in range(max(i + 1, 0), min(j, len(ops))) for b in (*ops[k].input, *ops[k].output))


def agree(flow: DataFlow) -> None:
    ops = flow.ops
    n = len(ops)
    flow.check()
    for blob in BLOBS:
        assert flow.written(blob) == any(blob in op.output for op in ops)
        assert flow.mentioned(blob) == any(blob in (*op.input, *op.output) for op in ops)
        assert flow.writers(blob) == [i for i, op in enumerate(ops) if blob in op.output]
        assert flow.readers_of(blob) == [i for i, op in enumerate(ops) if blob in op.input]
        uses = [i for i, op in enumerate(ops) if blob in (*op.input, *op.output)]
        assert flow.last_use(blob) == (uses[-1] if uses else None)
        for i in range(n):
            assert flow.readers(i, blob) == scan_readers(ops, i, blob)
            assert flow.producer(i, blob) == scan_producer(ops, i, blob)
            assert flow.next_writer(i, blob) == scan_next_writer(ops, i, blob)
        for i in range(-1, n + 1):
            for j in range(i, n + 2):
                assert flow.written_between(blob, i, j) == scan_written_between(ops, blob, i, j)
                assert flow.touched_between((blob, "z"), i, j) == scan_touched_between(ops, {blob, "z"}, i, j)


names = st.lists(st.sampled_from(BLOBS), max_size=3)
op_st = st.builds(lambda i, o: OperatorDef(type="X", input=i, output=o), names, names)


@settings(max_examples=60, deadline=None)
@given(st.lists(op_st, max_size=8), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50), op_st), max_size=12))
def test_queries_match_a_scan_after_any_rewrites(ops, steps):
    flow = DataFlow(ops)
    agree(flow)
    for kind, pos, new in steps:
        n = len(flow.ops)
        if kind == 0:
            flow.insert(pos % (n + 1), new)
        elif n and kind == 1:
            flow.delete(pos % n)
        elif n and kind == 2:
            flow.replace(pos % n, new)
        elif n and kind == 3:
            flow.move(pos % n, (pos // 7) % n)
        elif n:
            with flow.edit(pos % n) as op:
                del op.input[:]
                op.input.extend(new.input)
                op.output.extend(new.output)
        agree(flow)


def test_many_inserts_between_two_ops_keep_the_order():
    flow = DataFlow([OperatorDef(output=["a"]), OperatorDef(input=["a"], output=["b"])])
    for k in range(80):  # keys are halved every time: the view renumbers when they run out
        flow.insert(1, OperatorDef(input=["a"], output=[f"t{k}"]))
    assert flow.readers(0, "a") == list(range(1, 82))
    assert flow.producer(81, "a") == 0
    flow.check()


def test_a_change_made_behind_the_view_is_caught():
    ops = [OperatorDef(output=["a"]), OperatorDef(input=["a"], output=["b"])]
    flow = DataFlow(ops)
    ops[1].input[0] = "c"
    with pytest.raises(AssertionError, match="stale"):
        flow.check()


class _Checked(DataFlow):
    """Every query answered as a scan would, and the maps exact after every rewrite."""

    def readers(self, i, blob):
        got = super().readers(i, blob)
        assert got == scan_readers(self.ops, i, blob)
        return got

    def producer(self, j, blob):
        got = super().producer(j, blob)
        assert got == scan_producer(self.ops, j, blob)
        return got

    def written_between(self, blob, i, j):
        got = super().written_between(blob, i, j)
        assert got == scan_written_between(self.ops, blob, i, j)
        return got

    def touched_between(self, blobs, i, j):
        blobs = tuple(blobs)
        got = super().touched_between(blobs, i, j)
        assert got == scan_touched_between(self.ops, set(blobs), i, j)
        return got

    def written(self, blob):
        got = super().written(blob)
        assert got == any(blob in op.output for op in self.ops)
        return got


for _name in ("delete", "insert", "replace", "move"):

    def _checked(self, *a, _f=getattr(DataFlow, _name)):
        _f(self, *a)
        self.check()

    setattr(_Checked, _name, _checked)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "squeezenet1_1", "shufflenet_v2", "densenet121"])
def test_the_inference_pass_keeps_the_view_exact(name, monkeypatch):
    nets = pytest.importorskip("bench.real_models.nets")
    from framework.memory.workspace import Workspace

    m = nets.build(name, batch=1)
    ws = Workspace()
    ws.run_net_once(m.init_net())
    seen = []

    class Spy(_Checked):
        def __init__(self, ops):
            super().__init__(ops)
            seen.append(self)

    monkeypatch.setattr(optimize, "DataFlow", Spy)
    out = optimize.optimize_inference(m.predict_net, ws, share_buffers=False)
    (flow,) = seen
    flow.check()
    assert len(out.op) < len(m.predict_net.op)  # the pass rewrote the net through the view
