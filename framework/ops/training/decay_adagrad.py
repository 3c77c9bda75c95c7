"""DecayAdagrad (Caffe2 2020's ``caffe2/sgd/decay_adagrad_op``): Adagrad's growing squared sum with an
exponentially averaged, bias-corrected first moment and decoupled weight decay."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import BOOL, FLOAT, Arg
from framework.ops.training.optimizers import UpdateOp, update_op


@update_op(
    "DecayAdagrad",
    (0, 1, 2),
    inputs=6,
    outputs=3,
    args=[
        Arg("beta1", FLOAT, 0.9, "decay of the first moment"),
        Arg("beta2", FLOAT, 0.999, "accepted as Caffe2 does; the squared sum is not decayed"),
        Arg("epsilon", FLOAT, 1e-5, "added to the root of the squared sum"),
        Arg("weight_decay", FLOAT, 0.0, "the step uses step + weight_decay * param"),
        Arg("bias_correction_first", BOOL, True, "divide the first moment by 1 - beta1^(iter + 1)"),
    ],
    input_docs=[
        ("param", "parameter"),
        ("moment_1", "first moment"),
        ("moment_2", "sum of squared gradients"),
        ("grad", "gradient (as many elements as param)"),
        ("lr", "rate, one element (negative from the builder)"),
        ("iter", "iteration counter (int64, one element)"),
    ],
    output_docs=[
        ("output_param", "updated parameter"),
        ("output_moment_1", "updated first moment"),
        ("output_moment_2", "updated squared sum"),
    ],
    allow_inplace={(0, 0), (1, 1), (2, 2)},
    input_types=["float", "float", "float", "float", "float", "numeric"],
    same_type=[(0, 1, 2, 3)],
)
class DecayAdagrad(UpdateOp):
    """With ``t = iter + 1`` and ``c = 1 - beta1^t`` (1 without ``bias_correction_first``):
    ``m1' = beta1 m1 + (1 - beta1) g``; ``m2' = m2 + g^2``;
    ``param' = param + lr * (m1' / c / (sqrt(m2') + epsilon) + weight_decay * param)``.
    The moments and the gradient must hold as many elements as the parameter (their shapes may differ,
    as in Caffe2)."""

    def run(self) -> None:
        p = self.input(0)
        for j in (1, 2, 3):
            if self.input(j).size != p.size:
                raise ShapeError(
                    f"{self.describe()}: input {j} ('{self.input_names[j]}') has {self.input(j).size} elements, "
                    f"expected {p.size} (the elements of '{self.input_names[0]}')"
                )
        lr, it = float(self.scalar(4)), float(self.scalar(5))
        t = it + 1.0
        if not (t >= 1.0 and math.isfinite(t)):
            raise ArgumentError(f"{self.describe()}: iteration '{self.input_names[5]}' is {it}, it must be >= 0")
        b1 = self.args.beta1
        c = 1.0 - b1**t if self.args.bias_correction_first else 1.0
        if c == 0.0 or not math.isfinite(c):
            raise ArgumentError(f"{self.describe()}: beta1={b1} makes the bias correction 1 - beta1^{t:g} zero")
        m1, m2, g = (self.input(i).reshape(p.shape) for i in (1, 2, 3))
        nm1 = self.output(1, self.input(1).shape, p.dtype).reshape(p.shape)
        nm2 = self.output(2, self.input(2).shape, p.dtype).reshape(p.shape)
        step = self.scratch(0, p.shape, p.dtype)
        np.multiply(g, 1.0 - b1, out=step)
        np.multiply(m1, b1, out=nm1)
        nm1 += step
        np.multiply(g, g, out=step)
        np.add(m2, step, out=nm2)
        np.sqrt(nm2, out=step)
        step += self.args.epsilon
        step *= c
        np.divide(nm1, step, out=step)
        if self.args.weight_decay:
            step += self.args.weight_decay * p
        step *= lr
        np.add(p, step, out=self.output(0, p.shape, p.dtype))


should_not_do_gradient("DecayAdagrad")
