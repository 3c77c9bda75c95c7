"""One-pass compiled kernels for training-mode SpatialBN and its gradient (NCHW float32), where numpy
needs a pass per operation (subtract, square, mean, scale, shift... about eight passes over X), for
ReluGradient (numpy: a mask pass, then a multiply by it) and for MaxPoolGradient (numpy: three passes
per kernel offset over strided views).

- ``moments(x, mean, var)``: the batch mean and biased variance per channel (two passes over X; the
  variance is centered, as numpy's);
- ``grad_sums(x, dy, mean, dbias, dxc)``: ``sum dY`` and ``sum dY * (X - mean)`` per channel (one pass);
- ``affine2(dy, x, k1, k2, k3, dx)``: ``dX = k1 * dY + k2 * X + k3`` per channel (one pass): the whole
  input gradient once the sums are known;
- ``relu_grad(y, dy, dx)``: ``dX = dY * (Y > 0)`` (one pass, as numpy's multiply by the mask);
- ``max_pool_grad(x, y, dy, dx, geo)``: a 2-D NCHW max pooling's input gradient, as Caffe2 computes it
  (every cell equal to its window's max receives the window's ``dY``);
- ``momentum_update(g, m, p, lr, mu, nesterov)``: MomentumSGDUpdate in place in one pass (numpy's five);
- ``add_job`` / ``relu_job``: a two-input float32 Sum and Relu bound to their arrays, split as native jobs;
- ``softmax_xent_job(x, p, labels, picked)``: SoftmaxWithLoss's softmax and log-probabilities of the labels,
  a row in one pass from memory (numpy: six passes over the logits).

With several intra-op threads (``framework.runtime.parallel``) and enough work, each call is split: the
per-channel sums by channels, the elementwise passes by images (or flat ranges), the pooling gradient by
(image, channel) planes; every value is computed as on one thread (the same summation order), so the
results do not depend on the thread count.

Each returns False (nothing written) where it does not apply (not float32, not contiguous, numba missing
or disabled, its compile failed); the caller then runs its numpy path. Optional, like window_jit: the
numba module is imported on first use, under the kernels' cache folder.
"""

from __future__ import annotations

import numpy as np

from framework.kernels import kernel_support, machine, native_pool, window_jit
from framework.kernels.kernel_support import KernelUnavailable
from framework.runtime.parallel import run_parallel, work_split

FAMILY = "bn_train"
_UNSET = object()
_kernels = _UNSET


def _module():
    global _kernels
    if _kernels is _UNSET:
        # numba importable and not disabled (FRAMEWORK_NO_JIT)
        _kernels = machine.import_kernels("bn_train_kernels") if window_jit.available() else None
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


def _split_call(fn_name: str, n: int, work: int, args_of, arrays: tuple = (), scalars: tuple = ()) -> bool:
    """``fn(*args_of(a, b))`` over ranges of ``n`` rows: one call, or one per intra-op thread when the
    work is large enough: a native job (native_pool) of the kernel's task function over ``arrays`` (3-D
    views, or 1-D) and integer ``scalars``, or, where that did not compile, Python tasks (the kernel compiled
    first by a call on an empty range, so that a failed compile is seen before any thread starts)."""
    parts = work_split(n, work)
    if parts is None:
        return _call(fn_name, *args_of(0, n))
    mod = _module()
    if arrays and _native_job(mod, fn_name, parts, arrays, scalars):
        return True
    if not _call(fn_name, *args_of(0, 0)):
        return False
    fn = getattr(_module(), fn_name)
    run_parallel([_bound(fn, args_of(a, b)) for a, b in parts], steal=True)
    return True


def _block(mod, parts: list, arrays: tuple, scalars: tuple) -> native_pool.Block:
    """The argument block of a job over ``parts`` (row ranges) of ``arrays`` (3-D views, or 1-D) and integer
    ``scalars`` (bn_train_kernels' layout)."""
    blk = native_pool.Block(mod.RANGES + 2 * len(parts))
    for i, a in enumerate(arrays):
        blk.array(mod.A + 4 * i, a, 3)
    blk.data[mod.S : mod.S + len(scalars)] = scalars
    blk.data[mod.RANGES : mod.RANGES + 2 * len(parts)] = [v for part in parts for v in part]
    return blk


def _native_job(mod, fn_name: str, parts: list, arrays: tuple, scalars: tuple) -> bool:
    """Run ``fn_name``'s native task over ``parts``; False (nothing done) without one."""
    address = _task_address(mod, fn_name) if mod is not None else None
    if address is None:
        return False
    native_pool.run(address, _block(mod, parts, arrays, scalars).data, len(parts))
    return True


def _task_address(mod, fn_name: str) -> int | None:
    """The address of ``fn_name``'s native task function; None where it does not compile (its Python tasks run)."""
    if FAMILY in kernel_support.disabled():
        return None
    task = native_pool.compiled_task(f"bn_train.{fn_name}", lambda: mod.task(fn_name))
    return task.address if task is not None else None


def _bound(fn, args):
    return lambda: fn(*args)


