"""One-pass compiled kernels for the transformer activations numpy computes in many passes: erf, GELU
(erf and tanh forms, optionally after a bias add), LayerNorm over the last axis and a float32 softmax of
rows. Optional: without numba (or with ``FRAMEWORK_NO_JIT=1``) ``available()`` is False and the ops keep
their numpy code, which computes the same values (erf: the same Cody approximation in float64, rounded once).

The callers pass C-contiguous arrays; the kernels are cached on disk like the conv kernels. ``erf``,
``gelu`` and ``layer_norm`` return False when the kernel failed to compile (its first call is guarded:
kernel_support.call, family ``activation``, one RuntimeWarning; nothing was written) and the caller then runs
its numpy code. ``warm_up()`` compiles them all for float32 and float64 (``framework warmup``).
"""

from __future__ import annotations

import numpy as np

from framework.kernels import kernel_support
from framework.kernels.kernel_support import KernelUnavailable

FAMILY = "activation"
_UNSET = object()
_k = _UNSET  # activation_kernels once imported (None: numba missing or disabled)
_EMPTY = {np.dtype(np.float32): np.empty(0, np.float32), np.dtype(np.float64): np.empty(0, np.float64)}


def available() -> bool:
    """True when the compiled kernels can be used (numba importable, not disabled)."""
    global _k
    if _k is _UNSET:
        try:
            from framework.kernels import machine

            _k = machine.import_kernels("activation_kernels")
        except Exception as exc:  # pragma: no cover - a numba that imports but breaks
            kernel_support.disable("numba", f"{type(exc).__name__}: {exc}")
            _k = None
    return _k is not None and FAMILY not in kernel_support.disabled()


def _run(fn, *args) -> bool:
    try:
        kernel_support.call(FAMILY, fn, args)
    except KernelUnavailable:
        return False
    return True


def fits(*arrays: np.ndarray) -> bool:
    """Whether the compiled kernels take these arrays: float32/float64 of one type, C-contiguous."""
    dt = arrays[0].dtype
    return dt in _EMPTY and all(a.dtype == dt and a.flags.c_contiguous for a in arrays) and available()


def _same(x: np.ndarray, out: np.ndarray) -> bool | None:
    """True: one buffer (in place); False: disjoint; None: partly overlapping."""
    if x.ctypes.data == out.ctypes.data and x.shape == out.shape:
        return True
    return None if np.may_share_memory(x, out) else False


def erf(x: np.ndarray, out: np.ndarray) -> bool:
    """out = erf(x) (float arrays of one type and shape, C-contiguous; ``out`` may be ``x``); False if the
    kernel failed to compile."""
    single = out.dtype != np.float64
    same = _same(x, out)
    if same is None:
        x = x.copy()
    if same:
        return _run(_k.erf_in_place, out.reshape(-1), single)
    return _run(_k.erf_flat, x.reshape(-1), out.reshape(-1), single)


def gelu(x: np.ndarray, out: np.ndarray, fast: bool, bias: np.ndarray | None = None) -> bool:
    """out = gelu(x + bias) (bias over the last axis, or none), erf form or (``fast``) tanh form; ``out``
    may be ``x``. False if the kernel failed to compile."""
    m = x.shape[-1] if x.ndim else 1
    b = _EMPTY[x.dtype] if bias is None else bias.reshape(-1)
    single = out.dtype != np.float64
    same = _same(x, out)
    if same is None:
        x = x.copy()
    if same:
        return _run(_k.gelu_rows_in_place, out.reshape(-1, m), b, bool(fast), single)
    return _run(_k.gelu_rows, x.reshape(-1, m), b, out.reshape(-1, m), bool(fast), single)


def layer_norm(x2, gamma, beta, eps: float, out2, mean, std) -> bool:
    """LayerNorm of the rows of 2-D ``x2`` into ``out2`` (gamma/beta: the last axis's scale and shift, or
    None), each row's mean and sqrt(var + eps) into ``mean``/``std`` (one value per row); False if the kernel
    failed to compile."""
    e = _EMPTY[x2.dtype]
    g = e if gamma is None else gamma.reshape(-1)
    b = e if beta is None else beta.reshape(-1)
    return _run(_k.layer_norm_rows, x2, g, b, float(eps), out2, mean.reshape(-1), std.reshape(-1))


def softmax_rows(x2: np.ndarray) -> bool:
    """Each row of 2-D ``x2`` replaced by its softmax in place: the row maximum subtracted and the row sums
    divided by compiled passes, numpy's exp between them (numpy's reductions along short rows cost more than
    the exp); for float32/float64 C-contiguous ``x2`` with rows. False (nothing written) for other arrays,
    without the kernels or if they failed to compile: the caller then runs its numpy code."""
    if x2.ndim != 2 or not x2.shape[1] or not fits(x2):
        return False
    if not _run(_k.softmax_subtract_max, x2):
        return False
    np.exp(x2, out=x2)
    if not _run(_k.softmax_sum_divide, x2):  # x2 is written already: finish in numpy
        np.divide(x2, np.add.reduce(x2, axis=1, keepdims=True), out=x2)
    return True


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel for float32 and float64 with the argument types the
    ops pass, on tiny arrays; nothing without numba. A failed compile disables the family (one warning)."""
    if not available():
        return
    for dt in _EMPTY:
        x, out = np.zeros((2, 4), dt), np.empty((2, 4), dt)
        ok = erf(x, out) and erf(out, out) and gelu(x, out, False) and gelu(out, out, True, np.zeros(4, dt))
        col = np.empty((2, 1), dt)
        if not (ok and layer_norm(x, None, None, 1e-5, out, col, col.copy())):
            return
        softmax_rows(np.zeros((2, 4), dt))
