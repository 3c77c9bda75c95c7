"""native_pool: compiled jobs over the intra-op threads. Every task of a job runs exactly once, on whichever
thread claims it; a job waits for all of them; a busy pool or one thread runs the tasks here; workers that
gave up spinning are woken for the next job; the same threads run run_parallel's Python tasks and submit's
callables; and the kernels' task functions compile and give the bits of one thread."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from numba import types

import framework
from framework.kernels import bn_train, cached_jit, conv_grad_filter, native_pool
from framework.kernels import native_pool_kernels as npk
from framework.runtime.parallel import run_parallel
from framework.runtime.state import RUNTIME

pytestmark = pytest.mark.skipif(not native_pool.available(), reason="native jobs need numba")


def _count(block, k):  # pragma: no cover - compiled
    """Task k adds 1 to counts[k] and spins for spin[0] rounds (time for other threads to claim the rest)."""
    b = npk.block_of(block)
    counts, spin = npk.f32_1(b, 1), npk.f32_1(b, 3)
    s = 0.0
    for i in range(int(spin[0])):
        s += i * 1e-9
    counts[k] += 1.0 + s * 0.0


@pytest.fixture(scope="module")
def counting_task():
    return cached_jit.cfunc(types.void(types.int64, types.int64))(_count)


def _job(n: int, spin: int):
    blk = native_pool.Block(6)
    counts, rounds = np.zeros(max(n, 1), np.float32), np.array([spin], np.float32)
    blk.array(1, counts)
    blk.array(3, rounds)
    return blk, counts, rounds


@pytest.fixture
def two_threads():
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    yield RUNTIME.pool
    framework.set_num_threads(old)


def test_the_pool_is_the_native_one(two_threads):
    assert isinstance(two_threads, native_pool.Pool)


@pytest.mark.parametrize("spin", [0, 20000])
def test_every_task_runs_once(two_threads, counting_task, spin):
    for n in (1, 2, 3, 7, 64):
        blk, counts, _ = _job(n, spin)
        for _ in range(20):
            native_pool.run(counting_task.address, blk.data, n)
        np.testing.assert_array_equal(counts[:n], 20.0)


def test_workers_take_tasks(two_threads, counting_task):
    """With long tasks the spinning worker claims some of a job's tasks (in one job of 20 at least)."""
    pool = two_threads
    blk, counts, _ = _job(8, 200_000)
    here = []
    for _ in range(20):
        native_pool.run(counting_task.address, blk.data, 8)
        here.append(pool.ran_here)
    np.testing.assert_array_equal(counts, 20.0)
    assert min(here) < 8, "the worker never took a task"


def test_sleeping_workers_are_woken(counting_task, monkeypatch):
    """A pool whose workers stop spinning at once: each job must wake them (or run here); none is lost."""
    monkeypatch.setenv("FRAMEWORK_SPIN_US", "1")
    pool = native_pool.Pool(1)
    try:
        blk, counts, _ = _job(4, 50_000)
        for _ in range(30):
            threading.Event().wait(0.001)  # the worker gives up spinning and sleeps
            with pool.busy:
                pool.run(counting_task.address, blk.data, 4)
        np.testing.assert_array_equal(counts, 30.0)
    finally:
        pool.shutdown()
    assert not any(t.is_alive() for t in pool._threads)


def test_a_busy_pool_runs_the_job_here(two_threads, counting_task):
    pool = two_threads
    blk, counts, _ = _job(5, 0)
    with pool.busy:  # another thread's job
        native_pool.run(counting_task.address, blk.data, 5)
    np.testing.assert_array_equal(counts, 1.0)


def test_one_thread_runs_here(counting_task):
    old = framework.get_num_threads()
    framework.set_num_threads(1)
    try:
        blk, counts, _ = _job(3, 0)
        native_pool.run(counting_task.address, blk.data, 3)
        native_pool.run(counting_task.address, blk.data, 0)  # nothing to do
        np.testing.assert_array_equal(counts, 1.0)
    finally:
        framework.set_num_threads(old)


def test_python_tasks_and_submit_share_the_workers(two_threads):
    pool = two_threads
    names = set()
    for _ in range(30):
        run_parallel([lambda: names.add(threading.current_thread().name)] * 4, steal=False)
    assert any(n.startswith("framework-op") for n in names), names
    assert pool.submit(lambda: 41 + 1).result(timeout=10) == 42
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(timeout=10)


