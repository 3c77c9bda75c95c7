"""Python feeder threads for training nets (Caffe2's ``caffe2.python.data_workers``).

``init_data_input_workers(net, input_blob_names, fetch_fun, batch_size, ...)`` starts (on
``coordinator.start()``) ``num_worker_threads`` fetcher threads calling
``fetch_fun(worker_id, batch_size)`` -> a list of numpy arrays (one per input blob) and an enqueuer
thread that rebatches what they fetch to exactly ``batch_size`` rows (unless ``dont_rebatch``)
and puts each blob into its own BlobsQueue with SafeEnqueueBlobs. The net gets one
``DequeueBlobs`` per input blob (with ``timeout_secs``), so each run reads the next batch.
``stop()`` closes the queues and joins the threads.

>>> from framework import core, workspace
>>> import numpy as np
>>> net = core.Net("doc_dw")
>>> coord = init_data_input_workers(net, ["dw_x"], lambda wid, bs: [np.ones((bs, 2), np.float32)], 4)
>>> coord.start()
True
>>> workspace.RunNetOnce(net)
True
>>> workspace.FetchBlob("dw_x").shape
(4, 2)
>>> coord.stop()
True
"""

from __future__ import annotations

import logging
import queue as pyqueue
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from framework import core, workspace
from framework.caffe2.python import scope

log = logging.getLogger("framework.caffe2.python.data_workers")


class Metrics:
    """Counters and timings the workers report (``external_loggers`` get ``log(dict)``)."""

    def __init__(self, external_loggers: Sequence[Any] | None = None) -> None:
        self._metrics: dict[str, float] = {}
        self._loggers = list(external_loggers or [])

    def put_metric(self, key: str, value: float, count: bool = True) -> None:
        self._metrics[key] = self._metrics.get(key, 0.0) + value
        if count:
            self._metrics[key + "_count"] = self._metrics.get(key + "_count", 0.0) + 1

    def log_metrics(self) -> None:
        for logger in self._loggers:
            logger.log(dict(self._metrics))

    def reset_metrics(self) -> None:
        self._metrics = {}


class BatchFeeder:
    """Rebatches fetched chunks and enqueues them into one BlobsQueue per input blob."""

    def __init__(self, input_blob_names, batch_size, namescope, input_source_name, internal_queue, metrics,
                 dont_rebatch=False, batch_columns=None, timeout=600.0) -> None:  # fmt: skip
        self._input_blob_names = [str(b) for b in input_blob_names]
        self._batch_size = batch_size
        self._internal_queue = internal_queue
        self._namescope = namescope
        self._input_source_name = input_source_name
        self._metrics = metrics
        self._dont_rebatch = dont_rebatch
        self._batch_columns = list(batch_columns) if batch_columns is not None else [0] * len(self._input_blob_names)
        self._timeout = timeout
        self._c2_queue_capacity = 4
        self._queues: list[str] = []
        self._scratch = {b: f"{namescope}{b}_scratch_{input_source_name}" for b in self._input_blob_names}
        self._inputs = 0

    def create_queues_and_ops(self, net: Any) -> None:
        for b in self._input_blob_names:
            q = f"{self._namescope}{b}_c2queue_{self._input_source_name}"
            workspace.RunOperatorOnce(
                core.CreateOperator("CreateBlobsQueue", [], [q], num_blobs=1, capacity=self._c2_queue_capacity)
            )
            self._queues.append(q)
            net.DequeueBlobs([q], [b], timeout_secs=float(self._timeout))

    def start(self) -> None:
        self._inputs = 0

    def stop(self) -> None:
        for q in self._queues:
            if workspace.HasBlob(q):
                workspace.RunOperatorOnce(core.CreateOperator("CloseBlobsQueue", [q], []))

    def _validate(self, chunk: Any) -> bool:
        if chunk is None:
            log.warning("fetcher function returned None")
            return False
        if len(chunk) != len(self._input_blob_names):
            raise ValueError(f"expecting one array per input blob ({len(self._input_blob_names)}), got {len(chunk)}")
        for d in chunk:
            if not isinstance(d, np.ndarray):
                raise TypeError(f"fetcher function must return numpy arrays, got {type(d).__name__}")
        if not self._dont_rebatch:
            n0 = chunk[0].shape[self._batch_columns[0]]
            for j, d in enumerate(chunk[1:], 1):
                if d.shape[self._batch_columns[j]] != n0:
                    raise ValueError("each returned input must have the same number of samples")
        return True

    def put(self, chunk: Any, coordinator: WorkerCoordinator) -> None:
        if not self._validate(chunk):
            return
        while coordinator.is_active():
            try:
                self._internal_queue.put(chunk, block=True, timeout=0.5)
                self._inputs += chunk[0].shape[0]
                return
            except pyqueue.Full:
                continue

    def _get(self, coordinator: WorkerCoordinator) -> Any:
        while coordinator.is_active():
            try:
                return self._internal_queue.get(block=True, timeout=0.5)
            except pyqueue.Empty:
                continue
        return None

    def enqueue_batch(self, coordinator: WorkerCoordinator) -> None:
        if self._dont_rebatch:
            data = self._get(coordinator)
            if data is not None and coordinator.is_active():
                self._enqueue_all(data)
            return
        col0 = self._batch_columns[0]
        cur: list[np.ndarray] | None = None
        while (cur is None or cur[0].shape[col0] < self._batch_size) and coordinator.is_active():
            chunk = self._get(coordinator)
            if chunk is None:
                continue
            if cur is None:
                cur = [c.copy() for c in chunk]
            else:
                cur = [np.append(a, c, axis=self._batch_columns[j]) for j, (a, c) in enumerate(zip(cur, chunk))]
        if cur is None or not coordinator.is_active():
            return
        start = time.time()
        if cur[0].shape[col0] > self._batch_size:
            parts = [np.split(b, [self._batch_size], axis=self._batch_columns[j]) for j, b in enumerate(cur)]
            cur = [p[0] for p in parts]
            try:
                self._internal_queue.put([p[1] for p in parts], block=False)
            except pyqueue.Full:
                pass
        self._enqueue_all(cur)
        self._metrics.put_metric("enqueue_time", time.time() - start)

    def _enqueue_all(self, arrays: Sequence[np.ndarray]) -> None:
        for b, q, arr in zip(self._input_blob_names, self._queues, arrays):
            s = self._scratch[b]
            workspace.FeedBlob(s, arr)
            workspace.RunOperatorOnce(core.CreateOperator("SafeEnqueueBlobs", [q, s], [s, s + "_status"]))


