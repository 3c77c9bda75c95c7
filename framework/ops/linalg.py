"""Linear algebra: FC, FCTransposed, MatMul, BatchMatMul, DotProduct, with gradients.

FC is the hot op of MLPs. ``X`` is flattened to (M, K) at ``axis`` and ``W``
to (N, K) at ``axis_w``; Y = X W^T + b is written straight into the output
buffer by one GEMM, the bias added in place.

Packed weights: Caffe2's (N, K) layout used as ``X @ W.T`` runs 1.2-2x
slower in OpenBLAS than a contiguous (K, N) copy for batches of 4-128. FC
keeps such a copy of W^T and reuses it while the weight tensor is the same
object at the same ``version`` (every ``mutable_data``/``output()`` write
bumps it). A weight is packed only once it has been seen unchanged on two
consecutive runs, so training (W changes every step) never pays for the copy
and inference packs once. Writes that bypass the Tensor (e.g. through a
numpy view obtained from ``data()``) are not seen: use ``feed_blob`` or ops.
"""

from __future__ import annotations

import numpy as np

from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, Cost, TensorSpec, nbytes_of

_PACK_MIN_ROWS = 2  # batch 1 is a GEMV: W's own row-major layout is already the best one


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def canonical_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ShapeError(f"{what}: axis {axis} is out of range for {ndim} dimensions")
    return axis + ndim if axis < 0 else axis


def fc_dims(x_shape: tuple, w_shape: tuple, axis: int, axis_w: int, transposed: bool, where: str) -> tuple:
    """(M, K, N, Y shape) of FC/FCTransposed; ShapeError naming ``where`` on a mismatch."""
    ax = canonical_axis(axis, len(x_shape), f"{where}: X {list(x_shape)}")
    axw = canonical_axis(axis_w, len(w_shape), f"{where}: W {list(w_shape)}")
    m, k = _prod(x_shape[:ax]), _prod(x_shape[ax:])
    w_outer, w_inner = _prod(w_shape[:axw]), _prod(w_shape[axw:])
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
        self._pk_tensor = None  # weight tensor the packed copy was made from
        self._pk_version = -1
        self._packed = None  # contiguous (K, N) buffer for W^T
        self._packed_fresh = False  # the buffer holds W at (_pk_tensor, _pk_version)

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
        self._x2 = x.reshape(m, k)
        self._b1 = b.reshape(n)
        self._w_view = w.reshape(k, n) if self.transposed else w.reshape(n, k).T
        self._may_pack = not self.transposed and m >= _PACK_MIN_ROWS
        self._packed_fresh = False

    def _weight(self) -> np.ndarray:
        """W as a (K, N) operand: the packed contiguous copy once W has been seen unchanged, else a view."""
        t = self.inputs[1]._obj
        if t is self._pk_tensor and t.version == self._pk_version:
            if not self._packed_fresh:
                wt = self._w_view
                packed = self._packed
                if packed is None or packed.shape != wt.shape or packed.dtype != wt.dtype:
                    packed = self._packed = np.empty(wt.shape, wt.dtype)
                np.copyto(packed, wt)
                self._packed_fresh = True
            return self._packed
        self._pk_tensor, self._pk_version, self._packed_fresh = t, t.version, False
        return self._w_view

    def run(self) -> None:
        x, w, b = self.input(0), self.input(1), self.input(2)
        if x is not self._x or w is not self._w or b is not self._b:
            self._bind(x, w, b)
        y = self.output(0, self._shape, self._dtype)
        if y is not self._y:
            self._y, self._y2 = y, y.reshape(self._m, self._n)
        y2 = self._y2
        np.matmul(self._x2, self._weight() if self._may_pack else self._w_view, out=y2)
        np.add(y2, self._b1, out=y2)

    def compile(self):
        """A closure doing run()'s work on the arrays bound now (see framework.net.program)."""
        if self._x is None or self._y is None:
            return None
        x2, y2, b1, w_view, matmul, add = self._x2, self._y2, self._b1, self._w_view, np.matmul, np.add
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