def test_put_pads_shapes_in_front():
    blk = native_pool.Block(8)
    a = np.zeros(5, np.float32)
    blk.array(1, a, 3)
    blk.array(5, np.zeros((2, 3), np.float32))
    assert blk.data[1] == a.ctypes.data and list(blk.data[2:5]) == [1, 1, 5]
    assert list(blk.data[6:8]) == [2, 3]


def test_the_kernels_task_functions_compile():
    mod = bn_train._module()
    for name in mod._TASK_FNS:
        assert mod.task(name).address, name
    assert conv_grad_filter._module().task().address
    from framework.kernels import channel_kernel, microkernel

    for module, names in ((microkernel, ("_conv", "_conv_wide", "_pointwise")), (channel_kernel, ("_conv",))):
        for name in names:
            task, layout = module.native_task(name)
            assert task.address and layout, (module.__name__, name)


@pytest.mark.parametrize("shape", [(8, 16, 30, 30), (64, 3, 4, 5)])
def test_bn_train_kernels_split_natively_with_the_bits_of_one_thread(shape, monkeypatch):
    rng = np.random.default_rng(0)
    x, dy = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    c = shape[1]
    k1, k2, k3 = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    g, m, p = (rng.standard_normal(x.size).astype(np.float32) for _ in range(3))
    lr = np.array([0.1], np.float32)

    def run_all():
        bn = [k1.copy(), k2.copy(), k3.copy(), k2.copy(), *(np.zeros(c, np.float32) for _ in range(5))]
        y = np.empty_like(x)
        bn_train.spatial_bn_job(x, y, *bn[:6], tuple(bn[6:]), (1e-3, 0.9, 0.1, 0.1), 1)()
        grads = [np.empty_like(x), *(np.zeros(c, np.float32) for _ in range(5))]
        bn_train.spatial_bn_grad_job(x, dy, grads[0], k1, bn[4], bn[5], *grads[1:3], tuple(grads[3:]), -0.01)()
        out = [np.empty_like(x) for _ in range(2)]
        gm = [g.copy(), m.copy(), p.copy()]
        assert bn_train.relu_grad(x, dy, out[0])
        out[1][...] = dy
        assert bn_train.relu_grad(x, out[1], out[1])
        assert bn_train.momentum_update(*gm, lr, 0.9, True)
        bn_train.momentum_job(*gm, lr, 0.9, False)()
        total = np.empty_like(x)
        job = bn_train.add_job(x, dy, total)
        (job or (lambda: np.add(x, dy, out=total)))()
        rect = x.copy()
        rect.reshape(-1)[:3] = (np.nan, -0.0, -np.inf)
        job = bn_train.relu_job(rect, rect)  # in place, as Relu after a Sum runs
        (job or (lambda: np.clip(rect, 0, np.inf, out=rect)))()
        return [*bn, *grads, *out, *gm, y, total, rect]

    one = run_all()
    calls = []
    real_run = native_pool.run
    monkeypatch.setattr(native_pool, "run", lambda *a: (calls.append(a[2]), real_run(*a)))
    monkeypatch.setattr("framework.runtime.parallel.SPLIT_MIN_WORK", 1)
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    try:
        two = run_all()
    finally:
        framework.set_num_threads(old)
    assert len(calls) == 10 and all(n == 2 for n in calls)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    rect = two[-1].reshape(-1)  # as numpy's clip(x, 0, inf): NaN and -0.0 stay
    assert np.isnan(rect[0]) and rect[1] == 0 and np.signbit(rect[1]) and rect[2] == 0 and not np.signbit(rect[2])
    np.testing.assert_array_equal(rect[3:], np.clip(x.reshape(-1)[3:], 0, np.inf))


def test_python_jobs_without_stealing_never_wait_forever(two_threads):
    """A job whose later tasks only a worker may run (steal=False) is always taken: the worker checks the
    job's number, set before the job is posted."""
    done = threading.Event()

    def many():
        for _ in range(500):
            run_parallel([lambda: None, lambda: None, lambda: None], steal=False)
        done.set()

    threading.Thread(target=many, daemon=True).start()
    assert done.wait(60), "a job's tasks were never taken"


def test_a_pool_whose_loops_fail_to_compile_falls_back_to_python_threads(monkeypatch):
    def broken(*args):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(native_pool._module(), "spin", broken)
    with pytest.warns(RuntimeWarning, match="did not compile"):
        assert native_pool.make(1) is None


