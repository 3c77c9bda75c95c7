"""Blob queues and rebatching queues: FIFO order against a Python deque, blocking and closing
semantics (Caffe2's BlobsQueue), Safe status outputs, num_records concatenation, weighted sampling,
the queue-backed DB reader, thread safety under the dag executor and in concurrent plan steps,
and errors naming op and blob."""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, SchemaError, SerializationError, ShapeError, TypeMismatchError
from framework.memory.serialize import serialize_blob
from framework.memory.workspace import Workspace
from framework.net.plan import run_plan
from framework.ops import create_operator
from framework.ops.io.blobs_queue import QueueClosedError
from framework.proto.framework_pb2 import ExecutionStep, NetDef, PlanDef


def _op(ws, *a, **k):
    return create_operator(CreateOperator(*a, **k), ws)


def _queue(ws, name="q", capacity=4, num_blobs=1):
    ws.run_operator_once(CreateOperator("CreateBlobsQueue", [], [name], capacity=capacity, num_blobs=num_blobs))


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.booleans(), min_size=1, max_size=30), capacity=st.integers(1, 5))
def test_fifo_order_matches_a_deque(ops, capacity):
    """Enqueue (True) / SafeDequeue (False) sequences that never block, against collections.deque."""
    ws = Workspace()
    _queue(ws, capacity=capacity, num_blobs=2)
    enq = _op(ws, "EnqueueBlobs", ["q", "a", "b"], ["a", "b"])
    deq = _op(ws, "SafeDequeueBlobs", ["q"], ["x", "y", "status"])
    ref: deque = deque()
    k = 0
    for put in ops:
        if put and len(ref) < capacity:
            ws.feed_blob("a", np.full((2,), k, np.float32))
            ws.feed_blob("b", np.array([k, -k], np.int64))
            enq.run()
            ref.append(k)
            k += 1
            assert ws.get_blob("a").is_empty  # swapped with the (empty) slot, as Caffe2
        elif not put and ref:
            deq.run()
            want = ref.popleft()
            np.testing.assert_array_equal(ws.fetch_blob("x"), np.full((2,), want, np.float32))
            np.testing.assert_array_equal(ws.fetch_blob("y"), [want, -want])
            assert ws.fetch_blob("status").shape == () and not ws.fetch_blob("status")
    assert ws.get_blob("q")._obj.size() == len(ref)


def test_writer_blocks_on_full_queue_until_a_read():
    ws = Workspace()
    _queue(ws, capacity=1)
    ws.feed_blob("a", np.ones(1))
    enq = _op(ws, "EnqueueBlobs", ["q", "a"], ["a"])
    enq.run()
    ws.feed_blob("a", np.full(1, 2.0))
    done = threading.Event()
    t = threading.Thread(target=lambda: (enq.run(), done.set()), daemon=True)
    t.start()
    assert not done.wait(0.15)  # blocked: the queue is full
    _op(ws, "DequeueBlobs", ["q"], ["x"]).run()
    assert done.wait(5)
    assert ws.fetch_blob("x").tolist() == [1.0]
    _op(ws, "DequeueBlobs", ["q"], ["x"]).run()
    assert ws.fetch_blob("x").tolist() == [2.0]


def test_close_semantics_drain_then_status_true_and_plain_ops_fail():
    ws = Workspace()
    _queue(ws, capacity=2)
    ws.feed_blob("a", np.arange(3))
    _op(ws, "EnqueueBlobs", ["q", "a"], ["a"]).run()
    # a blocked reader wakes up on close
    reader_done = threading.Event()
    ws.run_operator_once(CreateOperator("CloseBlobsQueue", ["q"], []))
    safe = _op(ws, "SafeDequeueBlobs", ["q"], ["x", "s"])
    safe.run()  # closed but not empty: still reads
    assert ws.fetch_blob("x").tolist() == [0, 1, 2] and not ws.fetch_blob("s")
    safe.run()
    assert bool(ws.fetch_blob("s")) and ws.fetch_blob("x").tolist() == [0, 1, 2]  # outputs untouched
    with pytest.raises(QueueClosedError, match="DequeueBlobs.*'q'.*closed and empty"):
        _op(ws, "DequeueBlobs", ["q"], ["x"]).run()
    # Caffe2 writes to a closed queue while there is room; closed and full fails / status true
    ws.feed_blob("a", np.arange(2))
    senq = _op(ws, "SafeEnqueueBlobs", ["q", "a"], ["a", "s"])
    senq.run()
    assert not ws.fetch_blob("s")
    ws.feed_blob("a", np.arange(2))
    senq.run()
    assert not ws.fetch_blob("s")
    ws.feed_blob("a", np.arange(2))
    senq.run()
    assert bool(ws.fetch_blob("s"))
    with pytest.raises(QueueClosedError, match="closed and full"):
        _op(ws, "EnqueueBlobs", ["q", "a"], ["a"]).run()
    ws2 = Workspace()
    _queue(ws2)
    deq = _op(ws2, "SafeDequeueBlobs", ["q"], ["x", "s"])
    t = threading.Thread(target=lambda: (deq.run(), reader_done.set()), daemon=True)
    t.start()
    assert not reader_done.wait(0.1)
    ws2.run_operator_once(CreateOperator("CloseBlobsQueue", ["q"], []))
    assert reader_done.wait(5) and bool(ws2.fetch_blob("s"))


