"""Compiled recurrent layers: one numba loop per layer and direction (recurrent_cells.py) for LSTM, GRU and
plain RNN cells, called by the ONNX recurrent ops and Caffe2's InferenceLSTM.

The callers project every step's input in one GEMM first ([T, B, G * H], biases not yet added), then call
``lstm`` / ``gru`` / ``rnn`` here, which return True when the compiled loop ran and False when the caller
must run its numpy loop instead: numba or scipy missing (numba lowers the per-step ``np.dot`` to scipy's
BLAS), ``FRAMEWORK_NO_JIT`` set, an array that is not float32 and C-contiguous, or a failed compile (the
family ``recurrent`` is then disabled for the process with one RuntimeWarning, see kernel_support). The
numpy loops compute the same values (the compiled tanh differs from numpy's by a few ulp).

Every array argument must be float32 and C-contiguous; the scalars are coerced here so each kernel has
one compiled signature.

scipy's BLAS is a library of its own, which reads ``OPENBLAS_CORETYPE`` when it loads. Where the framework
forced numpy's OpenBLAS to its AVX2 kernels (framework/runtime/blas_kernel.py: faster for large and thin
GEMMs on AVX-512 AMD CPUs), the per-step products here ([batch, hidden] by [hidden, G * hidden], batch
small) run at half the speed or less with them, so scipy's BLAS is loaded with OpenBLAS's own choice. A
user's ``OPENBLAS_CORETYPE`` stands.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

from framework.kernels import kernel_support
from framework.kernels.kernel_support import KernelUnavailable

FAMILY = "recurrent"
_UNSET = object()
_cells = _UNSET  # the kernels module once imported (None: not available)


def available() -> bool:
    """Whether the compiled loops may run in this process (the first call imports numba)."""
    global _cells
    if _cells is _UNSET:
        _cells = None
        if os.environ.get("FRAMEWORK_NO_JIT", "") in ("", "0") and importlib.util.find_spec("scipy") is not None:
            try:
                from framework.kernels import machine

                _load_scipy_blas()
                _cells = machine.import_kernels("recurrent_cells")
            except ImportError:  # pragma: no cover - depends on the environment
                _cells = None
    return _cells is not None and FAMILY not in kernel_support.disabled()


def _load_scipy_blas() -> None:
    """Import scipy's BLAS bindings (numba's np.dot calls them) with OpenBLAS's own kernel choice unless the
    user set one (see the module doc)."""
    if "scipy.linalg.cython_blas" in sys.modules:
        return
    from framework.runtime.state import RUNTIME

    forced = RUNTIME.coretype is not None and RUNTIME.coretype_why != "OPENBLAS_CORETYPE set by the user"
    saved = os.environ.pop("OPENBLAS_CORETYPE", None) if forced else None
    try:
        import scipy.linalg.cython_blas  # noqa: F401
    finally:
        if saved is not None:
            os.environ["OPENBLAS_CORETYPE"] = saved


def _ok(*arrays: np.ndarray) -> bool:
    return all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def _call(fn, args) -> bool:
    try:
        kernel_support.call(FAMILY, fn, args)
    except KernelUnavailable:
        return False
    return True


def lstm(xw, rt, bias, p, h0, c, y, k, reverse, clip, input_forget, offsets, g) -> bool:
    """One LSTM direction (recurrent_cells.lstm_seq): xw [T, B, 4H], rt [H, 4H] (R^T), bias [4H], p [3H] or empty,
    h0 [B, H], c [B, H] (initial cell state in, final out), y [T, D, B, H] (h_t to y[t, k]), g [B, 4H]
    scratch; offsets: the first columns of the gates i, o, f, c. True if it ran."""
    if not (available() and _ok(xw, rt, bias, p, h0, c, y, g)):
        return False
    oi, oo, of, oc = (int(v) for v in offsets)
    args = (xw, rt, bias, p, h0, c, y, int(k), bool(reverse), np.float32(clip), bool(input_forget), oi, oo, of, oc, g)
    return _call(_cells.lstm_seq, args)


def gru(xw, rts, bias, rbh, h0, y, k, reverse, clip, linear_before_reset, scratch) -> bool:
    """One GRU direction (recurrent_cells.gru_seq; gates z, r, h): xw [T, B, 3H], rts the transposed
    recurrence weights (R^T [H, 3H], R_zr^T [H, 2H], R_h^T [H, H]), bias [3H] (every bias outside the reset
    gate), rbh [H], h0 [B, H], y [T, D, B, H]; ``scratch``: arrays [B, 3H], [B, 2H], [B, H], [B, H]. True if
    it ran."""
    if not (available() and _ok(xw, *rts, bias, rbh, h0, y, *scratch)):
        return False
    args = (xw, *rts, bias, rbh, h0, y, int(k), bool(reverse), np.float32(clip), bool(linear_before_reset))
    return _call(_cells.gru_seq, args + tuple(scratch))


RNN_ACTIVATIONS = {"tanh": 0, "relu": 1, "sigmoid": 2}


def rnn(xw, rt, bias, h0, y, k, reverse, clip, activation, g) -> bool:
    """One plain-RNN direction (recurrent_cells.rnn_seq): xw [T, B, H], rt [H, H] (R^T), bias [H], h0 [B, H],
    y [T, D, B, H]; ``activation`` one of RNN_ACTIVATIONS; g [B, H] scratch. True if it ran."""
    if not (available() and _ok(xw, rt, bias, h0, y, g)):
        return False
    args = (xw, rt, bias, h0, y, int(k), bool(reverse), np.float32(clip), RNN_ACTIVATIONS[activation], g)
    return _call(_cells.rnn_seq, args)


def lstm_unit(x, c_prev, h, c, forget_bias):
    """A callable running Caffe2's LSTMUnit (recurrent_cells.lstm_unit) on these arrays ([N, 4D] gates,
    [N, D] states) and returning True, or False when the kernel could not run; None when it cannot run on
    these arrays at all."""
    if not (available() and _ok(x, c_prev, h, c)):
        return None
    fn, args = _cells.lstm_unit, (x, c_prev, h, c, np.float32(forget_bias))
    return lambda: _call(fn, args)


def lstm_unit_grad(x, c_prev, c, dh, dc, dh_prev, dc_prev, dx, forget_bias):
    """A callable running LSTMUnit's gradient (recurrent_cells.lstm_unit_grad) on these arrays and returning
    True, or False when the kernel could not run; None when it cannot run on these arrays at all."""
    if not (available() and _ok(x, c_prev, c, dh, dc, dh_prev, dc_prev, dx)):
        return None
    fn, args = _cells.lstm_unit_grad, (x, c_prev, c, dh, dc, dh_prev, dc_prev, dx, np.float32(forget_bias))
    return lambda: _call(fn, args)


def warm_up() -> None:
    """Compile (or load from numba's cache) every recurrent loop with the argument types the ops pass, on tiny
    arrays; nothing where the loops cannot run (no numba or scipy, FRAMEWORK_NO_JIT). A failed compile
    disables the family (one RuntimeWarning)."""
    if not available():
        return
    f = np.float32
    t, b, h = 2, 1, 2

    def z(*shape):
        return np.zeros(shape, f)

    y = z(t, 1, b, h)
    if not lstm(
        z(t, b, 4 * h),
        z(h, 4 * h),
        z(4 * h),
        z(0),
        z(b, h),
        z(b, h),
        y,
        0,
        False,
        0.0,
        False,
        (0, 1, 2, 3),
        z(b, 4 * h),
    ):
        return
    rts = (z(h, 3 * h), z(h, 2 * h), z(h, h))
    if not gru(
        z(t, b, 3 * h),
        rts,
        z(3 * h),
        z(h),
        z(b, h),
        y,
        0,
        False,
        0.0,
        False,
        (z(b, 3 * h), z(b, 2 * h), z(b, h), z(b, h)),
    ):
        return
    if not rnn(z(t, b, h), z(h, h), z(h), z(b, h), y, 0, False, 0.0, "tanh", z(b, h)):
        return
    if lstm_unit(z(b, 4 * h), z(b, h), z(b, h), z(b, h), 0.0)():
        lstm_unit_grad(*(z(b, 4 * h), z(b, h), z(b, h), z(b, h), z(b, h), z(b, h), z(b, h), z(b, 4 * h)), 0.0)()
