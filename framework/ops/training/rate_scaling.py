"""Learning-rate and weight rescaling ops of Caffe2's ``caffe2/sgd``: Lars, LearningRateAdaption,
ClipTensorByScaling, EnsureClipped and WeightScale."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, Arg, TensorSpec
from framework.ops.training.optimizers import UpdateOp, update_op

_F32 = np.float32
_INT64_MAX = np.iinfo(np.int64).max


def _float32(op: UpdateOp, i: int) -> np.ndarray:
    x = op.input(i)
    if x.dtype != _F32:
        raise TypeMismatchError(f"{op.describe()}: input {i} ('{op.input_names[i]}') must be float32, got {x.dtype}")
    return x


@register_op(
    "Lars",
    inputs={2, 5},
    outputs=1,
    args=[
        Arg("offset", FLOAT, 0.5, "added to the norm ratio, >= 0"),
        Arg("lr_min", FLOAT, 0.02, "lower clip of the rescaling factor, >= 0"),
    ],
    input_docs=[
        ("X", "parameter"),
        ("dX", "its gradient"),
        ("wd", "weight decay (one element; absent in the 2-input form)"),
        ("trust", "trust coefficient (one element; absent in the 2-input form)"),
        ("lr_max", "upper clip of the factor (one element; absent in the 2-input form)"),
    ],
    output_docs=[("lr_rescale", "float [1]: the local learning-rate factor")],
    infer=lambda args, ins: [TensorSpec((1,), np.dtype(_F32))],
    category="optimizer",
)
class Lars(UpdateOp):
    """Layer-wise adaptive rate scaling with clipping (Caffe2's lars_op.cc): the factor is
    ``trust / (||dX|| / ||X|| + wd + offset)`` (1 when ``||X|| = 0``), clipped to ``[lr_min, lr_max]``.
    The 2-input form (X, dX; Caffe2's 2018 op) gives ``1 / (||dX|| / ||X|| + offset)``, unclipped."""

    def setup(self) -> None:
        if self.args.offset < 0 or self.args.lr_min < 0:
            raise self.arg_error(f"offset and lr_min must be >= 0, got {self.args.offset}, {self.args.lr_min}")

    def run(self) -> None:
        x, dx = _float32(self, 0), _float32(self, 1)
        if x.size != dx.size:
            raise ShapeError(f"{self.describe()}: gradient size {dx.size} doesn't match parameter size {x.size}")
        legacy = len(self.inputs) == 2
        if legacy:
            wd, trust, lr_max = _F32(0), _F32(1), None
        else:
            wd, trust, lr_max = self.scalar(2), self.scalar(3), self.scalar(4)
        x_norm = _F32(np.sqrt(np.sum(x * x, dtype=_F32)))
        val = _F32(1.0)
        if x_norm > 0:
            dx_norm = _F32(np.sqrt(np.sum(dx * dx, dtype=_F32)))
            val = _F32(trust / (dx_norm / x_norm + wd + _F32(self.args.offset)))
        if not legacy:
            val = max(min(val, _F32(lr_max)), _F32(self.args.lr_min))
        self.output(0, (1,), _F32)[0] = val


@update_op(
    "LearningRateAdaption",
    (0,),
    inputs=3,
    outputs=1,
    args=[
        Arg("lr_alpha", FLOAT, 0.01, "adaption rate"),
        Arg("normalized_lr_adaption", BOOL, True, "use the cosine of grad and effgrad instead of their dot product"),
    ],
    input_docs=[
        ("lr", "learning rate (one element)"),
        ("grad", "gradient"),
        ("effgrad", "previous effective gradient"),
    ],
    output_docs=[("output_lr", "the adapted rate")],
    allow_inplace={(0, 0)},
    input_types="float",
)
class LearningRateAdaption(UpdateOp):
    """Hypergradient rate adaption (Caffe2's learning_rate_adaption_op.h): with ``x = <g, e>``,
    normalized: ``lr' = lr (1 - lr_alpha x / (max(||g||, 1e-12) max(||e||, 1e-12)))``; otherwise
    ``lr' = lr - lr_alpha x``."""

    def run(self) -> None:
        lr = self.scalar(0)
        g, e = self.input(1), self.input(2)
        if g.size != e.size:
            raise ShapeError(f"{self.describe()}: grad has {g.size} elements, effgrad {e.size}")
        g, e = g.reshape(-1).astype(_F32, copy=False), e.reshape(-1).astype(_F32, copy=False)
        x = _F32(np.dot(g, e))
        alpha = _F32(self.args.lr_alpha)
        if self.args.normalized_lr_adaption:
            y = max(_F32(np.sqrt(np.dot(g, g))), _F32(1e-12))
            z = max(_F32(np.sqrt(np.dot(e, e))), _F32(1e-12))
            new = lr * (_F32(1) - alpha * x / (y * z))
        else:
            new = lr - alpha * x
        self.out_like(0, 0)[...] = new


@update_op(
    "ClipTensorByScaling",
    (0,),
    inputs=(2, 3),
    outputs=1,
    args=[Arg("threshold", FLOAT, 0.0, "norm threshold, > 0")],
    input_docs=[
        ("input_tensor", "tensor to clip (non-empty)"),
        ("val", "its norm (one element)"),
        ("additional_threshold", "optional: multiplies threshold"),
    ],
    output_docs=[("clipped", "input * threshold / val when val > threshold, else input")],
    allow_inplace={(0, 0)},
)
class ClipTensorByScaling(UpdateOp):
    """Scale the tensor down to the threshold norm (Caffe2's clip_tensor_op.h): if ``val > threshold``
    (times input 2 when given), output ``input * threshold / val``; otherwise the input."""

    def setup(self) -> None:
        if not self.args.threshold > 0:
            raise self.arg_error(f"threshold must be greater than 0, got {self.args.threshold}")

    def run(self) -> None:
        x = _float32(self, 0)
        if x.size == 0:
            raise ShapeError(f"{self.describe()}: input 0 ('{self.input_names[0]}') must not be empty")
        val = self.scalar(1)
        threshold = _F32(self.args.threshold)
        if len(self.inputs) > 2:
            threshold = threshold * _F32(self.scalar(2))
        out = self.out_like(0, 0)
        if val > threshold:
            np.multiply(x, _F32(threshold / val), out=out)
        elif out is not x:
            np.copyto(out, x)


@update_op(
    "EnsureClipped",
    (0,),
    inputs=(1, 3),
    outputs=1,
    args=[
        Arg("min", FLOAT, None, "lower bound (default: none)"),
        Arg("max", FLOAT, None, "upper bound (default: none)"),
    ],
    input_docs=[
        ("param", "parameters"),
        ("indices", "optional: rows to clip (sparse form, in place)"),
        ("grad", "optional: the sparse gradient (its rows give the block size)"),
    ],
    output_docs=[("output_param", "param clipped to [min, max]")],
    allow_inplace={(0, 0)},
)
class EnsureClipped(UpdateOp):
    """Clip the parameter to ``[min, max]`` (Caffe2's ensure_clipped_op). With indices and grad
    (a sparse update) only the indexed rows are clipped, and the op must run in place."""

    def setup(self) -> None:
        if len(self.inputs) == 2:
            raise self.arg_error("give both indices and grad (sparse form) or neither")
        if len(self.inputs) == 3 and self.input_names[0] != self.output_names[0]:
            raise self.arg_error("the sparse form (indices, grad) must run in place on param")
        a = self.args
        self._lo = _F32(a.min) if a.min is not None else np.finfo(_F32).min
        self._hi = _F32(a.max) if a.max is not None else np.finfo(_F32).max

    def run(self) -> None:
        p = _float32(self, 0)
        if len(self.inputs) == 1:
            np.minimum(np.maximum(p, self._lo), self._hi, out=self.out_like(0, 0))
            return
        idx, _ = self.rows(0, 1, 2)
        rows = p[idx]
        p[idx] = np.minimum(np.maximum(rows, self._lo), self._hi)
        self.output_tensor(0).version += 1


@update_op(
    "WeightScale",
    (0,),
    inputs=2,
    outputs=1,
    args=[
        Arg("stepsize", INT, _INT64_MAX, "scale every stepsize iterations"),
        Arg("upper_bound_iter", INT, _INT64_MAX, "no scaling from this iteration on"),
        Arg("scale", FLOAT, 1.0, "the factor"),
    ],
    input_docs=[("w", "weights"), ("iter", "int64 iteration counter (one element)")],
    output_docs=[("output_w", "scaled weights (or a copy)")],
    allow_inplace={(0, 0)},
)
class WeightScale(UpdateOp):
    """Every ``stepsize`` iterations (``iter + 1`` divisible by it, and below ``upper_bound_iter``)
    output ``scale * w``; otherwise ``w`` (Caffe2's weight_scale_op.h)."""

    def setup(self) -> None:
        if self.args.stepsize <= 0:
            raise self.arg_error(f"stepsize must be > 0, got {self.args.stepsize}")

    def run(self) -> None:
        w = _float32(self, 0)
        it = self.scalar(1)
        if it.dtype != np.int64:
            raise TypeMismatchError(f"{self.describe()}: iter '{self.input_names[1]}' must be int64, got {it.dtype}")
        iteration = int(it) + 1
        out = self.out_like(0, 0)
        if iteration % self.args.stepsize != 0 or iteration >= self.args.upper_bound_iter:
            if out is not w:
                np.copyto(out, w)
            return
        np.multiply(w, _F32(self.args.scale), out=out)


should_not_do_gradient("Lars", "LearningRateAdaption", "ClipTensorByScaling", "EnsureClipped", "WeightScale")
