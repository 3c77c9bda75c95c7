"""Fully connected layers: FC and FCTransposed, with their gradient ops.

FC is the hot op of MLPs. ``X`` is flattened to (M, K) at ``axis`` and ``W``
to (N, K) at ``axis_w``; Y = X W^T + b is written straight into the output
buffer by one GEMM, the bias added in place.

Packed weights: Caffe2's (N, K) layout used as ``X @ W.T`` runs 1.2-2x
slower in OpenBLAS than a contiguous (K, N) copy for batches of 4-128. FC
keeps such a copy of W^T and reuses it while the weight tensor's stamp matches
(framework.memory.binding: the same object over the same storage at the same
``version``; every ``mutable_data``/``output()`` write bumps it). The copy
belongs to the workspace (``Workspace.packs``) and is freed with it. A weight
is packed only once it has been seen unchanged on two
consecutive runs, so training (W changes every step) never pays for the copy
and inference packs once. Writes that bypass the Tensor (e.g. through a
numpy view obtained from ``data()``) are not seen: use ``feed_blob`` or ops.
Weights over 4 MiB are never copied (see ``_PACK_MAX_BYTES``): Y^T = W X^T on W's
own layout, transposed into Y with the bias added (Y = X W^T directly when 2 M >= K). Packed copies and that Y^T
buffer come from the allocator (the memory reporter counts them).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.kernels import native_gemm
from framework.memory.allocator import allocate_array
from framework.memory.binding import matches, stamp
from framework.ops.gradient import gradient
from framework.ops.nn.axes import canonical_axis
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, Cost, TensorSpec
from framework.runtime.parallel import get_num_threads, run_parallel, split

_PACK_MIN_ROWS = 2  # batch 1 is a GEMV: W's own row-major layout is already the best one
# Weights larger than this are never copied: Y^T = W X^T on W's own layout, then Y = Y^T^T + b in one
# pass, is faster than the packed copy there and costs no second copy of the weights; smaller weights
# keep the packed copy, which is faster for them. With many rows (2 M >= K: the output outweighs the
# GEMM's reads of W, as a language model's decoder over all time steps) that transposing pass costs more
# than it saves, and Y = X W^T runs on W's layout directly.
_PACK_MAX_BYTES = 4 << 20
# With several intra-op threads, a weight of at least this many bytes is split by output features (rows
# of W), each worker reading its part: streaming W from memory bounds these GEMMs. A smaller weight is split
# too when the product has at least SPLIT_MIN_MACS multiply-adds (an input projection over all time steps);
# smaller products run as one call, since waking a pool thread costs tens of microseconds.
SPLIT_MIN_BYTES = 4 << 20
SPLIT_MIN_MACS = 1 << 25
# Where the split runs as a native job (float32, kernels.native_gemm: a few microseconds a split instead of
# 60-110), products from this many multiply-adds split: a recurrent step's 20 x 256 by 256 x 1024 (5.2 M)
# runs 1.4x faster on two threads, 32 x 256 x 256 (2.1 M) no faster (bench.split_products).
NATIVE_SPLIT_MIN_MACS = 1 << 22


def _worth_splitting(w_bytes: int, m: int, k: int, n: int) -> bool:
    return w_bytes >= SPLIT_MIN_BYTES or m * k * n >= SPLIT_MIN_MACS


def fc_dims(x_shape: tuple, w_shape: tuple, axis: int, axis_w: int, transposed: bool, where: str) -> tuple:
    """(M, K, N, Y shape) of FC/FCTransposed; ShapeError naming ``where`` on a mismatch."""
    ax = canonical_axis(axis, len(x_shape), f"{where}: X {list(x_shape)}")
    axw = canonical_axis(axis_w, len(w_shape), f"{where}: W {list(w_shape)}")
    m, k = math.prod(x_shape[:ax]), math.prod(x_shape[ax:])
    w_outer, w_inner = math.prod(w_shape[:axw]), math.prod(w_shape[axw:])
    n, wk = (w_inner, w_outer) if transposed else (w_outer, w_inner)
    if wk != k:
        layout = "(K, N)" if transposed else "(N, K)"
        raise ShapeError(
            f"{where}: X {list(x_shape)} flattened at axis {axis} is ({m}, {k}) but W {list(w_shape)} flattened "
            f"at axis_w {axis_w} is {(w_outer, w_inner)}, expected {layout} with K = {k}"
        )
    return m, k, n, tuple(x_shape[:ax]) + (n,)


def _infer_fc(transposed: bool):
    def infer(args, ins):
        x, w = ins[0], ins[1]
        if not (x.known and w.known):
            return [TensorSpec(None, x.dtype)]
        _, _, _, shape = fc_dims(tuple(x.shape), tuple(w.shape), args.axis, args.axis_w, transposed, "FC")
        return [TensorSpec(shape, x.dtype)]

    return infer


def _cost_fc(transposed: bool):
    def cost(args, ins, outs):
        x, w = ins[0], ins[1]
        if not (x.known and w.known):
            return Cost()
        m, k, n, _ = fc_dims(tuple(x.shape), tuple(w.shape), args.axis, args.axis_w, transposed, "FC")
        item = x.dtype.itemsize if x.dtype is not None else 4
        params = (k * n + n) * item
        return Cost(flops=2.0 * m * k * n + m * n, bytes_moved=(m * k + m * n) * item + params, params_bytes=params)

    return cost


_FC_ARGS = [
    Arg("axis", INT, 1, "X is flattened to 2D (M, K) at this axis"),
    Arg("axis_w", INT, 1, "W is flattened to 2D at this axis"),
    Arg("float16_compute", BOOL, False, "accepted for compatibility; compute is in the input dtype"),
]


class _FCBase(Operator):
    transposed = False

    def setup(self) -> None:
        self._x = self._w = self._b = self._y = None  # arrays the views below were made from
        self._pk_stamp = None  # the weight tensor's values last seen (framework.memory.binding.Stamp)
        self._packed = None  # contiguous (K, N) buffer for W^T
        self._packed_fresh = False  # the buffer holds W as stamped by _pk_stamp
        self._wide = False  # Y^T = W X^T on a large W (see _PACK_MAX_BYTES)
        self._job = self._job_key = None  # the split as a native job, and the (weight, Y, parts) it was built on

    def _bind(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
        """Check shapes and dtypes once per new input arrays; precompute the 2D views the GEMM uses."""
        if x.dtype != w.dtype or x.dtype != b.dtype or x.dtype.kind not in "fiu":
            raise TypeMismatchError(
                f"{self.describe()}: X '{self.input_names[0]}' ({x.dtype}), W '{self.input_names[1]}' ({w.dtype}) "
                f"and b '{self.input_names[2]}' ({b.dtype}) must have one numeric dtype"
            )
        m, k, n, shape = fc_dims(x.shape, w.shape, self.args.axis, self.args.axis_w, self.transposed, self.describe())
        if b.size != n:
            raise ShapeError(
                f"{self.describe()}: bias '{self.input_names[2]}' has shape {list(b.shape)} ({b.size} values), "
                f"expected {n} values (W '{self.input_names[1]}' {list(w.shape)} gives N = {n})"
            )
        self._x, self._w, self._b, self._y = x, w, b, None
        self._m, self._n, self._shape, self._dtype = m, n, shape, x.dtype
        self._big = _worth_splitting(w.nbytes, m, k, n)
        self._macs = m * k * n
        self._job = self._job_key = None
        self._native = None  # whether its split may run as a native job (looked up on the first split)
        self._x2 = x.reshape(m, k)
        self._b1 = b.reshape(n)
        self._w_view = w.reshape(k, n) if self.transposed else w.reshape(n, k).T
        self._may_pack = not self.transposed and m >= _PACK_MIN_ROWS
        if self._may_pack and w.nbytes > _PACK_MAX_BYTES:
            self._may_pack = False
            self._wide = 2 * m < k  # Y^T = W X^T (see _PACK_MAX_BYTES)
        else:
            self._wide = False
        if self._wide:
            self._w2 = w.reshape(n, k)
            self._yt = allocate_array((n, m), x.dtype)
        self._packed_fresh = False

    def _weight(self) -> np.ndarray:
        """W as a (K, N) operand: the packed contiguous copy once W has been seen unchanged, else a view.

        FC ops reading the same weight tensor (an RNN step net bound once per time step) share
        one packed copy per tensor version (the workspace's ``packs``), so the GEMMs stay in cache."""
        t = self.inputs[1].held
        if matches(self._pk_stamp, t):
            if not self._packed_fresh:
                wt = self._w_view
                packs, key = self.workspace.packs, ("FC", wt.shape, wt.dtype)
                shared = packs.get(t, key)
                if shared is not None:
                    self._packed = shared
                else:
                    packed = self._packed
                    if packed is None or packed.shape != wt.shape or packed.dtype != wt.dtype or packs.holds(packed):
                        packed = self._packed = allocate_array(wt.shape, wt.dtype)
                    np.copyto(packed, wt)
                    packs.put(t, key, packed)
                self._packed_fresh = True
            return self._packed
        self._pk_stamp, self._packed_fresh = stamp(t), False
        return self._w_view

    def run(self) -> None:
        x, w, b = self.input(0), self.input(1), self.input(2)
        if x is not self._x or w is not self._w or b is not self._b:
            self._bind(x, w, b)
        y = self.output(0, self._shape, self._dtype)
        if y is not self._y:
            self._y, self._y2 = y, y.reshape(self._m, self._n)
        parts = self._parts()
        if parts is None or not self._run_split(parts):
            self._whole()

    def _whole(self) -> None:
        """The product in one call on this thread."""
        y2 = self._y2
        if self._wide:
            np.matmul(self._w2, self._x2.T, out=self._yt)
            np.add(self._yt.T, self._b1, out=y2)
            return
        np.matmul(self._x2, self._weight() if self._may_pack else self._w_view, out=y2)
        np.add(y2, self._b1, out=y2)

    def _parts(self):
        """Output-feature ranges per worker when the product is split over the threads (``_worth_splitting``,
        or from NATIVE_SPLIT_MIN_MACS where it runs as a native job), else None."""
        if not self._big and self._macs < NATIVE_SPLIT_MIN_MACS:  # first: the check every FC run makes
            return None
        threads = get_num_threads()
        if threads < 2 or self._n < 32 * threads:
            return None
        if self._native is None:
            self._native = self._dtype == np.float32 and native_gemm.available()
        if not self._big and not self._native:
            return None
        return [(a // 16 * 16, b // 16 * 16 if b < self._n else b) for a, b in split(self._n, threads)]

    def _run_split(self, parts) -> bool:
        """The product split by output features: a native job where one can be built, else Python tasks for a
        product ``_worth_splitting``; False (nothing done) for a smaller one whose job could not be built."""
        wk = None if self._wide else (self._weight() if self._may_pack else self._w_view)
        key = self._job_key
        if key is None or key[0] is not wk or key[1] is not self._y2 or key[2] != parts:
            self._job, self._job_key = _native_columns(self, wk, parts), (wk, self._y2, parts)
        if self._job is not None:
            self._job()
        elif self._big:
            run_parallel([_columns(self, wk, n0, n1) for n0, n1 in parts], steal=True)
        else:
            return False
        return True

    def compile(self):
        """A closure doing run()'s work on the arrays bound now (see framework.net.program)."""
        if self._x is None or self._y is None:
            return None
        parts = self._parts()
        if parts is not None:
            if self._may_pack:  # the packed copy's version is checked every call
                return lambda: self._run_split(parts) or self._whole()
            wk = None if self._wide else self._w_view
            job = _native_columns(self, wk, parts)
            if job is not None:
                return job
            if self._big:
                cols = [_columns(self, wk, n0, n1) for n0, n1 in parts]
                return lambda: run_parallel(cols, steal=True)
        x2, y2, b1, w_view, matmul, add = self._x2, self._y2, self._b1, self._w_view, np.matmul, np.add
        if self._wide:
            w2, xt, yt, ytt = self._w2, self._x2.T, self._yt, self._yt.T

            def fc_wide() -> None:
                matmul(w2, xt, out=yt)
                add(ytt, b1, out=y2)

            return fc_wide
        if self._may_pack:
            weight = self._weight

            def fc_packed() -> None:
                matmul(x2, weight(), out=y2)
                add(y2, b1, out=y2)

            return fc_packed

        def fc() -> None:
            matmul(x2, w_view, out=y2)
            add(y2, b1, out=y2)

        return fc


def _native_columns(op: _FCBase, wk, parts):
    """The split of ``_columns`` as one native job (kernels.native_gemm: numpy's own BLAS calls, then the bias);
    None where it cannot run so (not float32, an operand BLAS cannot take, no compiled kernels)."""
    if not op._native:  # set by _parts, which made ``parts``
        return None
    job = native_gemm.Job(len(parts))
    for t, (n0, n1) in enumerate(parts):
        y, b = op._y2[:, n0:n1], op._b1[n0:n1]
        if wk is None:
            ok = job.matmul(t, op._w2[n0:n1], op._x2.T, op._yt[n0:n1]) and job.add_transposed(t, op._yt[n0:n1], b, y)
        else:
            ok = job.matmul(t, op._x2, wk[:, n0:n1], y) and job.add_bias(t, y, b)
        if not ok:
            return None
    return job.build()


def _columns(op: _FCBase, wk, n0: int, n1: int):
    """One worker's output features n0:n1 of an FC run, bound to the op's current arrays: from ``wk``
    (K, N), or with ``wk`` None in the wide form (Y^T rows from W's rows)."""
    x2, y2, b1 = op._x2, op._y2[:, n0:n1], op._b1[n0:n1]
    if wk is None:
        w2, xt, yt = op._w2[n0:n1], op._x2.T, op._yt[n0:n1]

        def wide() -> None:
            np.matmul(w2, xt, out=yt)
            np.add(yt.T, b1, out=y2)

        return wide
    wc = wk[:, n0:n1]

    def columns() -> None:
        np.matmul(x2, wc, out=y2)
        np.add(y2, b1, out=y2)

    return columns


def _fc_op(name: str, transposed: bool, w_doc: str):
    """Register FC or FCTransposed (they differ only in W's layout)."""
    return register_op(
        name,
        inputs=3,
        input_docs=[("X", "input, flattened to (M, K) at axis"), ("W", w_doc), ("b", "bias of N values")],
        output_docs=[("Y", "X.dims[:axis] + [N]")],
        args=_FC_ARGS,
        infer=_infer_fc(transposed),
        cost=_cost_fc(transposed),
        category="linalg",
    )


@_fc_op("FC", False, "weights, flattened to (N, K) at axis_w")
class FC(_FCBase):
    """Fully connected layer: Y = X W^T + b, with X flattened to (M, K) at ``axis`` and W to (N, K) at ``axis_w``."""


@_fc_op("FCTransposed", True, "weights already transposed, flattened to (K, N) at axis_w")
class FCTransposed(_FCBase):
    """Fully connected layer with the weight given as (K, N): Y = X W + b."""

    transposed = True


def _infer_fc_grad(transposed: bool):
    def infer(args, ins):
        x, w, dy = ins[0], ins[1], ins[2]
        n = None
        if w.known:
            axw = canonical_axis(args.axis_w, len(w.shape), "FCGradient W")
            n = math.prod(w.shape[axw:]) if transposed else math.prod(w.shape[:axw])
        db = TensorSpec((n,) if n is not None else None, dy.dtype if dy.dtype is not None else w.dtype)
        return [w, db, x]

    return infer


class _FCGradientBase(Operator):
    transposed = False

    def setup(self) -> None:
        self._x = self._w = self._dy = None
        self._outs = None
        self._split_key = self._split_run = None  # run()'s split, and the (dW, db, dX, threads) it is bound to

    def _bind(self, x: np.ndarray, w: np.ndarray, dy: np.ndarray) -> None:
        if not (x.dtype == w.dtype == dy.dtype):
            raise TypeMismatchError(
                f"{self.describe()}: X '{self.input_names[0]}' ({x.dtype}), W '{self.input_names[1]}' ({w.dtype}) "
                f"and dY '{self.input_names[2]}' ({dy.dtype}) must have one dtype"
            )
        m, k, n, shape = fc_dims(x.shape, w.shape, self.args.axis, self.args.axis_w, self.transposed, self.describe())
        if dy.shape != shape:
            raise ShapeError(
                f"{self.describe()}: dY '{self.input_names[2]}' has shape {list(dy.shape)}, "
                f"expected {list(shape)} (the FC output for X {list(x.shape)}, W {list(w.shape)})"
            )
        self._x, self._w, self._dy, self._outs = x, w, dy, None
        self._split_key = self._split_run = None
        self._dims = (m, k, n)
        self._x2, self._dy2 = x.reshape(m, k), dy.reshape(m, n)
        self._dy2_t = self._dy2.T
        self._x2_t = self._x2.T
        self._w2 = w.reshape(k, n).T if self.transposed else w.reshape(n, k)
        self._ones = np.ones(m, dy.dtype)

    def run(self) -> None:
        x, w, dy = self.input(0), self.input(1), self.input(2)
        if x is not self._x or w is not self._w or dy is not self._dy:
            self._bind(x, w, dy)
        m, k, n = self._dims
        dw = self.output(0, w.shape, w.dtype)
        db = self.output(1, (n,), dy.dtype)
        dx = self.output(2, x.shape, x.dtype) if len(self.outputs) > 2 else None
        outs = self._outs
        if outs is None or dw is not outs[0] or db is not outs[1] or dx is not outs[2]:
            self._outs = (dw, db, dx)
            self._dw2 = dw.reshape(k, n) if self.transposed else dw.reshape(n, k)
            self._dx2 = dx.reshape(m, k) if dx is not None else None
        key, threads = self._split_key, get_num_threads()
        if key is None or key[0] is not dw or key[1] is not db or key[2] is not dx or key[3] != threads:
            self._split_key, self._split_run = (dw, db, dx, threads), self._split()  # bound to these arrays
        if self._split_run is not None:
            self._split_run()
            return
        if self.transposed:
            np.matmul(self._x2_t, self._dy2, out=self._dw2)
        else:
            np.matmul(self._dy2_t, self._x2, out=self._dw2)
        np.matmul(self._ones, self._dy2, out=db)  # column sums as a GEMV
        if dx is not None:
            np.matmul(self._dy2, self._w2, out=self._dx2)

    def _partition(self):
        """(output-feature ranges, row ranges) per worker when the work is split over the intra-op threads,
        else None: a weight of at least SPLIT_MIN_BYTES or a product of at least SPLIT_MIN_MACS (FCGradient
        only: its dW rows are contiguous), or from NATIVE_SPLIT_MIN_MACS where the split runs as a native job.
        dW and db are split by output features, dX by rows; every worker writes its own disjoint parts (BLAS
        may block a part's products otherwise than the whole's: float rounding)."""
        m, k, n = self._dims
        if self.transposed:
            return None
        threads = get_num_threads()
        if threads < 2 or n < 32 * threads or m < threads:
            return None
        if not _worth_splitting(self._w.nbytes, m, k, n):
            if m * k * n < NATIVE_SPLIT_MIN_MACS or self._x.dtype != np.float32 or not native_gemm.available():
                return None
        cols = [(a // 16 * 16, b // 16 * 16 if b < n else b) for a, b in split(n, threads)]
        return cols, split(m, threads)

    def _parallel_tasks(self):
        """Per-worker closures of the split (``_partition``), else None."""
        parts = self._partition()
        if parts is None:
            return None
        dy2, dy2_t, x2, w2, ones = self._dy2, self._dy2_t, self._x2, self._w2, self._ones
        dw2, db, dx2 = self._dw2, self._outs[1], self._dx2

        def task(n0: int, n1: int, m0: int, m1: int):
            def part() -> None:
                np.matmul(dy2_t[n0:n1], x2, out=dw2[n0:n1])
                np.matmul(ones, dy2[:, n0:n1], out=db[n0:n1])
                if dx2 is not None:
                    np.matmul(dy2[m0:m1], w2, out=dx2[m0:m1])

            return part

        return [task(*c, *r) for c, r in zip(*parts)]

    def _native_job(self):
        """The split (``_partition``) as one native job (kernels.native_gemm), else None."""
        parts = self._partition()
        if parts is None or self._x.dtype != np.float32 or not native_gemm.available():
            return None
        dy2, dy2_t, x2, w2, ones = self._dy2, self._dy2_t, self._x2, self._w2, self._ones
        dw2, db, dx2 = self._dw2, self._outs[1], self._dx2
        job = native_gemm.Job(len(parts[0]))
        for t, ((n0, n1), (m0, m1)) in enumerate(zip(*parts)):
            ok = job.matmul(t, dy2_t[n0:n1], x2, dw2[n0:n1]) and job.matmul(t, ones, dy2[:, n0:n1], db[n0:n1])
            if not ok or (dx2 is not None and not job.matmul(t, dy2[m0:m1], w2, dx2[m0:m1])):
                return None
        return job.build()

    def _split(self):
        """A zero-argument callable running the split (a native job, else Python tasks for work
        ``_worth_splitting``), else None."""
        job = self._native_job()
        if job is not None:
            return job
        m, k, n = self._dims
        tasks = self._parallel_tasks() if _worth_splitting(self._w.nbytes, m, k, n) else None
        return None if tasks is None else lambda: run_parallel(tasks, steal=True)

    def compile(self):
        """A closure doing run()'s work on the arrays bound now (see framework.net.program)."""
        if self._outs is None:
            return None
        split_run = self._split()
        if split_run is not None:
            return split_run
        matmul, ones, dy2, x2, w2 = np.matmul, self._ones, self._dy2, self._x2, self._w2
        dw2, db, dx2 = self._dw2, self._outs[1], self._dx2
        a, b = (self._x2_t, dy2) if self.transposed else (self._dy2_t, x2)

        def fc_grad() -> None:
            matmul(a, b, out=dw2)
            matmul(ones, dy2, out=db)
            if dx2 is not None:
                matmul(dy2, w2, out=dx2)

        return fc_grad


_FC_GRAD_DOCS = dict(
    inputs=3,
    outputs=(2, 3),
    input_docs=[("X", "FC input"), ("W", "FC weights"), ("dY", "gradient of Y")],
    output_docs=[("dW", "gradient of W"), ("db", "gradient of b"), ("dX", "gradient of X (optional)")],
    category="linalg",
    private=True,
)


@register_op("FCGradient", args=_FC_ARGS, infer=_infer_fc_grad(False), **_FC_GRAD_DOCS)
class FCGradient(_FCGradientBase):
    """dW = dY^T X, db = column sums of dY, dX = dY W (all on the 2D flattenings)."""


@register_op("FCTransposedGradient", args=_FC_ARGS, infer=_infer_fc_grad(True), **_FC_GRAD_DOCS)
class FCTransposedGradient(_FCGradientBase):
    """dW = X^T dY, db = column sums of dY, dX = dY W^T (all on the 2D flattenings)."""

    transposed = True


@gradient("FC")
def _fc_grad(g):
    return [g.op("FCGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(2), g.GI(0)])]


@gradient("FCTransposed")
def _fc_transposed_grad(g):
    return [g.op("FCTransposedGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(2), g.GI(0)])]
