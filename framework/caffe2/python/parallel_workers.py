"""``caffe2.python.parallel_workers``: Python threads that call a function in a loop until stopped.

``init_workers(worker_fun, num_worker_threads=2, worker_name="train", init_fun=None, external_loggers=None,
shutdown_fun=None)`` registers ``num_worker_threads`` threads (daemon threads, started by ``start()``) that each
call ``worker_fun(worker_id)`` again and again while their coordinator is active; worker ids are unique in the
process. It returns the process-wide ``global_coordinator``:

- ``start()`` calls each coordinator's ``init_fun(coordinator, global_coordinator)`` once (before its first
  start), then starts the threads;
- ``stop()`` deactivates every coordinator, calls each started one's ``shutdown_fun()``, joins the threads
  (5 s each: a thread blocked in I/O is reported, not waited for) and returns whether all ended; the
  coordinators are forgotten. ``stop_coordinator(worker_name)`` does the same for one name.

A worker function that raises stops its coordinator (logged with the worker id), as in Caffe2. Each call's
duration is added to the ``worker_time`` metric, handed to every external logger (``log(metrics)``) after each
call; a logger that raises is reported and skipped. ``global_coordinator.stop()`` also runs at exit.
"""

from __future__ import annotations

import abc
import atexit
import collections
import logging
import threading
import time
from typing import Any, Callable, Sequence

__all__ = ["GlobalWorkerCoordinator", "Metrics", "State", "Worker", "WorkerCoordinator", "init_workers"]

log = logging.getLogger("parallel_workers")
LOG_INT_SECS = 60


class Metrics:
    """Sums of named values (and, with ``count``, how many were added) for external loggers."""

    def __init__(self, external_loggers: Sequence[Any] | None) -> None:
        self._metrics: collections.defaultdict[str, float] = collections.defaultdict(float)
        self._external_loggers = list(external_loggers or [])
        self._lock = threading.Lock()

    def reset_metrics(self) -> None:
        with self._lock:
            self._metrics = collections.defaultdict(float)

    def put_metric(self, key: str, value: float, count: bool = True) -> None:
        with self._lock:
            self._metrics[key] += value
            if count:
                self._metrics[f"{key}_count"] += 1

    def log_metrics(self) -> None:
        for logger in self._external_loggers:
            try:
                logger.log(self._metrics)
            except Exception as e:
                log.warning("Failed to call ExternalLogger: %s", e)


class State(abc.ABC):
    """Optional per-coordinator state started, stopped and cleaned up with its threads."""

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @abc.abstractmethod
    def cleanup(self) -> None: ...


class WorkerCoordinator:
    """The threads of one ``worker_name``: started, stopped and joined together."""

    def __init__(
        self,
        worker_name: str,
        worker_ids: Sequence[int],
        init_fun: Callable[..., Any] | None,
        state: State | None = None,
        shutdown_fun: Callable[[], Any] | None = None,
    ) -> None:
        self._active = True
        self._started = False
        self._workers: list[threading.Thread] = []
        self._worker_name = worker_name
        self._worker_ids = list(worker_ids)
        self._init_fun = init_fun
        self._state = state
        self._shutdown_fun = shutdown_fun

    def is_active(self) -> bool:
        return self._active

    def get_worker_ids(self) -> list[int]:
        return list(self._worker_ids)

    def init(self, global_coordinator: GlobalWorkerCoordinator) -> None:
        if self._init_fun is not None and not self._started:
            self._init_fun(self, global_coordinator)

    def _start(self) -> None:
        if self._started:
            return
        self._active = self._started = True
        if self._state is not None:
            self._state.start()
        for w in self._workers:
            w.daemon = True
            w.start()

    def _stop(self, reason: str | None = None) -> None:
        self._active = False
        if reason is not None:
            log.error("Data input failed due to an error: %s", reason)
        if self._shutdown_fun is not None and self._started:
            self._shutdown_fun()
        if self._state is not None:
            self._state.stop()
        self._started = False

    def _wait_finish(self) -> bool:
        for w in self._workers:
            if w is not threading.current_thread() and w.ident is not None:
                w.join(5.0)  # a thread blocked in I/O is not waited for forever
        alive = [w.name for w in self._workers if w.is_alive()]
        for name in alive:
            log.warning("worker %s failed to close while waiting", name)
        if not alive and self._state is not None:
            self._state.cleanup()
        return not alive


