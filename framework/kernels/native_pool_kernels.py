"""The compiled half of native_pool: atomics on a control array, the workers' wait-and-work loop and the
caller's post / work / wait, all without the GIL (numba ``nogil``), and the helpers a native task uses to
read its argument block. See native_pool.py for the protocol. Imported only when first needed.

A task is a C function ``void task(int64 block, int64 index)`` (a numba ``cfunc``): ``block`` the address of
an int64 argument block, ``index`` the task's number in its job. The control array (int64) holds:

- ``CLAIM``: the job word, ``job << 40 | tasks << 20 | next``: the job's number, its task count and the next
  task not yet claimed. A thread claims task ``next`` by a compare-and-swap of the whole word, so a claim is
  valid only for the job it read the fields of (a finished job's word never matches again);
- ``FN``, ``BLOCK``: the job's task function and argument block, written before the job word is published;
- ``DONE``: tasks finished (the caller waits for it to reach the count);
- ``STOP``: nonzero asks the workers to return;
- ``SLEEP + k``: 1 while worker k has given up spinning (the caller then wakes it from Python).
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import carray, float32, int64, types
from numba.core import cgutils
from numba.extending import intrinsic

from framework.kernels import cached_jit

CLAIM, FN, BLOCK, DONE, STOP, SLEEP = 0, 1, 2, 3, 4, 8
FIELDS = 8  # SLEEP + k for worker k follows
MAX_TASKS = (1 << 20) - 1
MAX_JOB = (1 << 23) - 1  # job numbers wrap here (the job word's top bits)
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
_I64 = ir.IntType(64)

_jit = cached_jit.njit(cache=True, nogil=True, boundscheck=False)


def _slot(context, builder, aryty, ary, i):
    arr = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr, [i])


@intrinsic
def load(typingctx, ctrl, i):
    """ctrl[i], an acquire load."""

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_slot(context, builder, sig.args[0], args[0], args[1]), "acquire", 8)

    return types.int64(ctrl, i), codegen


@intrinsic
def store(typingctx, ctrl, i, v):
    """ctrl[i] = v, sequentially consistent (a worker's sleep flag and the job word are read crosswise)."""

    def codegen(context, builder, sig, args):
        builder.store_atomic(args[2], _slot(context, builder, sig.args[0], args[0], args[1]), "seq_cst", 8)
        return context.get_dummy_value()

    return types.void(ctrl, i, types.int64), codegen


@intrinsic
def cas(typingctx, ctrl, i, old, new):
    """ctrl[i] = new if it is old (atomically); whether it was."""

    def codegen(context, builder, sig, args):
        ptr = _slot(context, builder, sig.args[0], args[0], args[1])
        pair = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(ctrl, i, types.int64, types.int64), codegen


@intrinsic
def fetch_add(typingctx, ctrl, i, v):
    """ctrl[i] += v atomically; the value before."""

    def codegen(context, builder, sig, args):
        return builder.atomic_rmw("add", _slot(context, builder, sig.args[0], args[0], args[1]), args[2], "seq_cst")

    return types.int64(ctrl, i, types.int64), codegen


@intrinsic
def pause(typingctx):
    """The spin-wait hint (x86 ``pause``: frees the core's shared resources); nothing elsewhere."""

    def codegen(context, builder, sig, args):
        if _X86:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause"
            )
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def call_task(typingctx, fn, block, index):
    """The task function at address ``fn`` called with (block, index)."""

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [_I64, _I64])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1], args[2]])
        return context.get_dummy_value()

    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def pointer(typingctx, address, dtype):
    """``address`` (int64) as a pointer to ``dtype`` (a numba type: float32, int64...)."""
    target = dtype.dtype if isinstance(dtype, types.DType) else dtype.instance_type
    ptr_t = types.CPointer(target)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr_t))

    return ptr_t(types.int64, dtype), codegen


@_jit
def _claim_and_run(ctrl) -> int:  # pragma: no cover - compiled
    """Run tasks of the current job until none is left to claim; how many this thread ran."""
    ran = 0
    while True:
        word = load(ctrl, CLAIM)
        nxt = word & MAX_TASKS
        if nxt >= (word >> 20) & MAX_TASKS:
            return ran
        fn, block = load(ctrl, FN), load(ctrl, BLOCK)  # this job's, if the claim below succeeds
        if cas(ctrl, CLAIM, word, word + 1):
            call_task(fn, block, nxt)
            fetch_add(ctrl, DONE, 1)
            ran += 1