def test_dequeue_timeout():
    ws = Workspace()
    _queue(ws)
    t0 = time.monotonic()
    with pytest.raises(QueueClosedError, match="empty after 0.1"):
        _op(ws, "DequeueBlobs", ["q"], ["x"], timeout_secs=0.1).run()
    assert time.monotonic() - t0 >= 0.09


@settings(max_examples=20, deadline=None)
@given(rows=st.lists(st.integers(1, 4), min_size=1, max_size=6), num_records=st.integers(2, 5))
def test_safe_dequeue_num_records_concatenates_columns(rows, num_records):
    ws = Workspace()
    _queue(ws, capacity=len(rows), num_blobs=2)
    enq = _op(ws, "EnqueueBlobs", ["q", "a", "b"], ["a", "b"])
    arrays = []
    for i, n in enumerate(rows):
        a = np.random.default_rng(i).normal(size=(n, 3)).astype(np.float32)
        b = np.arange(n, dtype=np.int32) + 10 * i
        arrays.append((a, b))
        ws.feed_blob("a", a)
        ws.feed_blob("b", b)
        enq.run()
    ws.run_operator_once(CreateOperator("CloseBlobsQueue", ["q"], []))
    deq = _op(ws, "SafeDequeueBlobs", ["q"], ["x", "y", "s"], num_records=num_records)
    for start in range(0, len(rows), num_records):
        deq.run()
        part = arrays[start : start + num_records]
        np.testing.assert_array_equal(ws.fetch_blob("x"), np.concatenate([a for a, _ in part]))
        np.testing.assert_array_equal(ws.fetch_blob("y"), np.concatenate([b for _, b in part]))
        assert not ws.fetch_blob("s")
    deq.run()
    assert bool(ws.fetch_blob("s"))


def test_weighted_sample_dequeue_picks_by_weight_and_reports_table():
    ws = Workspace()
    for name in ("q0", "q1"):
        _queue(ws, name, capacity=400, num_blobs=2)
        enq = _op(ws, "EnqueueBlobs", [name, "v", "t"], ["v", "t"])
        for _ in range(400):
            ws.feed_blob("v", np.array([int(name[1])], np.int64))
            ws.feed_blob("t", np.zeros(1, np.int32))
            enq.run()
    op = CreateOperator(
        "WeightedSampleDequeueBlobs", ["q0", "q1"], ["v", "t", "s"], weights=[1.0, 3.0], table_idx_blob=1
    )
    op.device_option.random_seed = 7
    deq = create_operator(op, ws)
    picks = []
    for _ in range(300):
        deq.run()
        assert ws.fetch_blob("t").tolist() == ws.fetch_blob("v").tolist()  # table index = the queue read
        assert ws.fetch_blob("t").dtype == np.int32 and not ws.fetch_blob("s")
        picks.append(int(ws.fetch_blob("v")[0]))
    share = np.mean(picks)
    assert 0.65 < share < 0.85  # 3/4 expected
    with pytest.raises(FrameworkError, match="sum of weights must be positive"):
        _op(ws, "WeightedSampleDequeueBlobs", ["q0", "q1"], ["v", "t", "s"], weights=[0.0, 0.0])
    with pytest.raises(FrameworkError, match="2 input queues"):
        _op(ws, "WeightedSampleDequeueBlobs", ["q0", "q1"], ["v", "t", "s"], weights=[1.0])
    with pytest.raises(FrameworkError, match="table_idx_blob 2 must be < 2"):
        _op(ws, "WeightedSampleDequeueBlobs", ["q0", "q1"], ["v", "t", "s"], table_idx_blob=2)


