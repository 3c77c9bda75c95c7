"""StatRegistry*, Timer*, Accumulate, APMeter, Perplexity: against Python/numpy references
(a dict of counters, a loop AP, a product of powers), state across runs, errors."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, SerializationError
from framework.memory.serialize import serialize_blob
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_inferred_shapes, assert_reference_checks


def _op(ws, *a, **k):
    return create_operator(CreateOperator(*a, **k), ws)


@settings(max_examples=20, deadline=None)
@given(updates=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-5, 5)), max_size=12))
def test_stat_registry_adds_exports_and_resets(updates):
    ws = Workspace()
    ws.run_operator_once(CreateOperator("StatRegistryCreate", [], ["reg"]))
    ref: dict[str, int] = {}
    for key, value in updates:
        ws.feed_blob("k", np.array([key.encode()], dtype=object))
        ws.feed_blob("v", np.array([value], np.int64))
        ws.run_operator_once(CreateOperator("StatRegistryUpdate", ["k", "v", "reg"], []))
        ref[key] = ref.get(key, 0) + value
    export = _op(ws, "StatRegistryExport", ["reg"], ["keys", "values", "ts"], reset=False)
    export.run()
    keys = [k.decode() for k in ws.fetch_blob("keys").tolist()]
    assert keys == sorted(ref) and ws.fetch_blob("values").tolist() == [ref[k] for k in sorted(ref)]
    assert ws.fetch_blob("ts").dtype == np.int64 and (ws.fetch_blob("ts") > 1.5e18).all()
    ws.run_operator_once(CreateOperator("StatRegistryExport", ["reg"], ["keys", "values", "ts"]))  # reset
    export.run()
    assert ws.fetch_blob("values").tolist() == [0] * len(ref)


def test_default_registry_timers_and_errors():
    ws = Workspace()
    begin = _op(ws, "TimerBegin", [], ["t"], counter_name="step")
    begin.run()
    time.sleep(0.01)
    ws.run_operator_once(CreateOperator("TimerGet", ["t"], ["ns"]))
    got = ws.fetch_blob("ns")
    assert got.shape == () and got.dtype == np.int64 and got >= 9_000_000
    ws.run_operator_once(CreateOperator("TimerGetAndEnd", ["t"], ["ns2"]))
    assert ws.fetch_blob("ns2").shape == (1,) and ws.fetch_blob("ns2")[0] >= got
    with pytest.raises(FrameworkError, match="stopped"):
        ws.run_operator_once(CreateOperator("TimerEnd", ["t"], []))
    begin.run()
    ws.run_operator_once(CreateOperator("TimerEnd", ["t"], []))
    ws.run_operator_once(CreateOperator("StatRegistryExport", [], ["keys", "values", "ts"]))
    stats = dict(zip([k.decode() for k in ws.fetch_blob("keys").tolist()], ws.fetch_blob("values").tolist()))
    assert stats["step/time_ns/count"] == 2 and stats["step/time_ns/sum"] >= ws.fetch_blob("ns2")[0]
    child = Workspace(parent=ws)
    child.feed_blob("k", np.array([b"x"], dtype=object))
    child.feed_blob("v", np.array([3], np.int64))
    child.run_operator_once(CreateOperator("StatRegistryUpdate", ["k", "v"], []))
    ws.run_operator_once(CreateOperator("StatRegistryExport", [], ["keys", "values", "ts"]))
    assert b"x" in ws.fetch_blob("keys").tolist()  # a child workspace shares its root's registry
    other = Workspace()
    other.run_operator_once(CreateOperator("StatRegistryExport", [], ["keys", "values", "ts"]))
    assert other.fetch_blob("keys").size == 0  # another workspace has its own registry
    ws.feed_blob("bad", np.array([1, 2], np.int64))
    with pytest.raises(FrameworkError, match="keys 'bad' must be a string tensor"):
        ws.run_operator_once(CreateOperator("StatRegistryUpdate", ["bad", "bad"], []))
    ws.run_operator_once(CreateOperator("StatRegistryCreate", [], ["reg"]))
    with pytest.raises(SerializationError, match="StatRegistry, which has no serializer"):
        list(serialize_blob("reg", ws.get_blob("reg")))
    with pytest.raises(FrameworkError, match="expected a Timer"):
        ws.run_operator_once(CreateOperator("TimerGet", ["reg"], ["ns"]))


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), gamma=st.floats(0.0, 2.0), runs=st.integers(1, 4))
def test_accumulate(shape, gamma, runs):
    xs = [np.random.default_rng(k).normal(size=shape).astype(np.float32) for k in range(runs)]
    ws = Workspace()
    op = _op(ws, "Accumulate", ["x"], ["y"], gamma=gamma)
    ref = np.zeros(shape, np.float64)
    for x in xs:
        ws.feed_blob("x", x)
        op.run()
        ref = x + gamma * ref
    np.testing.assert_allclose(ws.fetch_blob("y"), ref, rtol=1e-5, atol=1e-5)
    assert_reference_checks(CreateOperator("Accumulate", ["x"], ["y"]), [xs[0]], lambda x: x, check_no_realloc=False)


def _ap_ref(scores, labels):
    out = []
    for c in range(scores.shape[1]):
        order = sorted(range(len(scores)), key=lambda j: -scores[j, c])  # sorted() is stable
        tp, prec, nt = 0.0, 0.0, 0
        for rank, j in enumerate(order, 1):
            tp += labels[j, c]
            if labels[j, c] == 1:
                nt += 1
                prec += tp / rank
        out.append(prec / max(1, nt))
    return np.array(out)


@settings(max_examples=20, deadline=None)
@given(batches=st.lists(st.integers(1, 6), min_size=1, max_size=4), classes=st.integers(1, 3), buf=st.integers(1, 10))
def test_apmeter_over_a_buffer_of_recent_predictions(batches, classes, buf):
    ws = Workspace()
    op = _op(ws, "APMeter", ["x", "y"], ["ap"], buffer_size=buf)
    buffers = [[] for _ in range(classes)]  # per class: (score, label), sorted as Caffe2 leaves them
    for k, n in enumerate(batches):
        rng = np.random.default_rng(k)
        x = rng.integers(0, 5, (n, classes)).astype(np.float32)  # ties: the stable order matters
        y = rng.integers(0, 2, (n, classes)).astype(np.int32)
        ws.feed_blob("x", x)
        ws.feed_blob("y", y)
        op.run()
        rows = list(zip(x.tolist(), y.tolist()))[-buf:]
        want = []
        for c in range(classes):
            b = buffers[c]
            del b[: max(len(b) + len(rows) - buf, 0)]
            b += [(r[0][c], r[1][c]) for r in rows]
            b.sort(key=lambda t: -t[0])  # list.sort is stable
            want.append(_ap_ref(np.array([[s] for s, _ in b]), np.array([[lab] for _, lab in b]))[0])
        np.testing.assert_allclose(ws.fetch_blob("ap"), want, rtol=1e-5, atol=1e-6)
    assert_inferred_shapes(CreateOperator("APMeter", ["x", "y"], ["ap"]), [x, y], [ws.fetch_blob("ap")])
    ws.feed_blob("x", np.zeros((2, classes + 1), np.float32))
    ws.feed_blob("y", np.zeros((2, classes + 1), np.int32))
    with pytest.raises(FrameworkError, match="classes, earlier runs had"):
        op.run()


@given(p=st.lists(st.floats(0.01, 1.0), max_size=8))
def test_perplexity(p):
    x = np.array(p, np.float32)
    want = math.prod(v ** (-1.0 / len(p)) for v in x.astype(np.float64)) if p else 1.0
    assert_reference_checks(CreateOperator("Perplexity", ["p"], ["y"]), [x], lambda x: np.array(want), threshold=1e-4)
    with pytest.raises(FrameworkError, match="1-D float32"):
        ws = Workspace()
        ws.feed_blob("p", np.zeros((2, 2), np.float32))
        ws.run_operator_once(CreateOperator("Perplexity", ["p"], ["y"]))
