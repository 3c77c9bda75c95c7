"""Spatial batch normalization: SpatialBN and SpatialBNGradient.

Semantics follow Caffe2: SpatialBN's running statistics are updated in place
(input 3 -> output 1, input 4 -> output 2) as running = running * momentum +
batch * (1 - momentum), the running variance taking the unbiased batch
variance (n / (n - 1), as Caffe2's final SpatialBNOp) while Y uses the biased
one; saved_inv_var is 1 / sqrt(var + epsilon).

Multi-batch form (``num_batches`` > 1, training): two more inputs hold the per-channel sums of X and
of X**2 over ``num_batches`` batches of this batch's size, and the batch statistics come from them
(mean = sum / n, var = sumsq / n - mean**2, n = num_batches * N * HxW); its gradient likewise takes
the sums of dscale and dbias and divides them by ``num_batches``.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import GradientError, ShapeError
from framework.kernels import bn_train, window_jit
from framework.ops.gradient import gradient
from framework.ops.nn.normalization import AFFINE_GRAD_DOCS, ORDER_ARG, NormOp, affine_grad_infer, channel_axis
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec

_BN_ARGS = [
    Arg("is_test", INT, 0, "1: use the given mean/var and output Y only"),
    Arg("epsilon", FLOAT, 1e-5, "added to the variance"),
    Arg("momentum", FLOAT, 0.9, "running = running * momentum + batch * (1 - momentum)"),
    Arg("num_batches", INT, 1, "> 1: the batch statistics come from sums over this many batches (7-input form)"),
    ORDER_ARG,
]


_IN_CHANNELS = Arg(
    "in_channels",
    INT,
    0,
    "(this framework's; test mode, NCHW) read only X's first in_channels channels: the inference "
    "optimization pass sets it where X is a growing concatenation (DenseNet's) held in one buffer",
)


def _infer_bn(args, ins):
    x = ins[0]
    c = None
    if x.shape is not None and len(x.shape) >= 2:
        c = x.shape[channel_axis(args.order, len(x.shape))]
        if args.in_channels:
            c = args.in_channels
            x = TensorSpec((x.shape[0], c, *x.shape[2:]), x.dtype)
    vec = TensorSpec((c,) if c is not None else None, x.dtype)
    return [x] + [vec] * (args.num_outputs - 1)


class _BNBase(NormOp):
    def _prepare_bn(self, x) -> None:
        self._check_x(x)
        ca = channel_axis(self.order, x.ndim)
        self._c = x.shape[ca]
        self._axes = tuple(a for a in range(x.ndim) if a != ca)
        self._bshape = tuple(x.shape[ca] if a == ca else 1 for a in range(x.ndim))
        self._count = math.prod(x.shape) // max(self._c, 1)
        self._key = (x.shape, x.dtype)


def spatial_bn_schema(extra_args=()) -> dict:
    """register_op keywords of SpatialBN (and SpatialBNRelu, with its ``extra_args``)."""
    return dict(
        inputs={5, 7},
        outputs={1, 5},
        args=_BN_ARGS + [_IN_CHANNELS] + list(extra_args),
        input_docs=[
            ("X", "input"),
            ("scale", "(C,)"),
            ("bias", "(C,)"),
            ("mean", "running mean (C,)"),
            ("var", "running variance (C,)"),
            ("batch_mean_sum", "(num_batches > 1) per-channel sum of X over the batches"),
            ("batch_var_sum", "(num_batches > 1) per-channel sum of X**2 over the batches"),
        ],
        output_docs=[
            ("Y", "normalized output"),
            ("running_mean", "updated in place (training)"),
            ("running_var", "updated in place (training)"),
            ("saved_mean", "batch mean (training)"),
            ("saved_inv_var", "1/sqrt(batch var + epsilon) (training)"),
        ],
        allow_inplace={(0, 0), (5, 3), (6, 4)},
        enforce_inplace={(3, 1), (4, 2)},
        infer=_infer_bn,
        category="normalization",
    )


@register_op("SpatialBN", **spatial_bn_schema())
class SpatialBN(_BNBase):
    """Spatial batch normalization over every axis but the channel one (Caffe2's SpatialBN).
    Test mode (is_test=1): Y = (X - mean) / sqrt(var + epsilon) * scale + bias with the given
    statistics. Training: batch statistics, running statistics updated in place; an empty
    batch (N = 0) leaves them unchanged and writes zeros as saved mean and inverse std (Caffe2)."""

    def relu_mode(self) -> int:
        """Relu after the normalization: 0 none; SpatialBNRelu: 1 ``std::max(0, Y)`` (NaN -> 0, as
        Caffe2's fused op) or 2 ``0 if Y < 0 else Y`` (NaN stays, as a separate Relu)."""
        return 0

    def setup(self) -> None:
        super().setup()
        self._relu = self.relu_mode()
        self.is_test = bool(self.args.is_test)
        if not self.args.epsilon > 0:  # Caffe2: CAFFE_ENFORCE_GT(epsilon_, 0)
            raise self.arg_error(f"epsilon must be > 0, got {self.args.epsilon}")
        if not 0 <= self.args.momentum <= 1:
            raise self.arg_error(f"momentum must be in [0, 1], got {self.args.momentum}")
        self._sums = self.args.num_batches > 1 and not self.is_test
        if self.args.num_batches < 1:
            raise self.arg_error(f"num_batches must be >= 1, got {self.args.num_batches}")
        if self._sums and len(self.inputs) != 7:
            raise self.arg_error(
                f"num_batches={self.args.num_batches} takes the batch sums: 7 inputs (X, scale, bias, mean, var, "
                "batch_mean_sum, batch_var_sum)"
            )
        if self.is_test and len(self.outputs) != 1:
            raise self.arg_error("in test mode (is_test=1) SpatialBN has exactly one output")
        self._in_c = self.args.in_channels
        if self._in_c and (not self.is_test or self.order != "NCHW" or self._in_c < 0):
            raise self.arg_error(f"in_channels ({self._in_c}) needs is_test=1, order NCHW and a positive count")
        if self._in_c and self.input_names[0] == self.output_names[0]:
            raise self.arg_error("with in_channels the output cannot be X itself (in place)")
        if not self.is_test and len(self.outputs) != 5:
            raise self.arg_error(
                "in training mode SpatialBN has 5 outputs (Y, running_mean, running_var, "
                "saved_mean, saved_inv_var); pass is_test=1 for inference"
            )

    def _prepare(self, x) -> None:
        self._prepare_bn(x)
        dt = x.dtype
        self._alpha = np.empty(self._c, dt)
        self._beta = np.empty(self._c, dt)
        self._tmp = None  # X-sized scratch of the numpy training path, made on its first run
        self._bvar = np.empty(self._c, dt)
        n = self._count
        self._unbias = dt.type(n / (n - 1) if n > 1 else 1.0)
        self._eps = dt.type(self.args.epsilon)
        self._m = dt.type(self.args.momentum)
        self._1m = dt.type(1.0 - self.args.momentum)
        self._consts = (self._eps, self._m, self._1m, self._unbias * self._1m)  # the compiled path's

    def run(self) -> None:
        x = self.input(0)
        if self._in_c:  # the first in_channels channels of a larger X (a view; strided over images)
            if x.ndim < 2 or x.shape[1] < self._in_c:
                raise ShapeError(
                    f"{self.describe()}: in_channels {self._in_c} exceeds the channels of "
                    f"'{self.input_names[0]}' {x.shape}"
                )
            x = x[:, : self._in_c]
        if self._key != (x.shape, x.dtype):
            self._prepare(x)
        scale, bias, mean, var = (self.input(i) for i in range(1, 5))
        for i, a in ((1, scale), (2, bias), (3, mean), (4, var)):
            self._check_vec(i, a, self._c, x.dtype)
        alpha, beta, b = self._alpha, self._beta, self._bshape
        if self.is_test:
            self._test_mode(x, scale, bias, mean, var, self.output(0, x.shape, x.dtype))
            return
        c = self._c
        sm = self.output(3, (c,), x.dtype)
        siv = self.output(4, (c,), x.dtype)
        if self._sums:  # read before sm / siv, which may be the same blobs
            for i in (5, 6):
                self._check_vec(i, self.input(i), c, x.dtype)
            sums = self.input(5).copy(), self.input(6).copy()
        if x.shape[0] == 0:  # Caffe2: an empty batch leaves the running statistics alone
            self.output(0, x.shape, x.dtype)
            sm.fill(0)
            siv.fill(0)
            return
        if self._sums:
            self._from_sums(x, scale, bias, *sums, sm, siv)
            return
        rm = self.output(1, (c,), x.dtype)  # same blob as mean (enforced in place)
        rv = self.output(2, (c,), x.dtype)
        job = self._train_job(x, self.output(0, x.shape, x.dtype), scale, bias, rm, rv, sm, siv)
        if job is not None:  # compiled: the statistics by channels, then Y in one pass
            job()
            return
        bvar, y = self._bvar, self.output(0, x.shape, x.dtype)  # y may be X itself: X is not read after y's first pass
        np.mean(x, axis=self._axes, out=sm)
        if self._tmp is None:
            self._tmp = np.empty(x.shape, x.dtype)
        tmp = self._tmp
        np.subtract(x, sm.reshape(b), out=y)
        np.multiply(y, y, out=tmp)
        np.mean(tmp, axis=self._axes, out=bvar)
        np.add(bvar, self._eps, out=siv)
        np.sqrt(siv, out=siv)
        np.divide(1, siv, out=siv)
        np.multiply(scale, siv, out=alpha)
        np.multiply(y, alpha.reshape(b), out=y)
        np.add(y, bias.reshape(b), out=y)
        self._fused_relu(y)
        np.multiply(rm, self._m, out=rm)
        np.multiply(sm, self._1m, out=beta)
        np.add(rm, beta, out=rm)
        np.multiply(rv, self._m, out=rv)
        np.multiply(bvar, self._unbias * self._1m, out=beta)
        np.add(rv, beta, out=rv)

    def _train_job(self, x, y, scale, bias, rm, rv, sm, siv):
        """Training in compiled passes bound to these arrays (bn_train.spatial_bn_job; NCHW float32), or None."""
        if self.order != "NCHW":
            return None
        scratch = (self._bvar, self._alpha, self._beta)
        return bn_train.spatial_bn_job(x, y, scale, bias, rm, rv, sm, siv, scratch, self._consts, self._relu)

    def _from_sums(self, x, scale, bias, s1, s2, sm, siv) -> None:
        """Training with the batch statistics of ``num_batches`` batches given as sums."""
        dt, b = x.dtype, self._bshape
        n = self.args.num_batches * self._count
        np.multiply(s1, dt.type(1.0 / n), out=sm)
        bvar = s2 * dt.type(1.0 / n) - sm * sm
        np.sqrt(bvar + self._eps, out=siv)
        np.divide(1, siv, out=siv)
        alpha = scale * siv
        beta = bias - alpha * sm
        y = self.output(0, x.shape, x.dtype)
        np.multiply(x, alpha.reshape(b), out=y)
        np.add(y, beta.reshape(b), out=y)
        self._fused_relu(y)
        rm = self.output(1, (self._c,), dt)
        rv = self.output(2, (self._c,), dt)
        rm[...] = rm * self._m + sm * self._1m
        rv[...] = rv * self._m + bvar * dt.type(n / (n - 1) if n > 1 else 1.0) * self._1m

    def _test_mode(self, x, scale, bias, mean, var, y) -> None:
        alpha, beta = self._alpha, self._beta
        np.add(var, self._eps, out=alpha)
        np.sqrt(alpha, out=alpha)
        np.divide(scale, alpha, out=alpha)
        np.multiply(mean, alpha, out=beta)
        np.subtract(bias, beta, out=beta)
        if self.order == "NCHW" and window_jit.scale_shift(x, alpha, beta, y, self._relu):
            return  # one compiled pass
        np.multiply(x, alpha.reshape(self._bshape), out=y)
        np.add(y, beta.reshape(self._bshape), out=y)
        self._fused_relu(y)

    def compile(self):
        """run() on the arrays bound now (framework/net/program.py): test mode's normalization, or training's
        compiled passes (NCHW float32, the batch statistics computed here)."""
        if self._key is None:
            return None
        a = [blob.array for blob in self.inputs]
        x, y = (a[0][:, : self._in_c] if self._in_c else a[0]), self.outputs[0].array
        if self._key != (x.shape, x.dtype) or y is None or y.shape != x.shape or y.dtype != x.dtype:
            return None
        if not self.is_test:
            o = [blob.array for blob in self.outputs]
            if self._sums or o[1] is not a[3] or o[2] is not a[4]:  # running statistics in place
                return None
            return self._train_job(x, y, a[1], a[2], o[1], o[2], o[3], o[4])
        if any(v.shape != (self._c,) or v.dtype != x.dtype for v in a[1:]):
            return None
        run, args = self._test_mode, (x, *a[1:], y)
        return lambda: run(*args)

    def _fused_relu(self, y) -> None:
        if self._relu and y.size:
            (np.fmax if self._relu == 1 else np.maximum)(y, y.dtype.type(0), out=y)


@register_op(
    "SpatialBNGradient",
    inputs={5, 7},
    outputs=3,
    args=_BN_ARGS,
    input_docs=[
        ("X", "forward input"),
        ("scale", "(C,)"),
        ("dY", "gradient of Y"),
        ("mean", "saved_mean (training) or the running mean (is_test)"),
        ("inv_var", "saved_inv_var (training) or the running variance (is_test)"),
        ("dscale_sum", "(num_batches > 1) dscale summed over the batches"),
        ("dbias_sum", "(num_batches > 1) dbias summed over the batches"),
    ],
    allow_inplace={(5, 1), (6, 2)},
    output_docs=AFFINE_GRAD_DOCS,
    infer=affine_grad_infer,
    category="normalization",
    private=True,
)
class SpatialBNGradient(_BNBase):
    """Gradients of SpatialBN; with is_test=1 input 4 is the variance, else 1/sqrt(var + eps). With
    num_batches > 1, dscale and dbias are the given sums divided by num_batches (and dX uses them)."""

    def setup(self) -> None:
        super().setup()
        self._sums = self.args.num_batches > 1 and not self.args.is_test
        if self._sums and len(self.inputs) != 7:
            raise self.arg_error(f"num_batches={self.args.num_batches} takes dscale_sum and dbias_sum: 7 inputs")

    def _prepare(self, x) -> None:
        self._prepare_bn(x)
        self._xt = None  # (xhat, tmp) of the numpy path, made on its first run (see _buffers)
        self._rstd = np.empty(self._c, x.dtype)
        self._v = np.empty(self._c, x.dtype)
        self._k = tuple(np.empty(self._c, x.dtype) for _ in range(3))

    def run(self) -> None:
        x, scale, dy, mean, iv = (self.input(i) for i in range(5))
        if self._key != (x.shape, x.dtype):
            self._prepare(x)
        if dy.shape != x.shape:
            raise ShapeError(
                f"{self.describe()}: '{self.input_names[2]}' must have X's shape {x.shape}, got {dy.shape}"
            )
        for i, a in ((1, scale), (2, dy), (3, mean), (4, iv)):
            self._check_vec(i, a, self._c if i != 2 else None, x.dtype)
        c, b = self._c, self._bshape
        rstd = self._rstd
        if self.args.is_test:
            np.add(iv, x.dtype.type(self.args.epsilon), out=rstd)
            np.sqrt(rstd, out=rstd)
            np.divide(1, rstd, out=rstd)
        else:
            np.copyto(rstd, iv)
        if not self.args.is_test and not self._sums:
            outs = self.output(0, x.shape, x.dtype), self.output(1, (c,), x.dtype), self.output(2, (c,), x.dtype)
            job = self._train_job(x, scale, dy, mean, iv, *outs)
            if job is not None:
                job()
                return
        xhat, tmp = self._buffers(x)
        np.subtract(x, mean.reshape(b), out=xhat)
        np.multiply(xhat, rstd.reshape(b), out=xhat)
        dx = self.output(0, x.shape, x.dtype)
        dscale = self.output(1, (c,), x.dtype)
        dbias = self.output(2, (c,), x.dtype)
        if self._sums:
            for i in (5, 6):
                self._check_vec(i, self.input(i), c, x.dtype)
            nb = x.dtype.type(1.0 / self.args.num_batches)
            ds, db = self.input(5) * nb, self.input(6) * nb  # read before writing: may be the same blobs
            if x.shape[0] == 0:
                ds[...] = 0
                db[...] = 0
            np.copyto(dscale, ds)
            np.copyto(dbias, db)
        else:
            np.sum(dy, axis=self._axes, out=dbias)
            np.multiply(dy, xhat, out=tmp)
            np.sum(tmp, axis=self._axes, out=dscale)
        v = self._v
        np.multiply(scale, rstd, out=v)
        if self.args.is_test:
            np.multiply(dy, v.reshape(b), out=dx)
            return
        inv_n = x.dtype.type(1.0 / max(self._count, 1))
        # dX = scale * rstd * (dY - dbias / n - xhat * dscale / n)
        np.multiply(xhat, (dscale * inv_n).reshape(b), out=tmp)
        np.subtract(dy, tmp, out=dx)
        np.subtract(dx, (dbias * inv_n).reshape(b), out=dx)
        np.multiply(dx, v.reshape(b), out=dx)

    def _buffers(self, x) -> tuple:
        if self._xt is None:
            self._xt = (np.empty(x.shape, x.dtype), np.empty(x.shape, x.dtype))
        return self._xt

    def _train_job(self, x, scale, dy, mean, iv, dx, dscale, dbias):
        """Training in compiled passes bound to these arrays (bn_train.spatial_bn_grad_job; NCHW float32), or
        None."""
        if self.order != "NCHW":
            return None
        neg_inv_n = -x.dtype.type(1.0 / max(self._count, 1))
        return bn_train.spatial_bn_grad_job(x, dy, dx, scale, mean, iv, dscale, dbias, self._k, neg_inv_n)

    def compile(self):
        """Training's compiled passes on the arrays bound now (framework/net/program.py), or None."""
        if self._key is None or self.args.is_test or self._sums:
            return None
        arrays = [blob.array for blob in self.inputs[:5]] + [blob.array for blob in self.outputs]
        if any(a is None for a in arrays) or self._key != (arrays[0].shape, arrays[0].dtype):
            return None
        return self._train_job(*arrays)


@gradient("SpatialBN")
def _spatial_bn_grad(g):
    if g.arg("in_channels", 0):
        raise GradientError("SpatialBN with in_channels (an inference-pass rewrite) has no gradient")
    if g.arg("is_test", 0):
        ins = [g.I(0), g.I(1), g.GO(0), g.I(3), g.I(4)]
    elif g.arg("num_batches", 1) > 1:  # Caffe2: the scale/bias gradient blobs hold the sums
        ins = [g.I(0), g.I(1), g.GO(0), g.O(3), g.O(4), g.GI(1), g.GI(2)]
    else:
        ins = [g.I(0), g.I(1), g.GO(0), g.O(3), g.O(4)]
    return [g.op("SpatialBNGradient", ins, [g.GI(0), g.GI(1), g.GI(2)])]
