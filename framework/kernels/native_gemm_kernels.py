"""The compiled half of native_gemm: a native task function calling numpy's own CBLAS ``sgemm`` / ``sgemv``
through their addresses, and the bias additions that follow them. Imported only when first needed.

The argument block (native_pool.Block's int64 array) holds, after its length: the address of ``sgemm``, of
``sgemv``, the integer width (below), then for n tasks n + 1 offsets (task i's records run from offset i to
offset i + 1), then the records, ``RECORD`` int64 each:

- ``GEMM``: trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc: C (m x n) = op(A) op(B), row-major (CBLAS
  ``CblasRowMajor``, alpha 1, beta 0);
- ``GEMV``: order, -, m, n, -, a, lda, x, incx, y, incy: ``cblas_sgemv(order, CblasTrans, m, n, 1, a, lda,
  x, incx, 0, y, incy)``, y = A^T x (the form numpy's matmul calls);
- ``ADD_BIAS``: -, -, m, n, -, bias, -, -, -, c, ldc: row i of C (m x n) += bias (n values);
- ``ADD_T_BIAS``: -, -, m, n, -, bias, -, s, lds, c, ldc: C[i, j] = S[j, i] + bias[j] (S n x m).

Integers go to the library at the width of its interface (the block's fourth value: 64 for an ILP64 build,
as numpy's wheels are, whose symbols end in ``64_``; else 32).
"""

from __future__ import annotations

from llvmlite import ir
from numba import carray, float32, types
from numba.extending import intrinsic

from framework.kernels import cached_jit, native_pool_kernels
from framework.kernels.native_pool_kernels import block_of, pointer

GEMM, GEMV, ADD_BIAS, ADD_T_BIAS = 0, 1, 2, 3
RECORD = 12
HEAD = 4  # the length, sgemm, sgemv, the integer width
ROW_MAJOR, COL_MAJOR, NO_TRANS, TRANS = 101, 102, 111, 112  # CBLAS enum values

_I32, _F32, _PTR = ir.IntType(32), ir.FloatType(), ir.IntType(8).as_pointer()
_jit = cached_jit.njit(cache=True, nogil=True, boundscheck=False)


def _callers(width: int):
    """(sgemm, sgemv) intrinsics calling the CBLAS function at an int64 address with ``width``-bit integers."""
    iw = ir.IntType(width)

    def ints(builder, values):
        return [v if width == 64 else builder.trunc(v, iw) for v in values]

    @intrinsic
    def sgemm(typingctx, fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
        def codegen(context, builder, sig, args):
            params = [_I32, _I32, _I32, iw, iw, iw, _F32, _PTR, iw, _PTR, iw, _F32, _PTR, iw]
            fn_t = ir.FunctionType(ir.VoidType(), params)
            f = builder.inttoptr(args[0], fn_t.as_pointer())
            ta, tb = (builder.trunc(v, _I32) for v in args[1:3])
            m, n, k, lda, ldb, ldc = ints(builder, [args[3], args[4], args[5], args[7], args[9], args[11]])
            a, b, c = (builder.inttoptr(v, _PTR) for v in (args[6], args[8], args[10]))
            one, zero = ir.Constant(_F32, 1.0), ir.Constant(_F32, 0.0)
            builder.call(f, [ir.Constant(_I32, ROW_MAJOR), ta, tb, m, n, k, one, a, lda, b, ldb, zero, c, ldc])
            return context.get_dummy_value()

        return types.void(*[types.int64] * 12), codegen

    @intrinsic
    def sgemv(typingctx, fn, order, m, n, a, lda, x, incx, y, incy):
        def codegen(context, builder, sig, args):
            fn_t = ir.FunctionType(ir.VoidType(), [_I32, _I32, iw, iw, _F32, _PTR, iw, _PTR, iw, _F32, _PTR, iw])
            f = builder.inttoptr(args[0], fn_t.as_pointer())
            order = builder.trunc(args[1], _I32)
            m, n, lda, incx, incy = ints(builder, [args[2], args[3], args[5], args[7], args[9]])
            a, x, y = (builder.inttoptr(v, _PTR) for v in (args[4], args[6], args[8]))
            one, zero = ir.Constant(_F32, 1.0), ir.Constant(_F32, 0.0)
            builder.call(f, [order, ir.Constant(_I32, TRANS), m, n, one, a, lda, x, incx, zero, y, incy])
            return context.get_dummy_value()

        return types.void(*[types.int64] * 10), codegen

    return sgemm, sgemv


_sgemm64, _sgemv64 = _callers(64)
_sgemm32, _sgemv32 = _callers(32)


@_jit
def _add_bias(r):  # pragma: no cover - compiled
    m, n, ldc = r[3], r[4], r[11]
    bias = carray(pointer(r[6], float32), (n,))
    c = carray(pointer(r[10], float32), ((m - 1) * ldc + n,))
    for i in range(m):
        row = c[i * ldc : i * ldc + n]
        for j in range(n):
            row[j] += bias[j]


@_jit
def _add_t_bias(r):  # pragma: no cover - compiled
    m, n, lds, ldc = r[3], r[4], r[9], r[11]
    bias = carray(pointer(r[6], float32), (n,))
    s = carray(pointer(r[8], float32), ((n - 1) * lds + m,))
    c = carray(pointer(r[10], float32), ((m - 1) * ldc + n,))
    for i in range(m):
        row = c[i * ldc : i * ldc + n]
        col = s[i:]
        for j in range(n):
            row[j] = col[j * lds] + bias[j]


def _task(block, index):  # pragma: no cover - compiled (the C callback ``task`` below)
    b = block_of(block)
    wide = b[3] == 64
    lo, hi = b[HEAD + index], b[HEAD + index + 1]
    for at in range(lo, hi, RECORD):
        r = b[at : at + RECORD]
        kind = r[0]
        if kind == GEMM and wide:
            _sgemm64(b[1], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11])
        elif kind == GEMM:
            _sgemm32(b[1], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11])
        elif kind == GEMV and wide:
            _sgemv64(b[2], r[1], r[3], r[4], r[6], r[7], r[8], r[9], r[10], r[11])
        elif kind == GEMV:
            _sgemv32(b[2], r[1], r[3], r[4], r[6], r[7], r[8], r[9], r[10], r[11])
        elif kind == ADD_BIAS:
            _add_bias(r)
        else:
            _add_t_bias(r)


_TASKS: dict = {}


def task():
    """The C task function, compiled (or loaded from the cache) on first use and kept (its code must outlive
    every address handed out)."""
    return native_pool_kernels.task_of(_TASKS, {"gemm": (_task, None)}, "gemm", True)[0]
