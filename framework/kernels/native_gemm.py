"""Matrix products split over the intra-op threads as native jobs: numpy's own CBLAS called from compiled tasks.

An FC whose product is split by Python tasks (``runtime.parallel.run_parallel``) pays 60-110 us a split on
a virtual machine (see native_pool), as much as a whole product of a recurrent step (20 x 256 by 256 x 1024:
~200 us). Here each task calls ``cblas_sgemm`` / ``cblas_sgemv`` of the BLAS library numpy itself uses, at
the address the library exports, from a native task (native_gemm_kernels), so a split costs a few
microseconds and the products of a language model's steps gain 1.7x from a second thread.

The calls are the ones numpy's ``matmul`` makes for the same operands (``Job.matmul`` follows its choice of
gemm, gemv or its own loop, the transposes and leading dimensions from the strides), in the same library,
so a product split by columns has the bits of ``np.matmul`` on the whole. The library is found among the
loaded BLAS libraries (threadpoolctl), numpy's own first, by its CBLAS symbols (numpy's wheels:
``scipy_cblas_sgemm64_``, 64-bit integers), and accepted only when a probe product through it has the bits
of ``np.matmul``; otherwise ``available()`` is False and callers keep their Python tasks.
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable

import numpy as np

from framework.kernels import machine, native_pool

_UNSET = object()
_kernels = _UNSET
_blas = _UNSET  # (sgemm address, sgemv address, integer width), or None
_BLAS_MAX = 2**31 - 2  # numpy's BLAS_MAXSIZE: larger dimensions take its own loop
_SYMBOLS = (("scipy_cblas_", "64_", 64), ("cblas_", "64_", 64), ("scipy_cblas_", "", 32), ("cblas_", "", 32))


def _module():
    global _kernels
    if _kernels is _UNSET:
        _kernels = machine.import_kernels("native_gemm_kernels") if native_pool.available() else None
    return _kernels


def available() -> bool:
    """Whether products can run as native jobs here (numba, the pool's loops, numpy's CBLAS found)."""
    return _module() is not None and _library() is not None and _task_address() is not None


def _task_address() -> int | None:
    task = native_pool.compiled_task("native_gemm", _module().task)
    return task.address if task is not None else None


def _library():
    global _blas
    if _blas is _UNSET:
        _blas = _find_library()
    return _blas


def _find_library():
    """numpy's CBLAS (sgemm, sgemv, integer width), checked against ``np.matmul`` by a probe; None if not found."""
    from framework.runtime.state import RUNTIME

    root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    paths = [getattr(lib, "filepath", None) for lib in RUNTIME.blas_libs()]
    paths = sorted((p for p in paths if p), key=lambda p: not os.path.abspath(p).startswith(root))
    for path in paths:
        try:
            dll = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, width in _SYMBOLS:
            gemm, gemv = (getattr(dll, f"{prefix}{name}{suffix}", None) for name in ("sgemm", "sgemv"))
            if gemm is not None and gemv is not None and _agrees(gemm, gemv, width):
                address = ctypes.cast(gemm, ctypes.c_void_p).value, ctypes.cast(gemv, ctypes.c_void_p).value
                return (*address, width)
    return None


def _agrees(gemm, gemv, width: int) -> bool:
    """Whether these functions, called with ``width``-bit integers, give np.matmul's bits on probe products."""
    i, f, p = ctypes.c_int64 if width == 64 else ctypes.c_int32, ctypes.c_float, ctypes.c_void_p
    e = ctypes.c_int
    gemm.argtypes = [e, e, e, i, i, i, f, p, i, p, i, f, p, i]
    gemv.argtypes = [e, e, i, i, f, p, i, p, i, f, p, i]
    gemm.restype = gemv.restype = None
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((9, 37), np.float32), rng.standard_normal((37, 21), np.float32)
    c, y = np.empty((9, 21), np.float32), np.empty(21, np.float32)
    gemm(101, 111, 111, 9, 21, 37, 1.0, a.ctypes.data, 37, b.ctypes.data, 21, 0.0, c.ctypes.data, 21)
    gemv(101, 112, 37, 21, 1.0, b.ctypes.data, 21, a.ctypes.data, 1, 0.0, y.ctypes.data, 1)
    return np.array_equal(c, a @ b) and np.array_equal(y, a[0] @ b)


