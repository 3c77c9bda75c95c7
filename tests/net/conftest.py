"""Test-only ops for the net tests (names start with ``_Test``), registered once here."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from framework import workspace
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import has_op, register_op
from framework.ops.schema import FLOAT, INT, UNKNOWN, Arg, TensorSpec

LOG: list[str] = []
EVENTS: list[tuple[str, str, float]] = []
_BARRIERS: dict[int, threading.Barrier] = {}
_lock = threading.Lock()


def _first_or_scalar(args, ins):
    spec = ins[0] if ins else TensorSpec((1,), np.dtype(np.float64))
    return [spec if spec.shape is not None else UNKNOWN] * args.num_outputs


if not has_op("_TestRecord"):

    @register_op(
        "_TestRecord",
        inputs=(0, float("inf")),
        outputs=(0, float("inf")),
        allow_inplace=lambda i, o: True,
        args=[Arg("add", FLOAT, 1.0, "added to the sum"), Arg("sleep_ms", FLOAT, 0.0, "sleep first")],
        infer=_first_or_scalar,
        private=True,
    )
    class _TestRecord(Operator):
        """Logs its name; every output = sum of inputs (float64) + add."""

        def run(self) -> None:
            start = time.perf_counter()
            if self.args.sleep_ms:
                time.sleep(self.args.sleep_ms / 1e3)
            total = (
                np.zeros((1,))
                if not self.inputs
                else sum(np.asarray(self.input(i), np.float64) for i in range(len(self.inputs)))
            )
            total = total + self.args.add
            with _lock:
                LOG.append(self.name)
                EVENTS.append((self.name, threading.current_thread().name, start))
            for o in range(len(self.outputs)):
                self.output(o, total.shape, np.float64)[...] = total

    @register_op(
        "_TestFail",
        inputs=(0, float("inf")),
        outputs=(0, float("inf")),
        args=[Arg("sleep_ms", FLOAT, 0.0, "sleep first")],
        infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
        private=True,
    )
    class _TestFail(Operator):
        """Raises ValueError('boom <name>')."""

        def run(self) -> None:
            if self.args.sleep_ms:
                time.sleep(self.args.sleep_ms / 1e3)
            raise ValueError(f"boom {self.name}")

    @register_op(
        "_TestStopAfter",
        inputs=1,
        outputs=2,
        allow_inplace={(0, 0)},
        args=[Arg("n", INT, 3, "stop when the counter reaches n")],
        infer=lambda args, ins: [TensorSpec((), np.dtype(np.int64)), TensorSpec((), np.dtype(np.bool_))],
        private=True,
    )
    class _TestStopAfter(Operator):
        """counter += 1; stop = counter >= n."""

        def run(self) -> None:
            c = self.input(0)
            new = int(c.reshape(-1)[0]) + 1
            self.output(0, (), np.int64)[...] = new
            self.output(1, (), np.bool_)[...] = new >= self.args.n

    @register_op(
        "_TestRendezvous",
        inputs=(0, 1),
        outputs=(0, 1),
        args=[Arg("parties", INT, 2, "ops that must meet"), Arg("timeout_s", FLOAT, 5.0, "give up after")],
        infer=lambda args, ins: [TensorSpec((1,), np.dtype(np.float64))] * args.num_outputs,
        private=True,
    )
    class _TestRendezvous(Operator):
        """Waits until ``parties`` such ops (of any net) are running at once; fails after ``timeout_s``:
        a deterministic check that ops run concurrently (no timing threshold). Its optional output
        (1.0) lets a following op depend on it."""

        def run(self) -> None:
            with _lock:
                barrier = _BARRIERS.setdefault(self.args.parties, threading.Barrier(self.args.parties))
            try:
                barrier.wait(timeout=self.args.timeout_s)
            except threading.BrokenBarrierError:
                with _lock:
                    _BARRIERS.pop(self.args.parties, None)
                raise RuntimeError(f"{self.name}: the other ops never ran at the same time") from None
            if self.outputs:
                self.output(0, (1,), np.float64)[...] = 1.0

    no_gradient("_TestRecord", "_TestFail", "_TestStopAfter", "_TestRendezvous")


@pytest.fixture(autouse=True)
def _clear_log():
    LOG.clear()
    EVENTS.clear()
    yield


@pytest.fixture
def op_log() -> list[str]:
    """Names of the _TestRecord ops run in this test, in order."""
    return LOG


@pytest.fixture
def op_events() -> list[tuple[str, str, float]]:
    """(op name, thread name, start time) of the _TestRecord ops run in this test."""
    return EVENTS


@pytest.fixture
def fresh_ws():
    """The ``framework.workspace`` module over an empty default workspace, emptied again after the test."""
    workspace.ResetWorkspace()
    yield workspace
    workspace.ResetWorkspace()


@pytest.fixture
def run_in_two_threads(op_events):
    """``run(net)``: runs the created ``net`` from two threads at once; returns the names of
    the _TestRecord ops in the order they started."""

    def run(net) -> list[str]:
        threads = [threading.Thread(target=net.run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [n for n, _, _ in sorted(op_events, key=lambda e: e[2])]

    return run
