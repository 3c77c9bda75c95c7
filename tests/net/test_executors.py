"""Executors: simple vs dag equality, errors from worker threads, prof_dag, concurrency, fast path."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import core
from framework.core import CreateOperator
from framework.errors import OperatorError
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef


def net_of(*ops, name="n", type="", external_input=(), num_workers=None):
    net = NetDef(name=name, type=type)
    net.external_input.extend(external_input)
    net.op.extend(ops)
    if num_workers:
        net.num_workers = num_workers
    return net


@st.composite
def random_nets(draw):
    """Random DAG-shaped nets of Relu/Scale/Sum/Sub ops, with in-place writes."""
    n_in = draw(st.integers(1, 3))
    blobs = [f"in{i}" for i in range(n_in)]
    ops = []
    for k in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["Relu", "Scale", "Sum", "Sub", "inplace"]))
        a = draw(st.sampled_from(blobs))
        if kind == "inplace":
            ops.append(CreateOperator("Scale", [a], [a], scale=draw(st.sampled_from([0.5, -1.0, 2.0]))))
            continue
        out = f"b{k}"
        if kind in ("Sum", "Sub"):
            b = draw(st.sampled_from(blobs))
            ops.append(CreateOperator(kind, [a, b], [out]))
        elif kind == "Scale":
            ops.append(CreateOperator("Scale", [a], [out], scale=draw(st.sampled_from([0.5, -1.0, 3.0]))))
        else:
            ops.append(CreateOperator("Relu", [a], [out]))
        blobs.append(out)
    if draw(st.booleans()):  # shuffle single-producer declarations: nets need not be sorted
        ops = draw(st.permutations(ops)) if not any(o.input[0] == o.output[0] for o in ops) else ops
    return n_in, ops, blobs


@settings(max_examples=40, deadline=None)
@given(random_nets(), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_simple_and_dag_agree(spec, workers, seed):
    n_in, ops, blobs = spec
    rng = np.random.default_rng(seed)
    inputs = {f"in{i}": rng.standard_normal(3).astype(np.float32) for i in range(n_in)}
    results = []
    for kind in ("simple", "dag", "prof_dag"):
        ws = Workspace()
        for k, v in inputs.items():
            ws.feed_blob(k, v)
        net = ws.create_net(net_of(*ops, type=kind, external_input=list(inputs), num_workers=workers))
        net.run()
        net.run()  # second run exercises the compiled fast path
        results.append({b: ws.fetch_blob(b) for b in blobs})
    for other in results[1:]:
        for b in blobs:
            np.testing.assert_array_equal(results[0][b], other[b], err_msg=b)


def _two_branch_failure(fail_sleep=0.0):
    return net_of(
        CreateOperator("_TestRecord", ["X"], ["a"], name="ok_a"),
        CreateOperator("_TestFail", ["a"], ["fa"], name="bad_a", sleep_ms=fail_sleep),
        CreateOperator("_TestRecord", ["fa"], ["after_a"], name="after_a"),
        CreateOperator("_TestFail", ["X"], ["fb"], name="bad_b", sleep_ms=fail_sleep),
        type="dag",
        external_input=["X"],
        num_workers=2,
    )


def test_dag_error_raised_in_caller_with_context(op_log):
    ws = Workspace()
    ws.feed_blob("X", np.ones(2))
    net = ws.create_net(_two_branch_failure(fail_sleep=30))
    with pytest.raises(OperatorError) as e:
        net.run()
    err = e.value
    assert "_TestFail" in str(err) and "boom bad_" in str(err) and "in net 'n'" in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert "after_a" not in op_log  # scheduling stopped
    # both failing ops were running: the later error is chained as a secondary error
    assert len(err.secondary_errors) == 1
    assert any("secondary error" in note for note in err.__notes__)
    assert ws.last_failed_op_net_position in (1, 3)
    # the workspace and the net stay usable
    ws.run_net_once(net_of(CreateOperator("_TestRecord", ["X"], ["Z"], name="z"), name="m"))
    assert ws.fetch_blob("Z")[0] == 2.0
    with pytest.raises(OperatorError):
        net.run()


def test_simple_error_names_op_and_python_creation_site():
    net = core.Net("fails")
    x = net.AddExternalInput("X")
    h = net.Relu(x, "h")
    net.add_op("_TestFail", [h], ["y"], name="the_bad_one")
    ws = Workspace()
    ws.feed_blob("X", np.ones(2, np.float32))
    created = ws.create_net(net)
    with pytest.raises(OperatorError) as e:
        created.run()
    msg = str(e.value)
    assert 'op #1 _TestFail "the_bad_one"' in msg and "input 0 'h': float [2]" in msg
    assert "the op was created at" in msg and "test_executors.py" in msg
    assert e.value.op_index == 1 and ws.last_failed_op_net_position == 1


def test_same_net_from_two_threads_is_serialized(run_in_two_threads):
    ws = Workspace()
    ws.feed_blob("X", np.ones(1))
    net = ws.create_net(
        net_of(
            CreateOperator("_TestRecord", ["X"], ["a"], name="first", sleep_ms=20),
            CreateOperator("_TestRecord", ["a"], ["b"], name="second", sleep_ms=20),
            external_input=["X"],
        )
    )
    assert run_in_two_threads(net) == ["first", "second", "first", "second"]


def test_separate_workspaces_run_concurrently():
    nets = []
    for i in range(2):
        ws = Workspace()
        ws.feed_blob("X", np.ones(1))
        meet = CreateOperator("_TestRendezvous", [], [])  # waits for the other net's: fails if serialized
        nets.append(ws.create_net(net_of(meet, CreateOperator("_TestRecord", ["X"], ["a"]), name=f"n{i}")))
    errors = []

    def run(n):
        try:
            n.run()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in nets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_dag_runs_independent_branches_on_several_threads(op_events):
    ws = Workspace()
    ws.feed_blob("X", np.ones(1))
    ops = []
    for i in range(2):  # two branches; each waits for the other at its rendezvous: fails if run one by one
        ops.append(CreateOperator("_TestRendezvous", ["X"], [f"m{i}"], name=f"meet{i}"))
        ops.append(CreateOperator("_TestRecord", [f"m{i}"], [f"y{i}"], name=f"b{i}"))
    net = ws.create_net(net_of(*ops, type="dag", external_input=["X"], num_workers=2))
    net.run()
    op_events.clear()
    net.run()
    assert len({thread for _, thread, _ in op_events}) == 2


def test_prof_dag_stats():
    ws = Workspace()
    ws.feed_blob("X", np.ones(4, np.float32))
    net = ws.create_net(
        net_of(
            CreateOperator("Relu", ["X"], ["a"], name="r1"),
            CreateOperator("Relu", ["a"], ["b"], name="r2"),
            CreateOperator("_TestRecord", ["b"], ["c"], name="slow", sleep_ms=5),
            type="prof_dag",
            external_input=["X"],
        )
    )
    net.run()
    assert all(s.runs == 0 for s in net.stats().per_op)  # first run excluded
    for _ in range(3):
        net.run()
    stats = net.stats()
    assert [s.runs for s in stats.per_op] == [3, 3, 3]
    by_name = {s.name: s for s in stats.per_op}
    assert by_name['#2 _TestRecord "slow"'].mean >= 4.5
    types = {s.name: s for s in stats.per_type}
    assert set(types) == {"Relu", "_TestRecord"} and types["Relu"].runs == 3
    assert types["_TestRecord"].stddev >= 0
    proto = stats.to_proto()
    assert len(proto.stats) == 3 and proto.stats[2].mean == pytest.approx(by_name['#2 _TestRecord "slow"'].mean)
    assert len(stats.to_proto(per_op=False).stats) == 2
    table = str(stats)
    assert "Relu" in table and "mean" in table and "stddev" in table


def test_fast_path_follows_feeds_and_bumps_versions():
    ws = Workspace()
    ws.feed_blob("X", np.array([-1.0, 2.0], np.float32))
    ops = [CreateOperator("Relu", [f"x{i}" if i else "X"], [f"x{i + 1}"]) for i in range(3)]
    net = ws.create_net(net_of(*ops, external_input=["X"]))
    net.run()
    assert net.program.compiled_count == 3 and net.program.fast is not None
    v = ws.get_blob("x3")._obj.version
    ws.feed_blob("X", np.array([3.0, -4.0], np.float32))  # same shape: same buffer
    net.run()
    np.testing.assert_array_equal(ws.fetch_blob("x3"), [3.0, 0.0])
    assert ws.get_blob("x3")._obj.version > v
    ws.feed_blob("X", np.array([5.0, -1.0, 7.0], np.float32))  # new shape: guard falls back
    net.run()
    np.testing.assert_array_equal(ws.fetch_blob("x3"), [5.0, 0.0, 7.0])
    net.run()
    np.testing.assert_array_equal(ws.fetch_blob("x3"), [5.0, 0.0, 7.0])


def test_fast_path_next_to_uncompiled_writers():
    # _TestRecord (no compile()) writes "a" into a stable buffer: the Relu reading "a" is compiled,
    # and _TestRecord's run is checked for replacing "a" (see tests/net/test_fast_paths.py).
    ws = Workspace()
    ws.feed_blob("X", np.ones(2))
    net = ws.create_net(
        net_of(
            CreateOperator("_TestRecord", ["X"], ["a"]),
            CreateOperator("Relu", ["a"], ["b"]),
            CreateOperator("Relu", ["X"], ["c"]),
            external_input=["X"],
        )
    )
    for _ in range(3):
        net.run()
        np.testing.assert_array_equal(ws.fetch_blob("b"), [2.0, 2.0])
    assert net.program.compiled_count == 2 and net.program.fast is not None


def test_benchmark_net():
    ws = Workspace()
    ws.feed_blob("X", np.ones(4, np.float32))
    ws.create_net(net_of(CreateOperator("Relu", "X", "Y"), CreateOperator("Relu", "Y", "Z"), name="b"))
    from framework.net.api import benchmark_net

    res = benchmark_net(ws, "b", 1, 3, True)
    assert len(res) == 3 and all(r >= 0 for r in res)
    assert len(benchmark_net(ws, "b", 0, 2, False)) == 1


def test_blas_threads_capped_while_dag_runs():
    from framework.net.executors.dag import blas_limit

    threadpoolctl = pytest.importorskip("threadpoolctl")
    with blas_limit(1):
        infos = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert all(i["num_threads"] == 1 for i in infos)