@register_op(
    "FC",
    inputs=3,
    input_docs=[
        ("X", "input, flattened to (M, K) at axis"),
        ("W", "weights, flattened to (N, K) at axis_w"),
        ("b", "bias of N values"),
    ],
    output_docs=[("Y", "X.dims[:axis] + [N]")],
    args=_FC_ARGS,
    infer=_infer_fc(False),
    cost=_cost_fc(False),
    category="linalg",
)
class FC(_FCBase):
    """Fully connected layer: Y = X W^T + b, with X flattened to (M, K) at ``axis`` and W to (N, K) at ``axis_w``."""


@register_op(
    "FCTransposed",
    inputs=3,
    input_docs=[
        ("X", "input, flattened to (M, K) at axis"),
        ("W", "weights already transposed, flattened to (K, N) at axis_w"),
        ("b", "bias of N values"),
    ],
    output_docs=[("Y", "X.dims[:axis] + [N]")],
    args=_FC_ARGS,
    infer=_infer_fc(True),
    cost=_cost_fc(True),
    category="linalg",
)
class FCTransposed(_FCBase):
    """Fully connected layer with the weight given as (K, N): Y = X W + b."""

    transposed = True


def _infer_fc_grad(transposed: bool):
    def infer(args, ins):
        x, w, dy = ins[0], ins[1], ins[2]
        n = None
        if w.known:
            axw = canonical_axis(args.axis_w, len(w.shape), "FCGradient W")
            n = _prod(w.shape[axw:]) if transposed else _prod(w.shape[:axw])
        db = TensorSpec((n,) if n is not None else None, dy.dtype if dy.dtype is not None else w.dtype)
        return [w, db, x]

    return infer


class _FCGradientBase(Operator):
    transposed = False

    def setup(self) -> None:
        self._x = self._w = self._dy = None
        self._outs = None

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
        if self.transposed:
            np.matmul(self._x2_t, self._dy2, out=self._dw2)
        else:
            np.matmul(self._dy2_t, self._x2, out=self._dw2)
        np.matmul(self._ones, self._dy2, out=db)  # column sums as a GEMV
        if dx is not None:
            np.matmul(self._dy2, self._w2, out=self._dx2)

    def compile(self):
        """A closure doing run()'s work on the arrays bound now (see framework.net.program)."""
        if self._outs is None:
            return None
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


@register_op(
    "FCTransposedGradient",
    args=_FC_ARGS,
    infer=_infer_fc_grad(True),
    **_FC_GRAD_DOCS,
)
class FCTransposedGradient(_FCGradientBase):
    """dW = X^T dY, db = column sums of dY, dX = dY W^T (all on the 2D flattenings)."""

    transposed = True