@_jit
def work_loop(ctrl, k, seen, spins):  # pragma: no cover - compiled
    """Worker k: wait for a job newer than ``seen`` (spinning), help with it, wait again; returns the last
    job seen once ``spins`` polls found nothing (its sleep flag set: the caller blocks until woken), -2 - job
    for a job of Python callables (FN 0: the caller runs them), or -1 when asked to stop."""
    store(ctrl, SLEEP + k, 0)
    idle = 0
    while True:
        if load(ctrl, STOP) != 0:
            return -1
        job = load(ctrl, CLAIM) >> 40
        if job != seen:
            if load(ctrl, FN) == 0:  # a job of Python callables: the caller's thread runs them
                return -2 - job
            _claim_and_run(ctrl)
            seen = job
            idle = 0
            continue
        idle += 1
        if idle >= spins:
            store(ctrl, SLEEP + k, 1)
            if load(ctrl, CLAIM) >> 40 == seen:  # no job posted since: sleep (the poster sees the flag)
                return seen
            store(ctrl, SLEEP + k, 0)
            idle = 0
        pause()


@_jit
def post(ctrl, fn, block, n) -> int:  # pragma: no cover - compiled
    """Publish a job of ``n`` tasks; a bit mask of the workers (up to 62) asleep, to be woken."""
    store(ctrl, FN, fn)
    store(ctrl, BLOCK, block)
    store(ctrl, DONE, 0)
    job = ((load(ctrl, CLAIM) >> 40) + 1) & MAX_JOB
    store(ctrl, CLAIM, (job << 40) | (n << 20))
    asleep = 0
    for k in range(min(ctrl.shape[0] - SLEEP, 62)):
        if load(ctrl, SLEEP + k) != 0:
            asleep |= 1 << k
    return asleep


@_jit
def work_and_wait(ctrl, n, spins) -> int:  # pragma: no cover - compiled
    """The caller's share of the job (every task nobody else has claimed), then up to ``spins`` polls for the
    tasks others run; how many tasks this thread ran, or -1 - that when not all ``n`` are done yet."""
    ran = _claim_and_run(ctrl)
    for _ in range(spins):
        if load(ctrl, DONE) >= n:
            return ran
        pause()
    return ran if load(ctrl, DONE) >= n else -1 - ran


@_jit
def wait(ctrl, n, spins) -> bool:  # pragma: no cover - compiled
    """Up to ``spins`` more polls for the job's ``n`` tasks; whether all are done."""
    for _ in range(spins):
        if load(ctrl, DONE) >= n:
            return True
        pause()
    return load(ctrl, DONE) >= n


@_jit
def spin(ctrl, spins) -> int:  # pragma: no cover - compiled
    """``spins`` polls of an unchanging word (to time a poll)."""
    s = 0
    for _ in range(spins):
        s += load(ctrl, STOP)
        pause()
    return s


@_jit
def run_here(fn, block, n):  # pragma: no cover - compiled
    """Tasks 0..n-1 on this thread."""
    for i in range(n):
        call_task(fn, block, i)


@_jit
def block_of(address):  # pragma: no cover - compiled
    """The int64 argument block at ``address`` (its first value is its length)."""
    return carray(pointer(address, int64), carray(pointer(address, int64), 1)[0])


@_jit
def f32_1(b, at):  # pragma: no cover - compiled
    """The float32 array of block slot ``at`` (address, then 1 to 4 sizes), and likewise below."""
    return carray(pointer(b[at], float32), (b[at + 1],))


@_jit
def f32_2(b, at):  # pragma: no cover - compiled
    return carray(pointer(b[at], float32), (b[at + 1], b[at + 2]))


@_jit
def f32_3(b, at):  # pragma: no cover - compiled
    return carray(pointer(b[at], float32), (b[at + 1], b[at + 2], b[at + 3]))


@_jit
def f32_4(b, at):  # pragma: no cover - compiled
    return carray(pointer(b[at], float32), (b[at + 1], b[at + 2], b[at + 3], b[at + 4]))


@_jit
def i64_1(b, at):  # pragma: no cover - compiled
    return carray(pointer(b[at], int64), (b[at + 1],))


@_jit
def put(b, at, x, dims):  # pragma: no cover - compiled
    """Block slot ``at``: the address of C-contiguous ``x``, then ``dims`` sizes, its shape padded in front with
    1s (a 1-D array as (1, 1, n) for dims 3)."""
    b[at] = x.ctypes.data
    for i in range(dims):
        j = i - (dims - x.ndim)
        b[at + 1 + i] = x.shape[j] if j >= 0 else 1
    return 0


@_jit
def args_of(block, k):  # pragma: no cover - compiled
    """(block, the offset of task k's arguments): a job of recorded kernel calls (native_pool.CallJob) keeps an
    offset per task after the length, then each task's arguments as ``pack_call`` laid them out."""
    b = block_of(block)
    return b, b[1 + k]


def task_of(tasks: dict, fns: dict, kernel: str, cache: bool):
    """``tasks[kernel]``: (the C callback of ``fns[kernel][0]``, ``fns[kernel][1]``), compiled (or loaded from
    the cache) on first use and kept (its code must outlive every address handed out); None for a kernel not in
    ``fns``."""
    got = tasks.get(kernel)
    if got is None:
        entry = fns.get(kernel)
        if entry is None:
            return None
        fn, layout = entry
        got = tasks[kernel] = (
            cached_jit.cfunc(types.void(types.int64, types.int64), cache=cache, boundscheck=False)(fn),
            layout,
        )
    return got