class GlobalWorkerCoordinator:
    """Every coordinator of the process (see module doc)."""

    def __init__(self) -> None:
        self._coordinators: list[WorkerCoordinator] = []
        self._worker_ids: list[int] = []
        self._lock = threading.Lock()
        atexit.register(self.stop)

    def add(self, coordinator: WorkerCoordinator) -> None:
        self._coordinators.append(coordinator)

    def get_new_worker_id(self) -> int:
        with self._lock:
            worker_id = len(self._worker_ids)
            self._worker_ids.append(worker_id)
            return worker_id

    def get_worker_ids(self) -> list[int]:
        return list(self._worker_ids)

    def start(self) -> bool:
        for c in self._coordinators:
            c.init(self)
        for c in self._coordinators:
            c._start()
        return True

    def stop(self) -> bool:
        for c in self._coordinators:
            c._stop()
        ok = all([c._wait_finish() for c in self._coordinators])
        self._coordinators = []
        return ok

    def stop_coordinator(self, worker_name: str) -> None:
        for c in [c for c in self._coordinators if c._worker_name == worker_name]:
            c._stop()
            c._wait_finish()
        self._coordinators = [c for c in self._coordinators if c._worker_name != worker_name]


class Worker:
    """One thread's loop body: ``run()`` calls the worker function; failures stop the coordinator."""

    def __init__(
        self,
        coordinator: WorkerCoordinator,
        worker_id: int,
        worker_fun: Callable[[int], Any] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._worker_id = worker_id
        self._worker_fun = worker_fun
        self._metrics = metrics or Metrics(None)
        self._start_time = time.time()

    def start(self) -> None:
        self._start_time = time.time()

    def run(self) -> None:
        self._worker_fun(self._worker_id)

    def handle_exception(self, e: BaseException) -> None:
        log.exception("Exception in worker %d", self._worker_id)
        self._coordinator._stop(f"Exception in worker {self._worker_id}: {e}")

    def finish(self) -> None:
        self._metrics.put_metric("worker_time", time.time() - self._start_time)
        self._metrics.log_metrics()


def run_worker(coordinator: WorkerCoordinator, worker: Worker) -> None:
    while coordinator.is_active():
        worker.start()
        try:
            worker.run()
        except Exception as e:
            worker.handle_exception(e)
        finally:
            worker.finish()


global_coordinator = GlobalWorkerCoordinator()


def init_workers(
    worker_fun: Callable[[int], Any],
    num_worker_threads: int = 2,
    worker_name: str = "train",
    init_fun: Callable[..., Any] | None = None,
    external_loggers: Sequence[Any] | None = None,
    shutdown_fun: Callable[[], Any] | None = None,
) -> GlobalWorkerCoordinator:
    """Register ``num_worker_threads`` threads looping on ``worker_fun(worker_id)``; see module doc."""
    metrics = Metrics(external_loggers)
    ids = [global_coordinator.get_new_worker_id() for _ in range(num_worker_threads)]
    coordinator = WorkerCoordinator(worker_name, ids, init_fun, shutdown_fun=shutdown_fun)
    coordinator._workers = [
        threading.Thread(
            target=run_worker,
            name=f"parallel_workers worker id {i}",
            args=(coordinator, Worker(coordinator, i, worker_fun, metrics)),
        )
        for i in ids
    ]
    global_coordinator.add(coordinator)
    return global_coordinator
