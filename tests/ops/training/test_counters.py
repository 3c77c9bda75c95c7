"""Counters, mutexes, atomics: sequences against a plain Python model, atomicity under the dag
executor and concurrent threads, Caffe2's serialization of counters and mutexes, errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, SerializationError, ShapeError, TypeMismatchError
from framework.memory.serialize import deserialize_blob, serialize_blob
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_inferred_shapes
from framework.proto.framework_pb2 import BlobProto, NetDef


def _op(ws, *a, **k):
    return create_operator(CreateOperator(*a, **k), ws)


@settings(max_examples=30, deadline=None)
@given(init=st.integers(0, 5), steps=st.lists(st.sampled_from(["up", "down", "check", "get", "reset"]), max_size=25))
def test_counter_ops_follow_a_python_model(init, steps):
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateCounter", [], ["c"], init_count=init))
    ops = {
        "up": _op(ws, "CountUp", ["c"], ["out"]),
        "down": _op(ws, "CountDown", ["c"], ["out"]),
        "check": _op(ws, "CheckCounterDone", ["c"], ["out"]),
        "get": _op(ws, "RetrieveCount", ["c"], ["out"]),
        "reset": _op(ws, "ResetCounter", ["c"], ["out"], init_count=2),
    }
    count = init
    for s in steps:
        ops[s].run()
        out = ws.fetch_blob("out")
        assert out.shape == ()
        if s == "up":
            want, count = count, count + 1
        elif s == "down":  # Caffe2: done = !(count-- > 0)
            want, count = not count > 0, count - 1
        elif s == "check":
            want = count <= 0
        elif s == "get":
            want = count
        else:
            want, count = count, 2
        assert out.item() == want
        assert out.dtype == (np.bool_ if s in ("down", "check") else np.int64)
    ws.run_operator_once(CreateOperator("ResetCounter", ["c"], [], init_count=0))
    ops["get"].run()
    assert ws.fetch_blob("out").item() == 0


def test_counter_inference_and_errors():
    assert_inferred_shapes(CreateOperator("CountUp", ["c"], ["y"]), [np.zeros(1)], [np.zeros((), np.int64)])
    assert_inferred_shapes(CreateOperator("CountDown", ["c"], ["y"]), [np.zeros(1)], [np.zeros((), bool)])
    ws = Workspace()
    with pytest.raises(ArgumentError, match="negative init_count"):
        _op(ws, "CreateCounter", [], ["c"], init_count=-1)
    with pytest.raises(ArgumentError, match="negative init_count"):
        _op(ws, "ResetCounter", ["c"], [], init_count=-2)
    ws.feed_blob("t", np.zeros(1))
    with pytest.raises(TypeMismatchError, match=r"CountUp.*'t'.*expected a Counter \(made by CreateCounter\)"):
        _op(ws, "CountUp", ["t"], ["y"]).run()


def test_counter_and_mutex_serialize_as_caffe2_atomic_bool_refuses():
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateCounter", [], ["c"], init_count=3))
    ws.run_operator_once(CreateOperator("CountUp", ["c"], ["prev"]))
    (key, value), *_ = list(serialize_blob("c", ws.get_blob("c")))
    proto = BlobProto.FromString(value)
    assert key == "c" and proto.type == "std::unique_ptr<Counter<int64_t>>"
    assert list(proto.tensor.dims) == [1] and list(proto.tensor.int64_data) == [4]
    ws2 = Workspace()
    deserialize_blob(value, ws2.create_blob("c"))
    ws2.run_operator_once(CreateOperator("RetrieveCount", ["c"], ["n"]))
    assert ws2.fetch_blob("n").item() == 4
    bad = BlobProto(name="c", type="std::unique_ptr<Counter<int64_t>>")
    bad.tensor.dims.extend([2])
    with pytest.raises(SerializationError, match="int64 tensor"):
        deserialize_blob(bad.SerializeToString(), ws2.create_blob("c2"))

    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    (_, value), *_ = list(serialize_blob("m", ws.get_blob("m")))
    proto = BlobProto.FromString(value)
    assert proto.type == "std::unique_ptr<std::mutex>" and proto.content == b""
    deserialize_blob(value, ws2.create_blob("m"))
    ws2.feed_blob("it", np.array([5], np.int64))
    ws2.run_operator_once(CreateOperator("AtomicIter", ["m", "it"], ["it"]))
    assert ws2.fetch_blob("it").tolist() == [6]

    ws.run_operator_once(CreateOperator("CreateAtomicBool", [], ["ab"]))
    with pytest.raises(SerializationError, match="AtomicBool, which has no serializer"):
        list(serialize_blob("ab", ws.get_blob("ab")))


def test_dag_net_of_parallel_count_ups_and_atomic_adds_is_exact():
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateCounter", [], ["c"]))
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.feed_blob("acc", np.array(0, np.int32))
    ws.feed_blob("acc64", np.array(0, np.int64))
    ws.feed_blob("it", np.array([0], np.int64))
    ws.feed_blob("one", np.array(1, np.int32))
    ws.feed_blob("one64", np.array(1, np.int64))
    n = 16
    ops = [CreateOperator("CountUp", ["c"], [f"prev{i}"]) for i in range(n)]
    net = NetDef(name="dagc", op=ops, type="dag", num_workers=8)
    ws.create_net(net)
    runs = 20
    threads = [threading.Thread(target=lambda: [ws.run_net("dagc") for _ in range(runs // 4)]) for _ in range(4)]
    # independent nets in parallel threads: fetch-adds and AtomicIter under one mutex
    adders = []
    for k in range(4):
        nd = NetDef(
            name=f"add{k}",
            op=[
                CreateOperator("AtomicFetchAdd", ["m", "acc", "one"], ["acc", f"f{k}"]),
                CreateOperator("AtomicFetchAdd64", ["m", "acc64", "one64"], ["acc64", f"g{k}"]),
                CreateOperator("AtomicIter", ["m", "it"], ["it"]),
            ],
        )
        ws.create_net(nd)
        adders.append(threading.Thread(target=lambda k=k: [ws.run_net(f"add{k}") for _ in range(200)]))
    for t in threads + adders:
        t.start()
    for t in threads + adders:
        t.join()
    ws.run_operator_once(CreateOperator("RetrieveCount", ["c"], ["total"]))
    assert ws.fetch_blob("total").item() == n * runs
    assert ws.fetch_blob("acc").item() == 800 and ws.fetch_blob("acc").dtype == np.int32
    assert ws.fetch_blob("acc64").item() == 800 and ws.fetch_blob("acc64").dtype == np.int64
    assert ws.fetch_blob("it").tolist() == [800]


@given(a=st.integers(-(2**31), 2**31 - 1), b=st.integers(-(2**31), 2**31 - 1))
def test_atomic_fetch_add_wraps_as_int32(a, b):
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.feed_blob("a", np.array(a, np.int32))
    ws.feed_blob("b", np.array(b, np.int32))
    ws.run_operator_once(CreateOperator("AtomicFetchAdd", ["m", "a", "b"], ["c", "d"]))
    want = (a + b + 2**31) % 2**32 - 2**31
    assert ws.fetch_blob("c").item() == want and ws.fetch_blob("d").item() == a
    assert ws.fetch_blob("c").shape == () and ws.fetch_blob("c").dtype == np.int32


def test_atomic_errors_and_atomic_bool():
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.feed_blob("a", np.array(1, np.int64))
    ws.feed_blob("b", np.array(1, np.int32))
    with pytest.raises(TypeMismatchError, match=r"AtomicFetchAdd.*input 1 \('a'\).*int32"):
        _op(ws, "AtomicFetchAdd", ["m", "a", "b"], ["a", "d"]).run()
    assert ws.fetch_blob("a").item() == 1
    with pytest.raises(TypeMismatchError, match=r"'b'.*expected a Mutex"):
        _op(ws, "AtomicFetchAdd", ["b", "b", "b"], ["c", "d"]).run()
    ws.feed_blob("it", np.array([-1], np.int64))
    with pytest.raises(ShapeError, match="negative"):
        _op(ws, "AtomicIter", ["m", "it"], ["it"]).run()
    ws.feed_blob("it", np.array([1.0]))
    with pytest.raises(TypeMismatchError, match="int64"):
        _op(ws, "AtomicIter", ["m", "it"], ["it"]).run()

    ws.run_operator_once(CreateOperator("CreateAtomicBool", [], ["ab"]))
    check = _op(ws, "CheckAtomicBool", ["ab"], ["v"])
    check.run()
    assert ws.fetch_blob("v").tolist() == [False] and ws.fetch_blob("v").dtype == np.bool_
    ws.feed_blob("cond", np.array([False]))
    setter = _op(ws, "ConditionalSetAtomicBool", ["ab", "cond"], [])
    setter.run()
    check.run()
    assert ws.fetch_blob("v").tolist() == [False]
    ws.feed_blob("cond", np.array([True]))
    setter.run()
    ws.feed_blob("cond", np.array([False]))
    setter.run()  # never resets
    check.run()
    assert ws.fetch_blob("v").tolist() == [True]
    ws.feed_blob("cond", np.array([1.0]))
    with pytest.raises(TypeMismatchError, match="'cond'.*bool"):
        setter.run()
    assert_inferred_shapes(CreateOperator("CheckAtomicBool", ["ab"], ["v"]), [np.zeros(1)], [np.zeros(1, bool)])


def test_atomic_iter_counts_its_steps_in_the_stat_registry():
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
    ws.feed_blob("it", np.array([3], np.int64))
    net = NetDef(name="iters", op=[CreateOperator("AtomicIter", ["m", "it"], ["it"])])
    ws.create_net(net)
    for _ in range(5):
        ws.run_net("iters")
    ws.run_operator_once(CreateOperator("StatRegistryExport", [], ["k", "v", "ts"]))
    keys, values = list(ws.fetch_blob("k")), ws.fetch_blob("v")
    assert values[keys.index(b"atomic_iter/stats/it/num_iter")] == 5
    assert ws.fetch_blob("it").tolist() == [8]
