"""framework/net/dataflow.py: the readers, writers and producers it answers are those a scan of the op list
gives, after any sequence of rewrites made through it; the inference pass keeps it exact on real models."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.net import optimize
from framework.net.dataflow import DataFlow
from framework.proto.framework_pb2 import NetDef, OperatorDef

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


def scan_versions(ops):
    """SSA numbering by replaying the list: reads see the current version, writes add one."""
    current, reads, writes = {}, [], []
    for op in ops:
        reads.append({b: current.setdefault(b, 0) for b in op.input})
        w = {}
        for b in dict.fromkeys(op.output):
            current[b] = w[b] = current[b] + 1 if b in current else 0
        writes.append(w)
    return reads, writes


def agree(flow: DataFlow) -> None:
    ops = flow.ops
    n = len(ops)
    versions = flow.versions()  # the one-pass table (kept until a rewrite), read before check() rebuilds the view
    flow.check()
    reads, writes = scan_versions(ops)
    assert len(versions) == n
    for i in range(n):
        assert {b: flow.read_version(i, b) for b in ops[i].input} == reads[i]
        assert {b: flow.write_version(i, b) for b in ops[i].output} == writes[i]
        assert dict(zip(ops[i].input, versions[i][0])) == reads[i] and len(versions[i][0]) == len(ops[i].input)
        assert dict(zip(ops[i].output, versions[i][1])) == writes[i] and len(versions[i][1]) == len(ops[i].output)
    first_read = {}
    for i, op in enumerate(ops):
        for b in op.input:
            first_read.setdefault(b, i)
    first_write = {}
    for i, op in enumerate(ops):
        for b in op.output:
            first_write.setdefault(b, i)
    inputs = [b for b, i in sorted(first_read.items(), key=lambda t: t[1]) if i <= first_write.get(b, n)]
    assert flow.inputs() == inputs and sorted(flow.inputs(ordered=False)) == sorted(inputs)
    assert flow.produced() == set(first_write)
    assert flow.blobs() == list(dict.fromkeys(b for op in ops for b in (*op.input, *op.output)))
    for blob in BLOBS:
        assert flow.is_read(blob) == (blob in first_read)
        assert flow.read_first(blob) == (blob in inputs)
        assert flow.first_writer(blob) == first_write.get(blob)
        uses = [i for i, op in enumerate(ops) if blob in (*op.input, *op.output)]
        assert flow.first_use(blob) == (uses[0] if uses else None)
        assert flow.written(blob) == any(blob in op.output for op in ops)
        assert flow.mentioned(blob) == any(blob in (*op.input, *op.output) for op in ops)
        assert flow.writers(blob) == [i for i, op in enumerate(ops) if blob in op.output]
        assert flow.readers_of(blob) == [i for i, op in enumerate(ops) if blob in op.input]
        uses = [i for i, op in enumerate(ops) if blob in (*op.input, *op.output)]
        assert flow.last_use(blob) == (uses[-1] if uses else None)
        assert flow.last_uses().get(blob) == flow.last_use(blob)
        assert flow.first_writers().get(blob) == first_write.get(blob)
        for i in range(n):
            assert flow.readers(i, blob) == scan_readers(ops, i, blob)
            assert flow.producer(i, blob) == scan_producer(ops, i, blob)
            assert flow.next_writer(i, blob) == scan_next_writer(ops, i, blob)
        for i in range(-1, n + 1):
            for j in range(i, n + 2):
                assert flow.written_between(blob, i, j) == scan_written_between(ops, blob, i, j)
                assert flow.touched_between((blob, "z"), i, j) == scan_touched_between(ops, {blob, "z"}, i, j)
    flow.versions()  # kept until the next rewrite, which must drop it


names = st.lists(st.sampled_from(BLOBS), max_size=3)
op_st = st.builds(lambda i, o: OperatorDef(type="X", input=i, output=o), names, names)


@settings(max_examples=60, deadline=None)
@given(st.lists(op_st, max_size=8), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50), op_st), max_size=12))
def test_queries_match_a_scan_after_any_rewrites(ops, steps):
    flow = DataFlow(ops, checked=False)  # agree() checks: not rebuilt at each rewrite, so what it keeps must follow
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


def _if(cond, reads, writes):
    """An If whose then-branch reads ``reads`` and writes ``writes`` in the outer workspace."""
    then = NetDef(op=[OperatorDef(type="Copy", input=[r], output=[w]) for r, w in zip(reads, writes)])
    op = OperatorDef(type="If", input=[cond])
    op.arg.add(name="then_net").n.CopyFrom(then)
    return op


def test_nested_nets_and_control_inputs_count_when_asked():
    ops = [
        OperatorDef(type="X", output=["a"]),
        _if("c", ["a"], ["b"]),
        OperatorDef(type="X", input=["b"], output=["d"], control_input=["c"]),
    ]
    plain, nested, control = DataFlow(ops), DataFlow(ops, nested=True), DataFlow(ops, control=True)
    assert plain.readers(0, "a") == [] and plain.producer(2, "b") is None
    assert nested.readers(0, "a") == [1] and nested.producer(2, "b") == 1
    assert nested.io(1) == (("c", "a"), ("b",))
    assert plain.readers_of("c") == [1] and control.readers_of("c") == [1, 2]
    assert control.last_use("c") == 2 and plain.last_use("c") == 1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(names, names, names, st.booleans()), max_size=6))
def test_nested_and_control_views_match_a_scan_of_what_each_op_touches(specs):
    ops = [
        _if("c", i, o) if nest else OperatorDef(type="X", input=i, output=o, control_input=c) for i, o, c, nest in specs
    ]
    flow = DataFlow(ops, nested=True, control=True)
    flat = [OperatorDef(type="X", input=flow.io(k)[0], output=flow.io(k)[1]) for k in range(len(ops))]
    for k, (i, o, c, nest) in enumerate(specs):  # what the op touches, written out
        inner_reads, inner_writes = set(), set()
        for r, w in zip(i, o):  # the then-net's copies, in order: a blob it wrote first is its own
            inner_reads |= {r} - inner_writes
            inner_writes.add(w)
        assert set(flat[k].input) == ({"c", *inner_reads} if nest else {*i, *c})
        assert set(flat[k].output) == (inner_writes if nest else set(o))
    mirror = DataFlow(flat)
    for blob in BLOBS + "c":
        assert flow.writers(blob) == mirror.writers(blob) and flow.readers_of(blob) == mirror.readers_of(blob)
        assert flow.inputs() == mirror.inputs() and flow.last_use(blob) == mirror.last_use(blob)
        for k in range(len(ops)):
            assert flow.readers(k, blob) == scan_readers(flat, k, blob)
            assert flow.producer(k, blob) == scan_producer(flat, k, blob)


def test_a_checked_view_fails_at_the_rewrite_after_a_change_behind_it():
    ops = [OperatorDef(output=["a"]), OperatorDef(input=["a"], output=["b"])]
    flow = DataFlow(ops, checked=True)
    ops[1].output[0] = "z"
    with pytest.raises(AssertionError, match="stale"):
        flow.insert(2, OperatorDef(input=["b"]))
    assert DataFlow([], checked=None).checked  # the suite turns checking on (tests/conftest.py)


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

    def _checked(self, *a, _f=DataFlow.__dict__[_name]):
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