class WorkerCoordinator:
    """The threads of one input source: started, stopped and joined together."""

    def __init__(self, worker_name: str, init_fun: Callable | None, state: BatchFeeder) -> None:
        self._worker_name, self._init_fun, self._state = worker_name, init_fun, state
        self._active = False
        self._started = False
        self._workers: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def is_active(self) -> bool:
        return self._active

    def put(self, chunk: Any) -> None:
        self._state.put(chunk, self)

    def init(self, global_coordinator: GlobalWorkerCoordinator) -> None:
        if self._init_fun is not None and not self._started:
            self._init_fun(self, global_coordinator)

    def _start(self) -> None:
        if self._started:
            return
        self._active = self._started = True
        self._state.start()
        for w in self._workers:
            w.daemon = True
            w.start()

    def _stop(self, reason: str | None = None) -> None:
        self._active = False
        if reason:
            log.error("data input failed: %s", reason)
        self._state.stop()
        self._started = False

    def _wait_finish(self) -> bool:
        for w in self._workers:
            if w is not threading.current_thread():
                w.join(5.0)
        return not any(w.is_alive() for w in self._workers)


class GlobalWorkerCoordinator:
    """All input sources of the process: ``start()``, ``stop()``, ``stop_coordinator(name)``."""

    def __init__(self) -> None:
        self._coordinators: list[WorkerCoordinator] = []
        self._queues: dict[str, pyqueue.Queue] = {}
        # Caffe2's names: the next fetcher id, and every id handed out
        self._fetcher_id_seq = 0
        self._worker_ids: list[int] = []

    def add(self, coordinator: WorkerCoordinator) -> None:
        self._coordinators.append(coordinator)

    def get_new_worker_id(self) -> int:
        worker_id = self._fetcher_id_seq
        self._worker_ids.append(worker_id)
        self._fetcher_id_seq += 1
        return worker_id

    def get_queue(self, name: str, max_buffered_batches: int) -> pyqueue.Queue:
        if name not in self._queues:
            self._queues[name] = pyqueue.Queue(maxsize=max_buffered_batches)
        return self._queues[name]

    def start(self) -> bool:
        for c in self._coordinators:
            c.init(self)
            c._start()
        return True

    def stop(self) -> bool:
        for c in self._coordinators:
            c._stop()
        ok = all(c._wait_finish() for c in self._coordinators)
        self._coordinators = []
        self._queues = {}
        return ok

    def stop_coordinator(self, worker_name: str) -> bool:
        ok = True
        for c in [c for c in self._coordinators if c._worker_name == worker_name]:
            c._stop()
            ok = c._wait_finish() and ok
            self._coordinators.remove(c)
        self._queues.pop(worker_name, None)
        return ok


global_coordinator = GlobalWorkerCoordinator()


def _fetcher(coordinator: WorkerCoordinator, worker_id: int, fetch_fun: Callable, batch_size: int) -> None:
    while coordinator.is_active():
        try:
            coordinator.put(fetch_fun(worker_id, batch_size))
        except Exception as e:
            log.exception("fetcher %d failed", worker_id)
            coordinator._errors.append(e)
            coordinator._stop(f"fetcher {worker_id}: {type(e).__name__}: {e}")
            return


def _enqueuer(coordinator: WorkerCoordinator) -> None:
    while coordinator.is_active():
        coordinator._state.enqueue_batch(coordinator)


def init_data_input_workers(
    net: Any,
    input_blob_names: Sequence[Any],
    fetch_fun: Callable[[int, int], Sequence[np.ndarray]],
    batch_size: int,
    num_worker_threads: int = 2,
    input_source_name: str = "train",
    max_buffered_batches: int = 800,
    init_fun: Callable | None = None,
    external_loggers: Sequence[Any] | None = None,
    dont_rebatch: bool = False,
    batch_columns: Sequence[int] | None = None,
    timeout: float = 600,
) -> GlobalWorkerCoordinator:
    """Set up feeder threads for ``net`` (see module doc); returns the global coordinator (call ``start()``)."""
    feeder = BatchFeeder(
        input_blob_names, batch_size, scope.CurrentNameScope(), input_source_name,
        global_coordinator.get_queue(input_source_name, max_buffered_batches), Metrics(external_loggers),
        dont_rebatch, batch_columns, timeout,
    )  # fmt: skip
    feeder.create_queues_and_ops(net)
    coordinator = WorkerCoordinator(input_source_name, init_fun, feeder)
    ids = [global_coordinator.get_new_worker_id() for _ in range(num_worker_threads)]
    coordinator._workers = [
        threading.Thread(
            target=_fetcher, name=f"data_workers fetcher id {i}", args=(coordinator, i, fetch_fun, batch_size)
        )
        for i in ids
    ] + [threading.Thread(target=_enqueuer, name=f"Enqueuer {input_source_name}", args=(coordinator,))]
    global_coordinator.add(coordinator)
    return global_coordinator