def _nc_p(a: np.ndarray) -> np.ndarray:
    return a.reshape(a.shape[0], a.shape[1], -1)


def moments(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> bool:
    """Per-channel mean and biased variance of NCHW ``x`` into ``mean`` / ``var`` (C,)."""
    if x.ndim < 2 or x.size == 0 or not _fits(x, mean, var):
        return False
    x3 = _nc_p(x)
    return _split_call("_moments", x.shape[1], 2 * x.size, lambda a, b: (x3, mean, var, a, b), (x3, mean, var))


def grad_sums(x: np.ndarray, dy: np.ndarray, mean: np.ndarray, dbias: np.ndarray, dxc: np.ndarray) -> bool:
    """``dbias = sum dY`` and ``dxc = sum dY * (X - mean)`` per channel."""
    if x.ndim < 2 or x.size == 0 or dy.shape != x.shape or not _fits(x, dy, mean, dbias, dxc):
        return False
    x3, dy3 = _nc_p(x), _nc_p(dy)
    args_of = lambda a, b: (x3, dy3, mean, dbias, dxc, a, b)  # noqa: E731
    return _split_call("_grad_sums", x.shape[1], 2 * x.size, args_of, (x3, dy3, mean, dbias, dxc))


def affine2(dy: np.ndarray, x: np.ndarray, k1, k2, k3, dx: np.ndarray) -> bool:
    """``dx = k1 * dy + k2 * x + k3`` per channel (``dx`` may be ``dy``, not ``x``)."""
    if x.ndim < 2 or x.size == 0 or dy.shape != x.shape or dx.shape != x.shape or dx is x:
        return False
    if not _fits(dy, x, k1, k2, k3, dx):
        return False
    dy3, x3, dx3 = _nc_p(dy), _nc_p(x), _nc_p(dx)
    args_of = lambda a, b: (dy3[a:b], x3[a:b], k1, k2, k3, dx3[a:b])  # noqa: E731
    return _split_call("_affine2", x.shape[0], x.size, args_of, (dy3, x3, k1, k2, k3, dx3))


def relu_grad(y: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> bool:
    """``dx = dy * (y > 0)`` (any shape; ``dx`` may be ``dy``, not ``y``)."""
    if y.shape != dy.shape or dx.shape != y.shape or y.size == 0 or dx is y or not _fits(y, dy, dx):
        return False
    yf, dyf, dxf = y.reshape(-1), dy.reshape(-1), dx.reshape(-1)
    if dx is dy or np.may_share_memory(dx, dy):  # contiguous: overlapping bounds mean the same buffer
        return _split_call("_relu_grad_inplace", y.size, y.size, lambda a, b: (yf[a:b], dxf[a:b]), (yf, dxf))
    return _split_call("_relu_grad", y.size, y.size, lambda a, b: (yf[a:b], dyf[a:b], dxf[a:b]), (yf, dyf, dxf))


def max_pool_grad(x: np.ndarray, y: np.ndarray, dy: np.ndarray, dx: np.ndarray, geo) -> bool:
    """The input gradient ``dx`` of a 2-D NCHW max pooling of ``x`` into ``y`` with geometry ``geo``
    (framework.kernels.geometry.Geometry): zero, then ``dy`` added to every cell equal to its window's max."""
    if x.ndim != 4 or len(geo.kernel) != 2 or x.size == 0 or y.size == 0 or dx is x or dx is dy:
        return False
    if dy.shape != y.shape or dx.shape != x.shape or not _fits(x, y, dy, dx):
        return False
    n, c, h, w = x.shape
    x3, dx3 = x.reshape(n * c, h, w), dx.reshape(n * c, h, w)
    y3, dy3 = y.reshape(n * c, *y.shape[2:]), dy.reshape(n * c, *y.shape[2:])
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geo.kernel, geo.stride, geo.head, geo.dilation
    geometry = (kh, kw, sh, sw, ph, pw, dh, dw)
    work = y.size * kh * kw
    args_of = lambda a, b: (x3[a:b], y3[a:b], dy3[a:b], dx3[a:b], *geometry)  # noqa: E731
    return _split_call("_max_pool_grad", n * c, work, args_of, (x3, y3, dy3, dx3), geometry)


def momentum_update(g: np.ndarray, m: np.ndarray, p: np.ndarray, lr: np.ndarray, mu: float, nesterov: bool) -> bool:
    """MomentumSGDUpdate in place, in one pass (numpy's values bit for bit): ``m = mu m + lr g``, ``g`` the
    step (``m``, or ``lr g + mu m`` with Nesterov), ``p -= g``; float32 only, lr a float32 scalar."""
    if g.shape != m.shape or g.shape != p.shape or g.size == 0 or lr.dtype != np.float32 or lr.size != 1:
        return False
    if not _fits(g, m, p) or np.may_share_memory(g, m) or np.may_share_memory(g, p) or np.may_share_memory(m, p):
        return False
    gf, mf, pf = g.reshape(-1), m.reshape(-1), p.reshape(-1)
    args = (np.float32(lr.reshape(-1)[0]), np.float32(mu), bool(nesterov))
    # the task reads lr and mu as float64 bits (each float32 value exactly)
    scalars = (*np.array(args[:2], np.float64).view(np.int64), int(nesterov))
    return _split_call(
        "_momentum_update", g.size, 5 * g.size, lambda a, b: (gf[a:b], mf[a:b], pf[a:b], *args), (gf, mf, pf), scalars
    )


def scale_shift(x: np.ndarray, alpha: np.ndarray, beta: np.ndarray, y: np.ndarray, relu: int) -> bool:
    """``y = x alpha + beta`` per channel (then window_jit.scale_shift's ``relu``), split by images over the
    intra-op threads as a native job; False (nothing done) where it does not split (one thread, little work, no
    native task): the caller makes its one call."""
    if x.ndim < 2 or x.size == 0 or y.shape != x.shape or not _fits(x, alpha, beta, y):
        return False
    parts = work_split(x.shape[0], x.size)
    if parts is None:
        return False
    mod = _module()
    return _native_job(mod, "_scale_shift", parts, (_nc_p(x), alpha, beta, _nc_p(y)), (int(relu),))


def add_job(a: np.ndarray, b: np.ndarray, out: np.ndarray):
    """A zero-argument callable making ``out = a + b`` (float32, contiguous, one size) as a native job split
    over the intra-op threads, bound to these arrays; None where it would not split (one thread, little work, no
    native task)."""
    return _elementwise_job("_add", (a, b, out))


def relu_job(x: np.ndarray, y: np.ndarray):
    """Like ``add_job``: ``y = max(x, 0)`` as numpy's clip(x, 0, inf) computes it (NaN and -0.0 stay; y may be x)."""
    return _elementwise_job("_relu", (x, y))


def _elementwise_job(fn_name: str, arrays: tuple):
    """``fn_name``'s native task over flat ranges of ``arrays`` (float32, contiguous, one size), bound to them;
    None where it would not split."""
    out = arrays[-1]
    if not (out.size > 0 and all(a.size == out.size for a in arrays) and _fits(*arrays)):
        return None
    parts = work_split(out.size, out.size)
    mod = _module()
    if parts is None or mod is None or _task_address(mod, fn_name) is None:
        return None
    blk = _block(mod, parts, tuple(a.reshape(-1) for a in arrays), ())
    address, data, n = _task_address(mod, fn_name), blk.data, len(parts)
    blk.keep = arrays
    return lambda: native_pool.run(address, data, n)


def softmax_xent_job(x: np.ndarray, p: np.ndarray, labels: np.ndarray, picked: np.ndarray):
    """A zero-argument callable making ``p`` the softmax of the rows of 2-D ``x`` and ``picked[i]`` the log of
    ``p[i, labels[i]]`` (from x: x - max - log sum), a row in one pass from memory (bn_train_kernels'
    ``_softmax_xent``), the rows split over the intra-op threads as a native job; bound to these arrays. None
    where it does not apply (not float32 or contiguous, labels not int32, no compiled kernels): the caller keeps
    numpy's passes. The labels must be in [0, D) (the caller checks them first)."""
    if (
        x.ndim != 2
        or p.shape != x.shape
        or x.size == 0
        or labels.shape != (x.shape[0],)
        or picked.shape != labels.shape
    ):
        return None
    if labels.dtype != np.int32 or not labels.flags.c_contiguous or not _fits(x, p, picked):
        return None
    mod = _module()
    address = _task_address(mod, "_softmax_xent") if mod is not None else None
    if address is None:
        return None
    n = x.shape[0]
    parts = work_split(n, x.size) or [(0, n)]
    data, keep = _block(mod, parts, (x, p, picked, labels), ()).data, (x, p, picked, labels)

    def job() -> None:
        native_pool.run(address, data, len(parts))

    job.keep = keep  # type: ignore[attr-defined]
    return job


def available() -> bool:
    """Whether the compiled kernels may run in this process (the first call imports numba)."""
    return _module() is not None and FAMILY not in kernel_support.disabled()


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels with the argument types the ops pass, on tiny
    arrays; nothing without numba. A failed compile disables the family (one RuntimeWarning)."""
    from framework.kernels.geometry import Geometry

    x, c = np.zeros((1, 2, 2, 2), np.float32), np.zeros(2, np.float32)
    if available() and moments(x, c, c.copy()) and grad_sums(x, x, c, c.copy(), c.copy()):
        affine2(x, x.copy(), c, c, c, np.empty_like(x))
        relu_grad(x, x.copy(), np.empty_like(x))
        d = x.copy()
        relu_grad(x, d, d)  # the in-place form
        y = np.zeros((1, 2, 1, 1), np.float32)
        geo = Geometry((2, 2), (2, 2), (1, 1), (1, 1), (0, 0), (0, 0), (1, 1))
        max_pool_grad(x, y, y.copy(), np.empty_like(x), geo)
        momentum_update(x.copy(), x.copy(), x.copy(), np.ones(1, np.float32), 0.9, True)
