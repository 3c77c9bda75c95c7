"""caffe2.python.parallel_workers: looping worker threads, init/shutdown functions, failures, metrics."""

import threading
import time

from framework.caffe2.python import parallel_workers as pw


def _wait(cond, secs=10.0):
    end = time.time() + secs
    while not cond() and time.time() < end:
        time.sleep(0.01)
    return cond()


def test_workers_loop_until_stopped_and_hooks_run_once():
    seen, order, lock = [], [], threading.Lock()

    def work(worker_id):
        with lock:
            seen.append(worker_id)
        time.sleep(0.001)

    class Log:
        def __init__(self):
            self.last = None

        def log(self, metrics):
            self.last = dict(metrics)

    logger = Log()
    coord = pw.init_workers(
        work,
        num_worker_threads=3,
        worker_name="h36c_loop",
        init_fun=lambda c, g: order.append(("init", tuple(c.get_worker_ids()), g is pw.global_coordinator)),
        external_loggers=[logger],
        shutdown_fun=lambda: order.append("shutdown"),
    )
    assert coord is pw.global_coordinator
    ids = pw.global_coordinator._coordinators[-1].get_worker_ids()
    assert len(ids) == 3 and len(set(ids)) == 3
    coord.start()
    assert _wait(lambda: set(ids) <= set(seen) and len(seen) > 10)
    assert coord.stop()
    n = len(seen)
    time.sleep(0.05)
    assert len(seen) == n  # nothing runs after stop
    assert order == [("init", tuple(ids), True), "shutdown"]
    assert logger.last["worker_time_count"] >= 1 and logger.last["worker_time"] >= 0


def test_a_failing_worker_stops_its_coordinator():
    calls = []

    def work(worker_id):
        calls.append(worker_id)
        raise ValueError("boom")

    coord = pw.init_workers(
        work, num_worker_threads=1, worker_name="h36c_fail", shutdown_fun=lambda: calls.append("down")
    )
    c = pw.global_coordinator._coordinators[-1]
    coord.start()
    assert _wait(lambda: not c.is_active())
    assert coord.stop()
    assert calls[0] != "down" and calls.count("down") == 1 and len(calls) == 2


def test_stop_coordinator_by_name():
    a_runs, b_runs = [], []
    pw.init_workers(lambda i: (a_runs.append(i), time.sleep(0.001)), num_worker_threads=1, worker_name="h36c_a")
    pw.init_workers(lambda i: (b_runs.append(i), time.sleep(0.001)), num_worker_threads=1, worker_name="h36c_b")
    pw.global_coordinator.start()
    assert _wait(lambda: a_runs and b_runs)
    pw.global_coordinator.stop_coordinator("h36c_a")
    assert [c._worker_name for c in pw.global_coordinator._coordinators] == ["h36c_b"]
    n = len(a_runs)
    assert _wait(lambda: len(b_runs) > 5)
    assert len(a_runs) == n
    assert pw.global_coordinator.stop()