@gradient("FC")
def _fc_grad(g):
    return [g.op("FCGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(2), g.GI(0)])]


@gradient("FCTransposed")
def _fc_transposed_grad(g):
    return [g.op("FCTransposedGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(2), g.GI(0)])]


# -- MatMul -----------------------------------------------------------------------------------


def matmul_dims(a_shape: tuple, b_shape: tuple, args, where: str) -> tuple:
    """(M, K, N, A 2D shape, B 2D shape) of MatMul."""
    ax = canonical_axis(args.axis_a, len(a_shape), f"{where}: A {list(a_shape)}")
    bx = canonical_axis(args.axis_b, len(b_shape), f"{where}: B {list(b_shape)}")
    a2 = (_prod(a_shape[:ax]), _prod(a_shape[ax:]))
    b2 = (_prod(b_shape[:bx]), _prod(b_shape[bx:]))
    m, ka = (a2[1], a2[0]) if args.trans_a else a2
    kb, n = (b2[1], b2[0]) if args.trans_b else b2
    if ka != kb:
        raise ShapeError(
            f"{where}: A {list(a_shape)} as {a2}{' transposed' if args.trans_a else ''} and "
            f"B {list(b_shape)} as {b2}{' transposed' if args.trans_b else ''} do not share K ({ka} vs {kb})"
        )
    return m, ka, n, a2, b2


def _infer_matmul(args, ins):
    a, b = ins[0], ins[1]
    if not (a.known and b.known):
        return [TensorSpec(None, a.dtype)]
    m, _, n, _, _ = matmul_dims(tuple(a.shape), tuple(b.shape), args, "MatMul")
    return [TensorSpec((m, n), a.dtype)]


def _cost_matmul(args, ins, outs):
    a, b = ins[0], ins[1]
    if not (a.known and b.known):
        return Cost()
    m, k, n, _, _ = matmul_dims(tuple(a.shape), tuple(b.shape), args, "MatMul")
    item = a.dtype.itemsize if a.dtype is not None else 4
    return Cost(flops=2.0 * m * k * n, bytes_moved=(m * k + k * n + m * n) * item)


@register_op(
    "MatMul",
    inputs=2,
    input_docs=[("A", "matrix (M, K), flattened to 2D at axis_a"), ("B", "matrix (K, N), flattened at axis_b")],
    output_docs=[("Y", "A B, shape (M, N)")],
    args=[
        Arg("axis_a", INT, 1, "A is flattened to 2D at this axis"),
        Arg("axis_b", INT, 1, "B is flattened to 2D at this axis"),
        Arg("trans_a", INT, 0, "1: transpose A (after flattening)"),
        Arg("trans_b", INT, 0, "1: transpose B (after flattening)"),
    ],
    infer=_infer_matmul,
    cost=_cost_matmul,
    category="linalg",
)
class MatMul(Operator):
    """Matrix product Y = op(A) op(B) of the 2D flattenings of A and B (op = optional transpose)."""

    def setup(self) -> None:
        self._key = None

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        key = (a.shape, b.shape, a.dtype, b.dtype)
        if key != self._key:
            if a.dtype != b.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: A '{self.input_names[0]}' is {a.dtype} but B '{self.input_names[1]}' "
                    f"is {b.dtype}"
                )
            self._dims = matmul_dims(a.shape, b.shape, self.args, self.describe())
            self._key = key
        m, _, n, a2, b2 = self._dims
        av, bv = a.reshape(a2), b.reshape(b2)
        np.matmul(
            av.T if self.args.trans_a else av, bv.T if self.args.trans_b else bv, out=self.output(0, (m, n), a.dtype)
        )


def _transpose_gradient(g, op_type: str, extra: dict):
    """Caffe2's gradient pattern for MatMul/BatchMatMul: two products of the same type."""
    ta, tb = bool(g.arg("trans_a", 0)), bool(g.arg("trans_b", 0))
    a, b, go = g.I(0), g.I(1), g.GO(0)
    ga, gb = g.GI(0), g.GI(1)
    if ta and tb:  # Y = A'B': dA = B'G', dB = G'A'
        specs = [([b, go], ga, 1, 1), ([go, a], gb, 1, 1)]
    elif ta:  # Y = A'B: dA = B G', dB = A G
        specs = [([b, go], ga, 0, 1), ([a, go], gb, 0, 0)]
    elif tb:  # Y = A B': dA = G B, dB = G' A
        specs = [([go, b], ga, 0, 0), ([go, a], gb, 1, 0)]
    else:  # Y = A B: dA = G B', dB = A' G
        specs = [([go, b], ga, 0, 1), ([a, go], gb, 1, 0)]
    ops = []
    for ins, out, t_a, t_b in specs:
        kwargs = dict(extra)
        if t_a:
            kwargs["trans_a"] = 1
        if t_b:
            kwargs["trans_b"] = 1
        ops.append(g.op(op_type, ins, [out], **kwargs))
    return ops


@gradient("MatMul", copy_arguments=False)
def _matmul_grad(g):
    if g.arg("axis_a", 1) != 1 or g.arg("axis_b", 1) != 1:
        raise GradientError(
            f"{g._where()}: the gradient of MatMul is implemented for 2D inputs (axis_a = axis_b = 1) only, "
            "as in Caffe2"
        )
    return _transpose_gradient(g, "MatMul", {})


# -- BatchMatMul --------------------------------------------------------------------------------


def batch_matmul_shape(a_shape: tuple, b_shape: tuple, trans_a: bool, trans_b: bool, broadcast: bool, where: str):
    """Output shape of BatchMatMul; ShapeError naming ``where`` on a mismatch."""
    if not broadcast:
        if len(a_shape) < 2 or len(a_shape) != len(b_shape):
            raise ShapeError(
                f"{where}: A {list(a_shape)} and B {list(b_shape)} must have the same rank >= 2 "
                "(set broadcast=1 for numpy matmul broadcasting)"
            )
        if a_shape[:-2] != b_shape[:-2]:
            raise ShapeError(
                f"{where}: batch dimensions differ: A {list(a_shape)} vs B {list(b_shape)} "
                "(set broadcast=1 to broadcast them)"
            )
    a_mk = (1, a_shape[0]) if len(a_shape) == 1 else a_shape[-2:]
    b_kn = (b_shape[0], 1) if len(b_shape) == 1 else b_shape[-2:]
    if len(a_shape) >= 2 and trans_a:
        a_mk = a_mk[::-1]
    if len(b_shape) >= 2 and trans_b:
        b_kn = b_kn[::-1]
    if a_mk[1] != b_kn[0]:
        raise ShapeError(
            f"{where}: A {list(a_shape)} and B {list(b_shape)} (trans_a={int(trans_a)}, trans_b={int(trans_b)}) "
            f"do not share K ({a_mk[1]} vs {b_kn[0]})"
        )
    try:
        batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"{where}: batch dimensions of A {list(a_shape)} and B {list(b_shape)} do not broadcast"
        ) from None
    out = tuple(batch)
    if len(a_shape) >= 2:
        out += (a_mk[0],)
    if len(b_shape) >= 2:
        out += (b_kn[1],)
    if len(a_shape) == 1 and len(b_shape) == 1:
        out = (1,)
    return out


def _infer_batch_matmul(args, ins):
    a, b = ins[0], ins[1]
    if not (a.known and b.known):
        return [TensorSpec(None, a.dtype)]
    shape = batch_matmul_shape(
        tuple(a.shape), tuple(b.shape), args.trans_a, args.trans_b, args.broadcast, "BatchMatMul"
    )
    return [TensorSpec(shape, a.dtype)]


def _cost_batch_matmul(args, ins, outs):
    a, b = ins[0], ins[1]
    if not (a.known and b.known) or not outs or not outs[0].known:
        return Cost()
    k = a.shape[-2] if len(a.shape) >= 2 and args.trans_a else a.shape[-1]
    return Cost(flops=2.0 * _prod(outs[0].shape) * k, bytes_moved=nbytes_of(a) + nbytes_of(b) + nbytes_of(outs[0]))


def _swap_last(x: np.ndarray, flag: bool) -> np.ndarray:
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


@register_op(
    "BatchMatMul",
    inputs=2,
    input_docs=[("A", "tensor (..., M, K)"), ("B", "tensor (..., K, N)")],
    output_docs=[("Y", "tensor (..., M, N)")],
    args=[
        Arg("trans_a", INT, 0, "1: transpose the last two dimensions of A"),
        Arg("trans_b", INT, 0, "1: transpose the last two dimensions of B"),
        Arg("broadcast", INT, 0, "1: numpy.matmul broadcasting (1D operands, batch dimensions)"),
    ],
    infer=_infer_batch_matmul,
    cost=_cost_batch_matmul,
    category="linalg",
)
class BatchMatMul(Operator):
    """Batched matrix product Y[i] = op(A[i]) op(B[i]) over the leading dimensions."""

    def setup(self) -> None:
        self._key = None

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        key = (a.shape, b.shape, a.dtype, b.dtype)
        if key != self._key:
            if a.dtype != b.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: A '{self.input_names[0]}' is {a.dtype} but B '{self.input_names[1]}' "
                    f"is {b.dtype}"
                )
            args = self.args
            self._shape = batch_matmul_shape(
                a.shape, b.shape, args.trans_a, args.trans_b, args.broadcast, self.describe()
            )
            self._key = key
        y = self.output(0, self._shape, a.dtype)
        if a.ndim == 1 and b.ndim == 1:
            y = y.reshape(())
        np.matmul(_swap_last(a, self.args.trans_a), _swap_last(b, self.args.trans_b), out=y)


@gradient("BatchMatMul", copy_arguments=False)
def _batch_matmul_grad(g):
    if g.arg("broadcast", 0):
        raise GradientError(f"{g._where()}: the gradient is not supported with broadcast=1 for BatchMatMul")
    return _transpose_gradient(g, "BatchMatMul", {})


# -- DotProduct ---------------------------------------------------------------------------------


def _dot_rows(shape: tuple) -> tuple[int, int]:
    n = shape[0] if len(shape) > 0 else 1
    return n, (_prod(shape) // n if n else 0)


def _infer_dot(args, ins):
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0] if len(x.shape) else 1,), x.dtype)]


