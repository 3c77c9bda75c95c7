"""SGD-style update ops: MomentumSGD, MomentumSGDUpdate (Caffe2's momentum_sgd) and
ScatterWeightedSum (the sparse weighted update), over the base in ``optimizers``."""

from __future__ import annotations

import numpy as np

from framework.kernels import bn_train
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import FLOAT, INT, Arg
from framework.ops.training.optimizers import UpdateOp, update_op
from framework.runtime.parallel import run_parallel, work_split

_MOMENTUM_ARGS = [
    Arg("momentum", FLOAT, 0.0, "momentum coefficient"),
    Arg("nesterov", INT, 0, "1 for Nesterov accelerated gradient"),
]


def _momentum_step(op: UpdateOp, g, m, lr, ng, nm, t) -> None:
    """ng, nm from g, m (any of them may alias): Caffe2's momentum_sgd_compute. ``t``: a scratch of m's
    shape for Nesterov (None otherwise), made before anything is written (nothing here can fail)."""
    mu = op.args.momentum
    np.multiply(g, lr, out=ng)  # lr * g
    np.multiply(m, mu, out=nm)  # momentum * m
    nm += ng  # new moment = momentum * m + lr * g
    if op.args.nesterov:
        # (1 + mu) * m_new - mu * m_old == lr * g + mu * m_new
        np.multiply(nm, mu, out=t)
        ng += t
    else:
        np.copyto(ng, nm)


def _nesterov_scratch(op: UpdateOp, m):
    return op.scratch(0, m.shape, m.dtype) if op.args.nesterov else None


# MomentumSGD and MomentumSGDUpdate check every input before writing anything (shapes, the learning rate,
# the scratch made), so nothing fails midway: they update in place without the base's snapshot copies.


@update_op(
    "MomentumSGD",
    (0, 1),
    inputs=3,
    outputs=2,
    args=_MOMENTUM_ARGS,
    input_docs=[("grad", "gradient"), ("moment", "momentum history"), ("lr", "learning rate (one element)")],
    output_docs=[("output_grad", "the step to subtract"), ("output_moment", "updated momentum")],
    allow_inplace={(0, 0), (1, 1)},
    input_types="float",
    same_type=[(0, 1)],
    snapshot_inplace=False,
)
class MomentumSGD(UpdateOp):
    """Momentum SGD step without touching the parameter.

    Classic: ``m' = momentum * m + lr * g``, ``g' = m'``. Nesterov:
    ``m' = momentum * m + lr * g``, ``g' = (1 + momentum) * m' - momentum * m``.
    Subtract ``g'`` from the parameter to descend.
    """

    def run(self) -> None:
        self.same_shape(0, 1)
        g, m, lr = self.input(0), self.input(1), self.scalar(2)
        t = _nesterov_scratch(self, m)
        ng, nm = self.out_like(0, 0), self.out_like(1, 1)
        _momentum_step(self, g, m, lr, ng, nm, t)


@update_op(
    "MomentumSGDUpdate",
    (0, 1, 3),
    inputs=4,
    outputs=3,
    args=_MOMENTUM_ARGS,
    input_docs=[
        ("grad", "gradient"),
        ("moment", "momentum history"),
        ("lr", "learning rate (one element, positive)"),
        ("param", "parameter"),
    ],
    output_docs=[("output_grad", "the step"), ("output_moment", "updated momentum"), ("output_param", "param - step")],
    allow_inplace={(0, 0), (1, 1), (3, 2)},
    input_types="float",
    same_type=[(0, 1, 3)],
    snapshot_inplace=False,
)
class MomentumSGDUpdate(UpdateOp):
    """MomentumSGD followed by ``param' = param - g'`` (fused), in place."""

    def run(self) -> None:
        self.same_shape(0, 1)
        self.same_shape(0, 3)
        g, m, lr, p = self.input(0), self.input(1), self.scalar(2), self.input(3)
        ng, nm, np_ = self.out_like(0, 0), self.out_like(1, 1), self.out_like(2, 3)
        a = self.args
        if ng is g and nm is m and np_ is p and bn_train.momentum_update(g, m, p, lr, a.momentum, a.nesterov):
            self._jit_ran = True
            return  # in place (as optimizer.build_sgd makes it), float32: one compiled pass
        t = _nesterov_scratch(self, m)
        arrays = (g, m, ng, nm, p, np_) if t is None else (g, m, ng, nm, p, np_, t)
        parts = work_split(g.size, 4 * g.size)
        if parts is not None and all(a.flags.c_contiguous for a in arrays):
            # elementwise: flat ranges over the intra-op threads, every element as on one thread
            flat = [a.reshape(-1) for a in arrays]
            run_parallel([_update_range(self, flat, lr, a, b) for a, b in parts], steal=True)
            return
        _update(self, g, m, lr, ng, nm, t, p, np_)

    def compile(self):
        """run()'s in-place compiled pass bound to the current arrays as a native job (the net's fast path; see
        framework.net.program: the checks of run() hold while its bindings do); the learning rate is read at each
        call. None where run() took another path."""
        if not self.__dict__.get("_jit_ran"):
            return None
        g, m, lr, p = (self.input(i) for i in range(4))
        if any(self.outputs[k].array is not a for k, a in ((0, g), (1, m), (2, p))):
            return None
        return bn_train.momentum_job(g, m, p, lr, self.args.momentum, self.args.nesterov)


def _update(op: UpdateOp, g, m, lr, ng, nm, t, p, np_) -> None:
    _momentum_step(op, g, m, lr, ng, nm, t)
    np.subtract(p, ng, out=np_)


def _update_range(op: UpdateOp, flat: list, lr, a: int, b: int):
    g, m, ng, nm, p, np_, *t = (x[a:b] for x in flat)
    return lambda: _update(op, g, m, lr, ng, nm, t[0] if t else None, p, np_)


@update_op(
    "ScatterWeightedSum",
    (0,),
    inputs=lambda n: n >= 5 and n % 2 == 1,
    outputs=1,
    input_docs=[
        ("X_0", "tensor updated in place"),
        ("Weight_0", "scalar weight of X_0"),
        ("INDICES", "rows of X_0 to update"),
        ("X_1", "slices, one per index"),
        ("Weight_1", "scalar weight of X_1"),
    ],
    output_docs=[("X_0", "same blob as input 0")],
    enforce_inplace={(0, 0)},
)
class ScatterWeightedSum(UpdateOp):
    """``X_0[INDICES] = Weight_0 * X_0[INDICES] + Weight_1 * X_1 (+ Weight_2 * X_2 ...)`` in place.

    As Caffe2's CPU kernel (utility_ops.h): first every row named in INDICES is scaled
    by Weight_0 once per occurrence (a row named twice is scaled by Weight_0 squared),
    then every weighted slice is added to its row, input by input, index by index.
    """

    def run(self) -> None:
        x = self.out_like(0, 0)
        w0 = self.scalar(1)
        idx, _ = self.rows(0, 2, 3)
        slices = [self.rows(0, 2, j)[1] for j in range(3, len(self.input_names), 2)]
        weights = [self.scalar(j) for j in range(4, len(self.input_names), 2)]
        if idx.size == 0:
            return
        if float(w0) != 1.0:
            np.multiply.at(x, idx, w0)
        for s, w in zip(slices, weights):
            np.add.at(x, idx, s * w)


should_not_do_gradient("MomentumSGD", "MomentumSGDUpdate", "ScatterWeightedSum")
