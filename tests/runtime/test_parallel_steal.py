"""run_parallel(steal=True): every task runs exactly once, this thread takes the tasks no pool thread has
started (so a pool thread that never gets a core delays nothing), and errors reach the caller."""

from __future__ import annotations

import threading

import pytest

import framework
from framework.runtime.parallel import run_parallel


@pytest.fixture
def two_threads():
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    yield
    framework.set_num_threads(old)


def test_each_task_runs_once(two_threads):
    for n in (2, 3, 7):
        for _ in range(50):
            hits = [0] * n
            run_parallel([lambda k=k, h=hits: h.__setitem__(k, h[k] + 1) for k in range(n)], steal=True)
            assert hits == [1] * n


def test_a_busy_pool_thread_does_not_hold_the_call(two_threads):
    release = threading.Event()
    from framework.runtime.state import RUNTIME

    started = threading.Event()
    # the pool's one thread busy until released (from when it has started on it)
    blocker = RUNTIME.pool.submit(lambda: (started.set(), release.wait()))
    assert started.wait(10)
    try:
        ran_on = []
        tasks = [lambda: ran_on.append(threading.get_ident()) for _ in range(4)]
        done = threading.Event()
        caller = threading.Thread(target=lambda: (run_parallel(tasks, steal=True), done.set()), daemon=True)
        caller.start()
        assert done.wait(10), "run_parallel waited for a pool thread that was not free"
        assert ran_on == [caller.ident] * 4
    finally:
        release.set()
        blocker.result()


def test_errors_reach_the_caller(two_threads):
    def boom():
        raise ValueError("task failed")

    ran = []
    with pytest.raises(ValueError, match="task failed"):
        run_parallel([lambda: ran.append(0), boom, lambda: ran.append(2)], steal=True)
    with pytest.raises(ValueError, match="task failed"):
        run_parallel([boom, lambda: ran.append(1)], steal=True)