def test_errors_name_op_and_blob_and_leave_blobs_unchanged():
    ws = Workspace()
    ws.feed_blob("notq", np.zeros(2))
    ws.feed_blob("a", np.ones(2))
    with pytest.raises(TypeMismatchError, match=r"EnqueueBlobs.*'notq'.*expected a BlobsQueue"):
        _op(ws, "EnqueueBlobs", ["notq", "a"], ["a"]).run()
    np.testing.assert_array_equal(ws.fetch_blob("a"), np.ones(2))
    _queue(ws, num_blobs=2)
    with pytest.raises(ShapeError, match=r"'q' holds records of 2 blobs, the op has 1"):
        _op(ws, "EnqueueBlobs", ["q", "a"], ["a"]).run()
    np.testing.assert_array_equal(ws.fetch_blob("a"), np.ones(2))
    with pytest.raises(SchemaError):
        _op(ws, "EnqueueBlobs", ["q", "a"], ["b"])  # must be in place
    with pytest.raises(FrameworkError, match="capacity"):
        _op(ws, "CreateBlobsQueue", [], ["q2"], capacity=0)
    with pytest.raises(FrameworkError, match="field_names"):
        _op(ws, "CreateBlobsQueue", [], ["q2"], num_blobs=2, field_names=["x"])
    with pytest.raises(FrameworkError, match="num_records"):
        _op(ws, "SafeDequeueBlobs", ["q"], ["x", "y", "s"], num_records=0)
    with pytest.raises(TypeMismatchError, match="CloseBlobsQueue.*'a'"):
        _op(ws, "CloseBlobsQueue", ["a"], []).run()
    # a queue blob has no serializer: a clear error, never pickled
    with pytest.raises(SerializationError, match="'q' holds a BlobsQueue, which has no serializer"):
        list(serialize_blob("q", ws.get_blob("q")))


def test_blobs_queue_db_feeds_tensor_protos_db_input():
    from framework.memory.tensor_proto import tensor_to_proto
    from framework.proto.framework_pb2 import TensorProtos

    ws = Workspace()
    _queue(ws, capacity=8, num_blobs=2)
    enq = _op(ws, "EnqueueBlobs", ["q", "k", "v"], ["k", "v"])
    for i in range(6):
        rec = TensorProtos()
        rec.protos.append(tensor_to_proto(np.full((2,), i, np.float32)))
        rec.protos.append(tensor_to_proto(np.array(i, np.int32)))
        ws.feed_blob("k", f"key{i}".encode())
        ws.feed_blob("v", rec.SerializeToString())
        enq.run()
    ws.run_operator_once(CreateOperator("CreateBlobsQueueDB", ["q"], ["reader"], key_blob_index=0, value_blob_index=1))
    read = _op(ws, "TensorProtosDBInput", ["reader"], ["x", "y"], batch_size=3)
    read.run()
    np.testing.assert_array_equal(ws.fetch_blob("x"), np.repeat(np.arange(3, dtype=np.float32)[:, None], 2, 1))
    np.testing.assert_array_equal(ws.fetch_blob("y"), [0, 1, 2])
    read.run()
    np.testing.assert_array_equal(ws.fetch_blob("y"), [3, 4, 5])
    ws.run_operator_once(CreateOperator("CloseBlobsQueue", ["q"], []))
    with pytest.raises(FrameworkError, match="closed"):
        read.run()
    with pytest.raises(FrameworkError, match="value_blob_index"):
        _op(ws, "CreateBlobsQueueDB", ["q"], ["r2"], value_blob_index=-1)


def test_dag_net_with_parallel_writers_and_readers_loses_nothing():
    """Eight writer ops and eight reader ops in one dag net, the queue shared by all."""
    ws = Workspace()
    _queue(ws, capacity=3)
    ops = []
    for i in range(8):
        ops.append(CreateOperator("ConstantFill", [], [f"v{i}"], shape=[1], value=float(i)))
        ops.append(CreateOperator("EnqueueBlobs", ["q", f"v{i}"], [f"v{i}"]))
        ops.append(CreateOperator("DequeueBlobs", ["q"], [f"out{i}"]))
    net = NetDef(name="dagq", op=ops, type="dag", num_workers=8)
    ws.create_net(net)
    for _ in range(5):
        ws.run_net("dagq")
        got = sorted(float(ws.fetch_blob(f"out{i}")[0]) for i in range(8))
        assert got == [float(i) for i in range(8)]
        assert ws.get_blob("q")._obj.size() == 0


