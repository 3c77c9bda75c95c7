"""One-pass compiled kernels for training-mode SpatialBN and its gradient (NCHW float32), where numpy
needs a pass per operation (subtract, square, mean, scale, shift... about eight passes over X), and
for ReluGradient (numpy: a mask pass, then a multiply by it).

- ``moments(x, mean, var)``: the batch mean and biased variance per channel (two passes over X; the
  variance is centered, as numpy's);
- ``grad_sums(x, dy, mean, dbias, dxc)``: ``sum dY`` and ``sum dY * (X - mean)`` per channel (one pass);
- ``affine2(dy, x, k1, k2, k3, dx)``: ``dX = k1 * dY + k2 * X + k3`` per channel (one pass): the whole
  input gradient once the sums are known;
- ``relu_grad(y, dy, dx)``: ``dX = dY * (Y > 0)`` (one pass, as numpy's multiply by the mask).

Each returns False (nothing written) where it does not apply (not float32, not contiguous, numba missing
or disabled, its compile failed); the caller then runs its numpy path. Optional, like window_jit: the
numba module is imported on first use, under the kernels' cache folder.
"""

from __future__ import annotations

import numpy as np

from framework.kernels import kernel_support, window_jit
from framework.kernels.kernel_support import KernelUnavailable

FAMILY = "bn_train"
_UNSET = object()
_kernels = _UNSET


def _module():
    global _kernels
    if _kernels is _UNSET:
        _kernels = None
        if window_jit.available():  # numba importable and not disabled (FRAMEWORK_NO_JIT)
            from framework.kernels import machine

            with machine.numba_cache():
                from framework.kernels import bn_train_kernels

            _kernels = bn_train_kernels
    return _kernels


def _fits(*arrays) -> bool:
    return all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def _call(fn_name: str, *args) -> bool:
    mod = _module()
    if mod is None or FAMILY in kernel_support.disabled():
        return False
    try:
        kernel_support.call(FAMILY, getattr(mod, fn_name), args)
    except KernelUnavailable:
        return False
    return True


def _nc_p(a: np.ndarray) -> np.ndarray:
    return a.reshape(a.shape[0], a.shape[1], -1)


def moments(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> bool:
    """Per-channel mean and biased variance of NCHW ``x`` into ``mean`` / ``var`` (C,)."""
    if x.ndim < 2 or x.size == 0 or not _fits(x, mean, var):
        return False
    return _call("_moments", _nc_p(x), mean, var)


def grad_sums(x: np.ndarray, dy: np.ndarray, mean: np.ndarray, dbias: np.ndarray, dxc: np.ndarray) -> bool:
    """``dbias = sum dY`` and ``dxc = sum dY * (X - mean)`` per channel."""
    if x.ndim < 2 or x.size == 0 or dy.shape != x.shape or not _fits(x, dy, mean, dbias, dxc):
        return False
    return _call("_grad_sums", _nc_p(x), _nc_p(dy), mean, dbias, dxc)


def affine2(dy: np.ndarray, x: np.ndarray, k1, k2, k3, dx: np.ndarray) -> bool:
    """``dx = k1 * dy + k2 * x + k3`` per channel (``dx`` may be ``dy``, not ``x``)."""
    if x.ndim < 2 or x.size == 0 or dy.shape != x.shape or dx.shape != x.shape or dx is x:
        return False
    if not _fits(dy, x, k1, k2, k3, dx):
        return False
    return _call("_affine2", _nc_p(dy), _nc_p(x), k1, k2, k3, _nc_p(dx))


def relu_grad(y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> bool:
    """``dx = dy * (y > 0)`` (any shape; ``dx`` may be ``dy``, not ``y``)."""
    if y.shape != dy.shape or dx.shape != y.shape or y.size == 0 or dx is y or not _fits(y, dy, dx):
        return False
    if dx is dy or np.may_share_memory(dx, dy):  # contiguous: overlapping bounds mean the same buffer
        return _call("_relu_grad_inplace", y.reshape(-1), dx.reshape(-1))
    return _call("_relu_grad", y.reshape(-1), dy.reshape(-1), dx.reshape(-1))


def available() -> bool:
    """Whether the compiled kernels may run in this process (the first call imports numba)."""
    return _module() is not None and FAMILY not in kernel_support.disabled()


def warm_up() -> None:
    """Compile (or load from numba's cache) the three kernels with the argument types the ops pass, on tiny
    arrays; nothing without numba. A failed compile disables the family (one RuntimeWarning)."""
    x, c = np.zeros((1, 2, 2, 2), np.float32), np.zeros(2, np.float32)
    if available() and moments(x, c, c.copy()) and grad_sums(x, x, c, c.copy(), c.copy()):
        affine2(x, x.copy(), c, c, c, np.empty_like(x))