class _PairwiseRows(Operator):
    """Shared checks of ops over two same-shaped inputs reduced per row (dim 0)."""

    def pair(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y = self.input(0), self.input(1)
        if x.shape != y.shape:
            raise ShapeError(
                f"{self.describe()}: X '{self.input_names[0]}' {list(x.shape)} and Y '{self.input_names[1]}' "
                f"{list(y.shape)} must have the same shape"
            )
        if x.dtype != y.dtype or x.dtype.kind != "f":
            raise TypeMismatchError(
                f"{self.describe()}: X '{self.input_names[0]}' ({x.dtype}) and Y '{self.input_names[1]}' "
                f"({y.dtype}) must hold floats of one dtype"
            )
        n, d = _dot_rows(x.shape)
        return x.reshape(n, d), y.reshape(n, d), n, d

    def row_grad(self, i: int, n: int) -> np.ndarray:
        g = self.input(i)
        if g.shape != (n,):
            raise ShapeError(
                f"{self.describe()}: gradient '{self.input_names[i]}' has shape {list(g.shape)}, expected [{n}]"
            )
        return g.reshape(n, 1)


@register_op(
    "DotProduct",
    inputs=2,
    input_docs=[("X", "1D or 2D tensor"), ("Y", "tensor shaped as X")],
    output_docs=[("Z", "per-row dot products, shape (X.dims[0],)")],
    infer=_infer_dot,
    cost=lambda args, ins, outs: Cost(flops=2.0 * _prod(ins[0].shape or ()), bytes_moved=2 * nbytes_of(ins[0])),
    category="linalg",
)
class DotProduct(_PairwiseRows):
    """Z[i] = sum_j X[i, j] * Y[i, j] over the rows (dim 0) of two same-shaped tensors; 1D inputs give X * Y."""

    def run(self) -> None:
        x2, y2, n, _ = self.pair()
        np.einsum("ij,ij->i", x2, y2, out=self.output(0, (n,), x2.dtype))


@register_op(
    "DotProductGradient",
    inputs=3,
    outputs=2,
    input_docs=[("X", "forward X"), ("Y", "forward Y"), ("dZ", "gradient of Z")],
    output_docs=[("dX", "dZ * Y"), ("dY", "dZ * X")],
    infer=lambda args, ins: [ins[0], ins[1]],
    category="linalg",
    private=True,
)
class DotProductGradient(_PairwiseRows):
    """dX[i] = dZ[i] * Y[i], dY[i] = dZ[i] * X[i]."""

    def run(self) -> None:
        x2, y2, n, d = self.pair()
        dz = self.row_grad(2, n)
        x, y = self.input(0), self.input(1)
        np.multiply(y2, dz, out=self.output(0, x.shape, x.dtype).reshape(n, d))
        np.multiply(x2, dz, out=self.output(1, y.shape, y.dtype).reshape(n, d))


@gradient("DotProduct")
def _dot_grad(g):
    return [g.op("DotProductGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]