def test_a_small_conv_on_a_native_kernel_splits_with_the_bits_of_one_thread():
    """Below SPLIT_MIN_FLOPS but above NATIVE_SPLIT_MIN_FLOPS a conv whose parts run as a native job splits
    (a 1x1 conv of ResNet-20's shortcut size: 7.4 MFLOP), bit for bit as on one thread."""
    from framework.core import CreateOperator
    from framework.kernels.dispatch_table import THRESHOLDS
    from framework.proto.framework_pb2 import NetDef
    from tests.ops.threaded import assert_same, run_threads

    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 32, 15, 15)).astype(np.float32)
    w = rng.standard_normal((16, 32, 1, 1)).astype(np.float32)
    flops = 2 * 32 * 16 * 32 * 15 * 15
    assert THRESHOLDS["NATIVE_SPLIT_MIN_FLOPS"] <= flops < THRESHOLDS["SPLIT_MIN_FLOPS"]
    net = NetDef(name="small_conv")
    net.op.append(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=1, no_bias=1))
    results, tasks, allocs = run_threads(net, {"X": x, "W": w}, ["Y"])
    assert tasks > 0 and allocs == 0
    assert_same(results)


def test_a_narrow_direct_conv_splits_natively_with_the_bits_of_one_thread():
    """Outputs narrower than DIRECT_WIDE_OW run the direct kernel's wide layout (microkernel._conv_wide), whose
    parts run as a native job too: a 2x1 phase of a stride-2 conv's dX on ResNet-20's 8 x 8 grid (8.4 MFLOP)."""
    from framework.core import CreateOperator
    from framework.kernels import conv_strategies
    from framework.kernels.dispatch_table import THRESHOLDS
    from framework.kernels.geometry import Geometry
    from framework.proto.framework_pb2 import NetDef
    from tests.ops.threaded import assert_same, run_threads

    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 64, 8, 8)).astype(np.float32)
    w = rng.standard_normal((16, 64, 2, 1)).astype(np.float32)
    net = NetDef(name="narrow_direct")
    net.op.append(CreateOperator("Conv", ["X", "W"], ["Y"], kernel_h=2, kernel_w=1, pads=[0, 0, 1, 0], no_bias=1))
    geo = Geometry((8, 8), (2, 1), (1, 1), (1, 1), (0, 0), (1, 0), (8, 8))
    assert conv_strategies.choose(geo, 64, 16, 1, np.float32, 32).name == "direct"
    assert geo.out[1] < THRESHOLDS["DIRECT_WIDE_OW"]
    flops = 2 * 32 * 16 * 64 * 2 * 64
    assert THRESHOLDS["NATIVE_SPLIT_MIN_FLOPS"] <= flops < THRESHOLDS["SPLIT_MIN_FLOPS"]
    results, tasks, allocs = run_threads(net, {"X": x, "W": w}, ["Y"])
    assert tasks > 0 and allocs == 0  # below SPLIT_MIN_FLOPS: split only as a native job
    assert_same(results)


def test_a_task_function_that_fails_to_compile_warns_once_naming_it():
    tried = []

    def broken():
        tried.append(1)
        raise RuntimeError("no compiler here")

    with pytest.warns(RuntimeWarning, match=r"test\.kernel: its native task did not compile.*no compiler here"):
        assert native_pool.compiled_task("test.kernel", broken) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native_pool.compiled_task("test.kernel", broken) is None  # not tried again, no second warning
    assert tried == [1]
    native_pool._NO_TASK.discard("test.kernel")


def test_a_kernel_without_its_task_function_splits_as_python_tasks(two_threads, monkeypatch):
    mod = bn_train._module()

    def broken(name):
        raise RuntimeError(f"no task for {name}")

    monkeypatch.setattr(mod, "task", broken)
    monkeypatch.setattr("framework.runtime.parallel.SPLIT_MIN_WORK", 1)
    rng = np.random.default_rng(1)
    y, dy = (rng.standard_normal((4, 3, 5, 5)).astype(np.float32) for _ in range(2))
    dx = np.empty_like(y)
    try:
        with pytest.warns(RuntimeWarning, match=r"bn_train\._relu_grad: its native task did not compile"):
            assert bn_train.relu_grad(y, dy, dx)
    finally:
        native_pool._NO_TASK.discard("bn_train._relu_grad")
    np.testing.assert_array_equal(dx, dy * (y > 0))