def test_prefetch_plan_reader_step_ends_cleanly_on_close():
    """A producer step fills the queue then closes it; the consumer step stops via should_stop_blob."""
    ws = Workspace()
    _queue(ws, capacity=2)
    ws.feed_blob("x", np.zeros(1, np.int64))
    ws.feed_blob("total", np.zeros(1, np.int64))
    ws.feed_blob("one", np.ones(1, np.int64))
    produce = NetDef(
        name="produce",
        op=[
            CreateOperator("Add", ["x", "one"], ["x"]),
            CreateOperator("Copy", ["x"], ["item"]),
            CreateOperator("EnqueueBlobs", ["q", "item"], ["item"]),
        ],
    )
    close = NetDef(name="close", op=[CreateOperator("CloseBlobsQueue", ["q"], [])])
    deq = NetDef(name="deq", op=[CreateOperator("SafeDequeueBlobs", ["q"], ["got", "stop"])])
    add = NetDef(name="add", op=[CreateOperator("Add", ["total", "got"], ["total"])])
    plan = PlanDef(name="prefetch", network=[produce, close, deq, add])
    producer = ExecutionStep(
        name="producer",
        substep=[
            ExecutionStep(name="fill", network=["produce"], num_iter=20),
            ExecutionStep(name="c", network=["close"]),
        ],
    )
    consumer = ExecutionStep(name="consumer", network=["deq", "add"], should_stop_blob="stop")
    plan.execution_step.add(name="top", concurrent_substeps=True, substep=[producer, consumer])
    run_plan(ws, plan)
    # should_stop_blob is checked after each net: the read that found the queue closed stops the step
    assert int(ws.fetch_blob("total")[0]) == sum(range(1, 21))
    assert bool(ws.fetch_blob("stop"))


def test_failing_substep_closes_queues_so_blocked_siblings_end():
    ws = Workspace()
    _queue(ws, capacity=1)
    wait = NetDef(name="wait", op=[CreateOperator("DequeueBlobs", ["q"], ["got"])])
    bad = NetDef(name="bad", op=[CreateOperator("DequeueBlobs", ["not_a_queue"], ["r"], name="kaput")])
    plan = PlanDef(name="p", network=[wait, bad])
    plan.execution_step.add(
        name="top",
        concurrent_substeps=True,
        substep=[ExecutionStep(name="w", network=["wait"]), ExecutionStep(name="b", network=["bad"])],
    )
    ws.feed_blob("not_a_queue", np.zeros((2, 3)))
    done = threading.Event()
    errors = []

    def go():
        try:
            run_plan(ws, plan)
        except FrameworkError as e:
            errors.append(e)
        done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(10), "the plan hung on a blocked DequeueBlobs"
    assert errors and "kaput" in str(errors[0])


# -- rebatching queues ------------------------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(batches=st.lists(st.integers(1, 4), min_size=1, max_size=5), num_elements=st.integers(1, 4))
def test_rebatching_queue_rebatches_rows(batches, num_elements):
    ws = Workspace()
    total = sum(batches)
    ws.run_operator_once(CreateOperator("CreateRebatchingQueue", [], ["rq"], capacity=total, num_blobs=2))
    enq = _op(ws, "EnqueueRebatchingQueue", ["rq", "a", "b"], [], enqueue_batch=True)
    rows_a, rows_b = [], []
    for i, n in enumerate(batches):
        a = np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 100 * i
        b = (np.arange(n) + 10 * i).astype(np.int64)
        ws.feed_blob("a", a)
        ws.feed_blob("b", b)
        enq.run()
        rows_a += list(a)
        rows_b += list(b)
    ws.run_operator_once(CreateOperator("CloseRebatchingQueue", ["rq"], []))
    deq = _op(ws, "DequeueRebatchingQueue", ["rq"], ["x", "y"], num_elements=num_elements)
    for start in range(0, total, num_elements):
        deq.run()
        np.testing.assert_array_equal(ws.fetch_blob("x"), np.stack(rows_a[start : start + num_elements]))
        np.testing.assert_array_equal(ws.fetch_blob("y"), np.stack(rows_b[start : start + num_elements]))
    with pytest.raises(QueueClosedError, match="closed and empty"):
        deq.run()


def test_rebatching_single_row_enqueue_and_errors():
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateRebatchingQueue", [], ["rq"], capacity=2, num_blobs=1))
    ws.feed_blob("a", np.array([1.0, 2.0]))
    enq = _op(ws, "EnqueueRebatchingQueue", ["rq", "a"], [])
    enq.run()
    ws.feed_blob("a", np.array([3.0, 4.0]))
    enq.run()
    deq = _op(ws, "DequeueRebatchingQueue", ["rq"], ["x"], num_elements=2)
    deq.run()
    np.testing.assert_array_equal(ws.fetch_blob("x"), [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ShapeError, match="rows of 1 tensors, got 2"):
        _op(ws, "EnqueueRebatchingQueue", ["rq", "a", "a"], []).run()
    ws.feed_blob("s", np.float32(1))
    with pytest.raises(ShapeError, match="first dimension"):
        _op(ws, "EnqueueRebatchingQueue", ["rq", "s"], [], enqueue_batch=True).run()
    with pytest.raises(TypeMismatchError, match="expected a RebatchingQueue"):
        _op(ws, "DequeueRebatchingQueue", ["a"], ["x"]).run()
    ws.run_operator_once(CreateOperator("CloseRebatchingQueue", ["rq"], []))
    with pytest.raises(QueueClosedError, match="was closed"):
        enq.run()
