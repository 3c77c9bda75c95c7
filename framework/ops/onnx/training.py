"""ONNXAdagrad, ONNXAdam, ONNXMomentum: the ai.onnx.preview.training optimizers.

Caffe2's Adagrad/Adam/MomentumSGDUpdate differ from them (Caffe2's Adam corrects with iteration
t+1 and takes no weight decay terms; its Adagrad has no decay_factor; its momentum has no first-
step beta rule), so they are ops of their own. Each updates n tensors at once: inputs are the
learning rate R (float scalar), the update count T (int scalar), then n of each of X, G and the
states; outputs the n new X, then the n new states (in input order). Computed in float64 and cast
back to each tensor's dtype; inputs are not changed (outputs may name other blobs).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, REQUIRED, STRING, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_kind, expect_size


def _infer(n_groups: int) -> Callable:
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        n = (len(ins) - 2) // n_groups
        tensors = ins[2:]
        outs = [TensorSpec(s.shape, s.dtype) for s in tensors[:n] + tensors[2 * n :]]
        if len(outs) != args.num_outputs:  # a wrong arity: the op refuses it at run time
            return [UNKNOWN] * args.num_outputs
        return outs

    return infer


def _register(name: str, states: list[str], args: list[Arg], doc_states: str) -> Callable[[type], type]:
    g = 2 + len(states)
    return register_op(
        name,
        inputs=lambda n, g=g: n >= 2 + g and (n - 2) % g == 0,
        outputs=lambda n: n >= 2,
        input_docs=[
            ("R", "learning rate (float scalar)"),
            ("T", "update count (int scalar)"),
            ("X, G, " + ", ".join(states), f"n tensors each: parameters, gradients, {doc_states}"),
        ],
        output_docs=[("X_new, " + ", ".join(f"{s}_new" for s in states), "n tensors each, in input order")],
        args=args,
        infer=_infer(g),
        input_types={0: "float", 1: "int", "*": "float"},
        category="training",
    )


class _Optimizer(Operator):
    n_groups = 3

    def _prepare(self) -> tuple[float, int, list[list[np.ndarray]]]:
        r, t = self.input(0), self.input(1)
        expect_kind(self, 0, r, "float")
        expect_size(self, 0, r, 1, "the learning rate")
        expect_kind(self, 1, t, "int")
        expect_size(self, 1, t, 1, "the update count")
        n = (len(self.inputs) - 2) // self.n_groups
        if len(self.outputs) != n * (self.n_groups - 1):
            raise ShapeError(
                f"{self.describe()}: {n} tensors to update need {n * (self.n_groups - 1)} outputs, "
                f"got {len(self.outputs)}"
            )
        groups = [[self.input(2 + k * n + i) for k in range(self.n_groups)] for i in range(n)]
        for i, grp in enumerate(groups):
            for k, a in enumerate(grp[1:], 1):
                if a.shape != grp[0].shape:
                    j = 2 + k * n + i
                    raise ShapeError(
                        f"{self.describe()}: input {j} ('{self.input_names[j]}') has shape {list(a.shape)}, "
                        f"its parameter '{self.input_names[2 + i]}' {list(grp[0].shape)}"
                    )
        return float(r.reshape(-1)[0]), int(t.reshape(-1)[0]), groups

    def _write(self, results: list[list[np.ndarray]], groups: list[list[np.ndarray]]) -> None:
        n = len(groups)
        for i, (res, grp) in enumerate(zip(results, groups)):
            for k, v in enumerate(res):
                like = grp[0] if k == 0 else grp[1 + k]
                self.output(k * n + i, like.shape, like.dtype)[...] = v


@_register(
    "ONNXAdagrad",
    ["H"],
    [
        Arg("decay_factor", FLOAT, 0.0, "learning rate decay: r = R / (1 + T * decay_factor)"),
        Arg("epsilon", FLOAT, 0.0, "added to sqrt(H_new) in the denominator"),
        Arg("norm_coefficient", FLOAT, 0.0, "L2 regularization: G += norm_coefficient * X"),
    ],  # fmt: skip
    "accumulated squared gradients",
)
class ONNXAdagrad(_Optimizer):
    """ONNX Adagrad: r = R / (1 + T decay_factor); g = norm_coefficient X + G; H_new = H + g^2;
    X_new = X - r g / (sqrt(H_new) + epsilon)."""

    def run(self) -> None:
        r, t, groups = self._prepare()
        a = self.args
        with np.errstate(all="ignore"):  # IEEE division, as onnxruntime: 1 + T decay_factor = 0 gives inf
            rate = np.float64(r) / np.float64(1 + t * a.decay_factor)
        out = []
        for x, gr, h in groups:
            x64 = x.astype(np.float64)
            g = a.norm_coefficient * x64 + gr
            h_new = h + g * g
            out.append([x64 - rate * g / (np.sqrt(h_new) + a.epsilon), h_new])
        self._write(out, groups)


@_register(
    "ONNXAdam",
    ["V", "H"],
    [
        Arg("alpha", FLOAT, 0.9, "decay of the first moment V"),
        Arg("beta", FLOAT, 0.999, "decay of the second moment H"),
        Arg("epsilon", FLOAT, 0.0, "added to sqrt(H_new) in the denominator"),
        Arg("norm_coefficient", FLOAT, 0.0, "L2 regularization: G += norm_coefficient * X"),
        Arg("norm_coefficient_post", FLOAT, 0.0, "after the step: X_new *= 1 - norm_coefficient_post"),
    ],  # fmt: skip
    "first moments, second moments",
)
class ONNXAdam(_Optimizer):
    """ONNX Adam: g = norm_coefficient X + G; V_new = alpha V + (1 - alpha) g; H_new = beta H +
    (1 - beta) g^2; r = R sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R;
    X_new = (1 - norm_coefficient_post) (X - r V_new / (sqrt(H_new) + epsilon))."""

    n_groups = 4

    def run(self) -> None:
        r, t, groups = self._prepare()
        a = self.args
        with np.errstate(all="ignore"):
            rate = r * np.sqrt(1 - a.beta**t) / (1 - a.alpha**t) if t > 0 else r
            out = []
            for x, gr, v, h in groups:
                x64 = x.astype(np.float64)
                g = a.norm_coefficient * x64 + gr
                v_new = a.alpha * v + (1 - a.alpha) * g
                h_new = a.beta * h + (1 - a.beta) * g * g
                x_new = (1 - a.norm_coefficient_post) * (x64 - rate * v_new / (np.sqrt(h_new) + a.epsilon))
                out.append([x_new, v_new, h_new])
        self._write(out, groups)


@_register(
    "ONNXMomentum",
    ["V"],
    [
        Arg("alpha", FLOAT, REQUIRED, "decay of the momentum V"),
        Arg("beta", FLOAT, REQUIRED, "coefficient of the gradient (1 on the first update, T = 0)"),
        Arg("mode", STRING, "standard", "standard or nesterov (required by ONNX)", choices=("standard", "nesterov")),
        Arg("norm_coefficient", FLOAT, REQUIRED, "L2 regularization: G += norm_coefficient * X"),
    ],  # fmt: skip
    "momentums",
)
class ONNXMomentum(_Optimizer):
    """ONNX Momentum: g = norm_coefficient X + G; V_new = alpha V + b g with b = beta (1 when
    T = 0); standard: X_new = X - R V_new; nesterov: X_new = X - R (g + alpha V_new)."""

    def run(self) -> None:
        r, t, groups = self._prepare()
        a = self.args
        b = a.beta if t > 0 else 1.0
        out = []
        for x, gr, v in groups:
            x64 = x.astype(np.float64)
            g = a.norm_coefficient * x64 + gr
            v_new = a.alpha * v + b * g
            step = g + a.alpha * v_new if a.mode == "nesterov" else v_new
            out.append([x64 - r * step, v_new])
        self._write(out, groups)


for _t in ("Adagrad", "Adam", "Momentum"):
    no_gradient(f"ONNX{_t}")