def _blasable(s1: int, s2: int, d2: int) -> bool:
    """numpy's ``is_blasable2d`` for float32: unit inner stride, outer stride a whole number of items >= d2."""
    return s2 == 4 and s1 % 4 == 0 and d2 <= s1 // 4 <= _BLAS_MAX


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class Job:
    """Matrix products and bias additions grouped per task, run as one native job (``build``). The arrays
    must stay alive and in place while the job is used (the job keeps references to them)."""

    def __init__(self, tasks: int) -> None:
        self._records: list[list[list[int]]] = [[] for _ in range(tasks)]
        self._keep: list[np.ndarray] = []

    def _put(self, task: int, record: list[int], *arrays: np.ndarray) -> None:
        self._records[task].append(record + [0] * (12 - len(record)))
        self._keep.extend(arrays)

    def matmul(self, task: int, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
        """``out = a @ b`` in ``task`` through the CBLAS call numpy's matmul makes for these operands (a 1-D or
        2-D, b and out 2-D or out 1-D for a 1-D a, float32); False where numpy would run its own loop or a
        call this job does not make (a scalar result, syrk for a product with its own transpose)."""
        if not all(isinstance(v, np.ndarray) and v.dtype == np.float32 and v.flags.aligned for v in (a, b, out)):
            return False
        if b.ndim != 2 or a.ndim not in (1, 2) or out.ndim != a.ndim or not out.flags.writeable:
            return False
        dn, dp = b.shape
        is2_n, is2_p = b.strides
        if a.ndim == 1:
            dm, is1_m, is1_n, os_m, os_p = 1, 0, a.strides[0], 0, out.strides[0]
            if a.shape[0] != dn or out.shape != (dp,):
                return False
        else:
            (dm, k), (is1_m, is1_n), (os_m, os_p) = a.shape, a.strides, out.strides
            if k != dn or out.shape != (dm, dp):
                return False
        if min(dm, dn, dp) == 0 or max(dm, dn, dp) > _BLAS_MAX:
            return False
        i1 = _blasable(is1_m, is1_n, dn) or _blasable(is1_n, is1_m, dm)
        i2 = _blasable(is2_n, is2_p, dp) or _blasable(is2_p, is2_n, dn)
        if dm == 1 or dn == 1 or dp == 1:
            if (dm == 1 and dp == 1) or dn == 1:
                return False  # numpy's dot or its own loop
            if dm == 1 and i2 and _blasable(is1_n, 4, 1):
                self._gemv(task, b, is2_p, is2_n, a, is1_n, out, os_p, dp, dn)
                return True
            if dp == 1 and i1 and _blasable(is2_n, 4, 1):
                self._gemv(task, a, is1_m, is1_n, b, is2_n, out, os_m, dm, dn)
                return True
            return False
        if not (i1 and i2):
            return False
        if _blasable(os_m, os_p, dp):
            return self._gemm(task, a, is1_m, is1_n, b, is2_n, is2_p, out, os_m, dm, dn, dp)
        if _blasable(os_p, os_m, dm):  # numpy's transpose equivalence: out.T = b.T @ a.T
            return self._gemm(task, b, is2_p, is2_n, a, is1_n, is1_m, out, os_p, dp, dn, dm)
        return False

    def _gemv(self, task, a, is1_m, is1_n, x, is2_n, y, op_m, m, n) -> None:
        if _blasable(is1_m, is1_n, n):
            order, lda = 102, is1_m // 4  # CblasColMajor
        else:
            order, lda = 101, is1_n // 4
        record = [1, order, 0, n, m, 0, _address(a), lda, _address(x), is2_n // 4, _address(y), op_m // 4]
        self._put(task, record, a, x, y)

    def _gemm(self, task, a, is1_m, is1_n, b, is2_n, is2_p, c, os_m, m, n, p) -> bool:
        ta, lda = (111, is1_m // 4) if _blasable(is1_m, is1_n, n) else (112, is1_n // 4)
        tb, ldb = (111, is2_n // 4) if _blasable(is2_n, is2_p, p) else (112, is2_p // 4)
        if _address(a) == _address(b) and m == p and is1_m == is2_p and is1_n == is2_n and ta != tb:
            return False  # numpy's syrk
        self._put(task, [0, ta, tb, m, p, n, _address(a), lda, _address(b), ldb, _address(c), os_m // 4], a, b, c)
        return True

    def add_bias(self, task: int, out: np.ndarray, bias: np.ndarray) -> bool:
        """``out += bias`` on every row of 2-D float32 ``out`` (unit inner stride) in ``task``; False otherwise."""
        m, n = out.shape
        if not (out.dtype == bias.dtype == np.float32 and bias.shape == (n,) and bias.flags.c_contiguous):
            return False
        if out.strides[1] != 4 or out.strides[0] % 4 or out.strides[0] < 4 * n:
            return False
        self._put(task, [2, 0, 0, m, n, 0, _address(bias), 0, 0, 0, _address(out), out.strides[0] // 4], bias, out)
        return True

    def add_transposed(self, task: int, src: np.ndarray, bias: np.ndarray, out: np.ndarray) -> bool:
        """``out = src.T + bias`` (out m x n, src n x m, float32, unit inner strides) in ``task``; False otherwise."""
        m, n = out.shape
        if not (out.dtype == src.dtype == bias.dtype == np.float32 and src.shape == (n, m) and bias.shape == (n,)):
            return False
        if out.strides[1] != 4 or src.strides[1] != 4 or not bias.flags.c_contiguous:
            return False
        if out.strides[0] % 4 or src.strides[0] % 4 or out.strides[0] < 4 * n or src.strides[0] < 4 * m:
            return False
        record = [3, 0, 0, m, n, 0, _address(bias), 0, _address(src), src.strides[0] // 4, _address(out)]
        self._put(task, record + [out.strides[0] // 4], bias, src, out)
        return True

    def build(self) -> Callable[[], None] | None:
        """A zero-argument callable running the tasks as one native job; None where native jobs cannot run."""
        if not available():
            return None
        mod = _module()
        tasks = len(self._records)
        offsets, at = [], mod.HEAD + tasks + 1
        for records in self._records:
            offsets.append(at)
            at += mod.RECORD * len(records)
        offsets.append(at)
        sgemm, sgemv, width = _library()
        data = np.array([at, sgemm, sgemv, width, *offsets], np.int64)
        data = np.concatenate([data, np.array([v for rs in self._records for r in rs for v in r], np.int64)])
        address, keep = _task_address(), tuple(self._keep)

        def job() -> None:
            native_pool.run(address, data, tasks)

        job.keep = keep  # type: ignore[attr-defined]
        return job
