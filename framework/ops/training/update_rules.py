"""More dense update rules from Caffe2's ``caffe2/sgd``: Adadelta, Ftrl, GFtrl, Wngrad and Storm.

Formulas, inputs, in-place pairs and argument defaults are Caffe2's (see each
op's doc). Their sparse forms (SparseAdadelta, SparseFtrl...) live with the
sparse optimizers.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import FLOAT, Arg
from framework.ops.training.optimizers import UpdateOp, update_op

_F32 = np.float32


def _check_sizes(op: UpdateOp, base: int, others: dict[int, int]) -> None:
    """Input i must hold factor * numel(input base) elements, for each i: factor in ``others``."""
    n = op.input(base).size
    for i, factor in others.items():
        got = op.input(i).size
        if got != factor * n:
            raise ShapeError(
                f"{op.describe()}: input {i} ('{op.input_names[i]}') holds {got} elements, expected "
                f"{factor * n} ({factor} x input {base} '{op.input_names[base]}')"
            )


@update_op(
    "Adadelta",
    (0, 1, 2),
    inputs=5,
    outputs=3,
    args=[
        Arg("epsilon", FLOAT, 1e-5, "added under both square roots"),
        Arg("decay", FLOAT, 0.95, "decay of the running averages, in (0, 1)"),
    ],
    input_docs=[
        ("param", "parameter"),
        ("moment_grad", "running average of squared gradients"),
        ("moment_delta", "running average of squared updates"),
        ("grad", "gradient"),
        ("lr", "learning rate (one element)"),
    ],
    output_docs=[("output_param", "parameter"), ("output_moment_grad", "h'"), ("output_moment_delta", "d'")],
    allow_inplace={(0, 0), (1, 1), (2, 2)},
    input_types="float",
)
class Adadelta(UpdateOp):
    """``h' = decay h + (1 - decay) g^2``; ``u = sqrt(d + eps) / sqrt(h' + eps) * g``;
    ``param' = param + lr * u``; ``d' = decay d + (1 - decay) u^2`` (Caffe2's adadelta_op.h)."""

    def setup(self) -> None:
        a = self.args
        if a.epsilon < 0 or not 0 < a.decay < 1:
            raise self.arg_error(f"need epsilon >= 0 and 0 < decay < 1, got epsilon {a.epsilon}, decay {a.decay}")

    def run(self) -> None:
        _check_sizes(self, 3, {0: 1, 1: 1, 2: 1})
        w, h, d, lr = self.input(0), self.input(1), self.input(2), self.scalar(4)
        g = self.input(3).reshape(w.shape)
        h, d = h.reshape(w.shape), d.reshape(w.shape)
        decay, eps = _F32(self.args.decay), _F32(self.args.epsilon)
        nh = decay * h + (1 - decay) * g * g
        ng = np.sqrt(d + eps) / np.sqrt(nh + eps) * g
        nd = decay * d + (1 - decay) * ng * ng
        nw = w + lr * ng
        self.out_like(0, 0)[...] = nw
        self.out_like(1, 1)[...] = nh.reshape(self.input(1).shape)
        self.out_like(2, 2)[...] = nd.reshape(self.input(2).shape)


_FTRL_ARGS = [
    Arg("alpha", FLOAT, 0.005, "learning rate (or give it as input 3)"),
    Arg("beta", FLOAT, 1.0, "beta of the per-coordinate rate"),
    Arg("lambda1", FLOAT, 0.001, "L1 strength"),
    Arg("lambda2", FLOAT, 0.001, "L2 strength"),
]
# Ftrl and GFtrl take the same inputs, arguments and checks (Caffe2's ftrl_op.cc / gftrl_op.cc)
_FTRL_SPEC = dict(
    inputs=(3, 4),
    outputs=2,
    args=_FTRL_ARGS,
    allow_inplace={(0, 0), (1, 1)},
    input_types="float",
    same_type=[(0, 1, 2)],
    input_docs=[
        ("var", "parameter"),
        ("n_z", "state: (n, z) pairs, 2 x numel(var), interleaved"),
        ("grad", "gradient"),
        ("alpha", "optional one-element learning rate (then the alpha argument must not be given)"),
    ],
    output_docs=[("output_var", "parameter"), ("output_n_z", "state")],
)


class _FtrlBase(UpdateOp):
    def setup(self) -> None:
        if len(self.inputs) > 3 and "alpha" in self.args.given:
            raise self.arg_error("cannot specify alpha by both input and argument")

    def state(self) -> tuple[np.ndarray, ...]:
        _check_sizes(self, 2, {0: 1, 1: 2})
        alpha = self.scalar(3) if len(self.inputs) > 3 else _F32(self.args.alpha)
        alpha_inv = _F32(1.0) / _F32(alpha)
        w = self.input(0).reshape(-1)
        nz = self.input(1).reshape(-1, 2)
        g = self.input(2).reshape(-1)
        n, z = nz[:, 0], nz[:, 1]
        new_n = n + g * g
        sigma = (np.sqrt(new_n) - np.sqrt(n)) * alpha_inv
        new_z = z + g - sigma * w
        return alpha_inv, new_n, new_z

    def write(self, new_w: np.ndarray, new_n: np.ndarray, new_z: np.ndarray) -> None:
        self.out_like(0, 0)[...] = new_w.reshape(self.input(0).shape)
        out = self.out_like(1, 1).reshape(-1, 2)
        out[:, 0] = new_n
        out[:, 1] = new_z


@update_op("Ftrl", (0, 1), **_FTRL_SPEC)
class Ftrl(_FtrlBase):
    """FTRL-Proximal (Caffe2's ftrl_op.cc): ``n' = n + g^2``,
    ``z' = z + g - (sqrt(n') - sqrt(n)) / alpha * w``, and
    ``w' = (lambda1 sign(z') - z') / ((beta + sqrt(n')) / alpha + lambda2)`` where ``|z'| > lambda1``, else 0."""

    def run(self) -> None:
        a = self.args
        alpha_inv, new_n, new_z = self.state()
        l1 = _F32(a.lambda1)
        denom = (_F32(a.beta) + np.sqrt(new_n)) * alpha_inv + _F32(a.lambda2)
        new_w = np.where(np.abs(new_z) > l1, (l1 * np.sign(new_z) - new_z) / denom, _F32(0)).astype(_F32)
        self.write(new_w, new_n, new_z)


@update_op("GFtrl", (0, 1), **_FTRL_SPEC)
class GFtrl(_FtrlBase):
    """Group-lasso FTRL (Caffe2's gftrl_op.cc): as Ftrl per coordinate, but a column j of the
    [output_dim, input_dim] weight (dim 0 of grad = output_dim) is zeroed together when
    ``||z'[:, j]|| <= lambda1 sqrt(output_dim)``; otherwise
    ``w' = z' (lambda1 sqrt(output_dim) / ||z'[:, j]|| - 1) / ((beta + sqrt(n')) / alpha + lambda2)``."""

    def run(self) -> None:
        a = self.args
        g = self.input(2)
        if g.ndim == 0 or g.shape[0] == 0:
            raise ShapeError(f"{self.describe()}: grad '{self.input_names[2]}' needs a non-empty first dimension")
        alpha_inv, new_n, new_z = self.state()
        out_dim = g.shape[0]
        zz = new_z.reshape(out_dim, -1)
        z_norm = np.sqrt((zz * zz).sum(axis=0, dtype=_F32))
        bound = _F32(a.lambda1) * _F32(np.sqrt(out_dim))
        denom = ((_F32(a.beta) + np.sqrt(new_n)) * alpha_inv + _F32(a.lambda2)).reshape(out_dim, -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = zz * (bound / z_norm - 1) / denom
        new_w = np.where(z_norm > bound, w, _F32(0)).astype(_F32)
        self.write(new_w, new_n, new_z)


@update_op(
    "Wngrad",
    (0, 1, 1, 2),
    inputs=4,
    outputs=(2, 4),
    args=[Arg("epsilon", FLOAT, 1e-5, "added to seq_b")],
    input_docs=[("param", "parameter"), ("seq_b", "one-element state b"), ("grad", "gradient"), ("lr", "rate")],
    output_docs=[
        ("output_param", "param + lr * g / (b + eps)"),
        ("output_seq_b", "b + sum(g^2) / (b + eps)"),
        ("output_effective_lr", "optional: lr / (b + eps)"),
        ("output_update", "optional: the step added to the parameter"),
    ],
    allow_inplace={(0, 0), (1, 1)},
    input_types="float",
)
class Wngrad(UpdateOp):
    """WNGrad (Caffe2's wngrad_op.h): ``param' = param + lr * g / (b + epsilon)``,
    ``b' = b + sum(g^2) / (b + epsilon)``; optionally the effective rate and the update."""

    def run(self) -> None:
        _check_sizes(self, 2, {0: 1})
        w, b, g, lr = self.input(0), self.scalar(1), self.input(2).reshape(self.input(0).shape), self.scalar(3)
        eps = _F32(self.args.epsilon)
        eff = _F32(lr / (b + eps))
        new_b = b + _F32(np.sum(g * g, dtype=_F32)) / (b + eps)
        upd = eff * g
        self.out_like(0, 0)[...] = w + upd
        self.out_like(1, 1)[...] = new_b
        if self.args.num_outputs > 2:
            self.out_like(2, 1)[...] = eff
        if self.args.num_outputs > 3:
            self.out_like(3, 2)[...] = upd.reshape(self.input(2).shape)


@update_op(
    "Storm",
    (0, 1, 2),
    inputs=5,
    outputs=3,
    args=[
        Arg("momentum", FLOAT, 10.0, "momentum coefficient c"),
        Arg("beta", FLOAT, 0.1, "offset of the squared-gradient sum"),
    ],
    input_docs=[
        ("param", "parameter"),
        ("moment", "moment"),
        ("grad_sq_sum", "one-element running sum of squared gradients"),
        ("grad", "gradient"),
        ("lr", "rate"),
    ],
    output_docs=[("output_param", "parameter"), ("output_moment", "moment"), ("output_grad_sq_sum", "sum")],
    allow_inplace={(0, 0), (1, 1), (2, 2)},
    input_types="float",
)
class Storm(UpdateOp):
    """STORM (Caffe2's storm_op.h): ``s' = s + sum(g^2)``; ``nlr = lr (beta + s')^(-1/3)``;
    ``a = momentum nlr^2``; ``m' = g + (1 - a)(m - g)``; ``param' = param + nlr m'``."""

    def run(self) -> None:
        _check_sizes(self, 3, {0: 1, 1: 1})
        w, m, s = self.input(0), self.input(1), self.scalar(2)
        g, lr = self.input(3).reshape(w.shape), self.scalar(4)
        new_s = _F32(s + np.sum(g * g, dtype=_F32))
        nlr = _F32(lr * np.power(np.float64(self.args.beta) + np.float64(new_s), -1.0 / 3.0))
        alpha = _F32(self.args.momentum) * nlr * nlr
        new_m = g + (_F32(1) - alpha) * (m.reshape(w.shape) - g)
        self.out_like(0, 0)[...] = w + nlr * new_m
        self.out_like(1, 1)[...] = new_m.reshape(m.shape)
        self.out_like(2, 2)[...] = new_s


should_not_do_gradient("Adadelta", "Ftrl", "GFtrl", "Wngrad", "Storm")
