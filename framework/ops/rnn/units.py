"""LSTMUnit and GRUUnit: one time step of the gate nonlinearities, sequence-length aware.

Caffe2 semantics (caffe2/operators/lstm_unit_op.h, gru_unit_op.h): inputs are
one time step, shaped ``1 x N x D`` (states) and ``1 x N x 4D`` / ``1 x N x 3D``
(pre-activation gates, in Caffe2's order i, f, o, g for the LSTM and r, z, h
for the GRU). Row ``n`` is computed only while ``t < seq_lengths[n]``;
otherwise its state is carried over (or zeroed with ``drop_states``). The
GRU's reset gate is applied by the cell before this op (gru_cell), so the op
ignores it and its gradient is zero.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.kernels import recurrent as compiled
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, UNKNOWN, Arg


def _sigmoid_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


def _carry_over(invalid, drop: bool, outs: tuple, prevs: tuple) -> None:
    """Rows past their sequence length: zeros (drop_states) or the previous values."""
    for out, prev in zip(outs, prevs):
        out[invalid] = 0 if drop else prev[invalid]


class _Unit(Operator):
    """Shared checks: states (1, N, D), gates (1, N, k*D), lengths (N,) int32, timestep."""

    k = 4
    n_states = 2

    def setup(self) -> None:
        self.has_lengths = bool(self.args.sequence_lengths)
        want = self.n_states + 1 + (2 if self.has_lengths else 1)
        if len(self.inputs) != want:
            raise self.arg_error(
                f"takes {want} inputs with sequence_lengths={int(self.has_lengths)}, got {len(self.inputs)}"
            )

    def _check(self, gates_idx: int):
        names = self.input_names
        state = self.input(gates_idx - 1)
        gates = self.input(gates_idx)
        for i in range(gates_idx + 1):
            a = self.input(i)
            if a.dtype.kind != "f":
                raise TypeMismatchError(f"{self.describe()}: input '{names[i]}' must be float, found {a.dtype}")
            if a.dtype != gates.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: input '{names[i]}' is {a.dtype} but '{names[gates_idx]}' is {gates.dtype}"
                )
        if state.ndim != 3 or state.shape[0] != 1:
            raise ShapeError(
                f"{self.describe()}: state '{names[gates_idx - 1]}' must be 1 x N x D, found {list(state.shape)}"
            )
        _, n, d = state.shape
        for i in range(gates_idx - 1):
            if self.input(i).shape != state.shape:
                raise ShapeError(
                    f"{self.describe()}: '{names[i]}' has shape {list(self.input(i).shape)}, "
                    f"expected {list(state.shape)} like '{names[gates_idx - 1]}'"
                )
        if gates.shape != (1, n, self.k * d):
            raise ShapeError(
                f"{self.describe()}: gates '{names[gates_idx]}' must be 1 x {n} x {self.k * d} ({self.k} x D), "
                f"found {list(gates.shape)}"
            )
        k = gates_idx + 1
        lengths = None
        if self.has_lengths:
            lengths = self.input(k)
            if lengths.dtype != np.int32 or lengths.shape != (n,):
                raise ShapeError(
                    f"{self.describe()}: seq_lengths '{names[k]}' must be int32 of shape [{n}], "
                    f"found {lengths.dtype} {list(lengths.shape)}"
                )
            k += 1
        ts = self.input(k)
        if ts.dtype.kind not in "iu" or ts.size < 1:
            raise TypeMismatchError(
                f"{self.describe()}: timestep '{names[k]}' must be an integer tensor with a value, "
                f"found {ts.dtype} {list(ts.shape)}"
            )
        t = int(ts.reshape(-1)[0])
        invalid = None if lengths is None else (t >= lengths)
        if invalid is not None and not invalid.any():
            invalid = None
        return n, d, invalid, k + 1

    def _with_lengths(self, step):
        """A compiled callable: ``step`` of the rows past their length, found from the current
        lengths and timestep values (inputs 3 and 4 of the LSTM ops) at each call."""
        if not self.has_lengths:
            return lambda: step(None)
        lengths, ts = self.input(3), self.input(4).reshape(-1)

        def step_with_lengths() -> None:
            invalid = int(ts[0]) >= lengths
            step(invalid if invalid.any() else None)

        return step_with_lengths


_ARGS = [
    Arg("sequence_lengths", BOOL, True, "When false, the sequence lengths input is left out and all rows are valid"),
    Arg("drop_states", BOOL, False, "Zero the states of finished rows instead of carrying them over"),
]


def _like(i):
    def infer(args, ins):
        return [ins[i] if i < len(ins) else UNKNOWN] * args.num_outputs

    return infer


@register_op(
    "LSTMUnit",
    inputs=(4, 5),
    outputs=2,
    input_docs=[
        ("hidden_t_prev", "1 x N x D"),
        ("cell_t_prev", "1 x N x D"),
        ("gates", "1 x N x 4D pre-activations in order i, f, o, g"),
        ("seq_lengths", "int32 [N] (left out when sequence_lengths=0)"),
        ("timestep", "int32 scalar t"),
    ],
    output_docs=[("hidden_t", "1 x N x D"), ("cell_t", "1 x N x D")],
    args=[Arg("forget_bias", FLOAT, 0.0, "Bias term to add in while calculating forget gate"), *_ARGS],
    infer=_like(1),
    category="rnn",
)
class LSTMUnit(_Unit):
    """LSTMUnit computes the activations of a standard LSTM (without peephole connections), in
    a sequence-length aware fashion: i = sigmoid(x_i), f = sigmoid(x_f + forget_bias),
    o = sigmoid(x_o), g = tanh(x_g), c = f * c_prev + i * g, h = o * tanh(c), for rows with
    t < seq_lengths[n]; other rows carry their states over (zeros with drop_states)."""

    def run(self) -> None:
        n, d, invalid, _ = self._check(2)
        x = self.input(2)[0].reshape(n, 4, d)
        h = self.output(0, (1, n, d), x.dtype)
        c = self.output(1, (1, n, d), x.dtype)
        self._kernel(n, d, h, c)(invalid)

    def _kernel(self, n: int, d: int, h: np.ndarray, c: np.ndarray):
        """The step on the arrays bound now: a function of the invalid rows (or None). float32 runs the
        compiled kernel where it can (framework/kernels/recurrent.py), else the numpy ufuncs below."""
        h_prev, c_prev, x = self.input(0)[0], self.input(1)[0], self.input(2)[0].reshape(n, 4, d)
        dt = x.dtype
        sig, g = np.empty((n, 3, d), dt), np.empty((n, d), dt)
        fb, drop = dt.type(self.args.forget_bias), self.args.drop_states
        h2, c2 = h[0], c[0]
        multiply, tanh, add = np.multiply, np.tanh, np.add
        fused = None
        if dt == np.float32 and not np.shares_memory(h2, c_prev) and not np.shares_memory(c2, h_prev):
            fused = compiled.lstm_unit(x.reshape(n, 4 * d), c_prev, h2, c2, fb)

        def step(invalid) -> None:
            if fused is not None and fused():
                if invalid is not None:
                    _carry_over(invalid, drop, (h2, c2), (h_prev, c_prev))
                return
            _sigmoid_into(x[:, :3], sig)
            if fb:
                _sigmoid_into(x[:, 1] + fb, sig[:, 1])
            tanh(x[:, 3], out=g)
            multiply(sig[:, 1], c_prev, out=c2)
            multiply(g, sig[:, 0], out=g)
            add(c2, g, out=c2)
            tanh(c2, out=h2)
            multiply(h2, sig[:, 2], out=h2)
            if invalid is not None:
                _carry_over(invalid, drop, (h2, c2), (h_prev, c_prev))

        return step

    def compile(self):
        """run()'s work on the arrays bound now (framework.net.program); the rows past their
        sequence length are found from the current lengths and timestep values at each call."""
        h, c = self.outputs[0].array, self.outputs[1].array
        n, d = h.shape[1], h.shape[2]
        return self._with_lengths(self._kernel(n, d, h, c))


@register_op(
    "LSTMUnitGradient",
    inputs=(8, 9),
    outputs=3,
    input_docs=[
        ("hidden_t_prev", "1 x N x D"),
        ("cell_t_prev", "1 x N x D"),
        ("gates", "1 x N x 4D"),
        ("seq_lengths", "int32 [N] (if sequence_lengths)"),
        ("timestep", "int32 scalar"),
        ("hidden_t", "forward output"),
        ("cell_t", "forward output"),
        ("hidden_t_grad", "gradient of hidden_t"),
        ("cell_t_grad", "gradient of cell_t"),
    ],
    output_docs=[
        ("hidden_t_prev_grad", "zero for valid rows"),
        ("cell_t_prev_grad", "gradient of cell_t_prev"),
        ("gates_grad", "gradient of the gates"),
    ],
    args=[Arg("forget_bias", FLOAT, 0.0, "as LSTMUnit"), *_ARGS],
    infer=lambda args, ins: [ins[0], ins[1], ins[2]] if len(ins) > 2 else [UNKNOWN] * 3,
    category="rnn",
    private=True,
)
class LSTMUnitGradient(_Unit):
    """Gradient of LSTMUnit: gradients of hidden_t_prev (zero for valid rows: it reaches the
    gates through the FC outside the unit), cell_t_prev and the gates."""

    def setup(self) -> None:
        self.has_lengths = bool(self.args.sequence_lengths)
        want = 9 if self.has_lengths else 8
        if len(self.inputs) != want:
            raise self.arg_error(f"takes {want} inputs with sequence_lengths={int(self.has_lengths)}")

    def run(self) -> None:
        n, d, invalid, k = self._check(2)
        x = self.input(2)[0].reshape(n, 4, d)
        c = self.input(k + 1)
        dh, dc = self.input(k + 2), self.input(k + 3)
        for j, a in ((k + 1, c), (k + 2, dh), (k + 3, dc)):
            if a.shape != (1, n, d) or a.dtype != x.dtype:
                raise ShapeError(
                    f"{self.describe()}: '{self.input_names[j]}' must be {x.dtype} 1 x {n} x {d}, "
                    f"found {a.dtype} {list(a.shape)}"
                )
        dh_prev = self.output(0, (1, n, d), x.dtype)
        dc_prev = self.output(1, (1, n, d), x.dtype)
        dx = self.output(2, (1, n, 4 * d), x.dtype)
        self._kernel(n, d, k, dh_prev, dc_prev, dx)(invalid)

    def _kernel(self, n: int, d: int, k: int, dh_prev: np.ndarray, dc_prev: np.ndarray, dx: np.ndarray):
        """The gradient on the arrays bound now (preallocated scratch): a function of the invalid rows.
        float32 runs the compiled kernel where it can (framework/kernels/recurrent.py), else the ufuncs below."""
        c_prev, x = self.input(1)[0], self.input(2)[0].reshape(n, 4, d)
        c, dh, dc = self.input(k + 1)[0], self.input(k + 2)[0], self.input(k + 3)[0]
        dt = x.dtype
        sig, g, tc, ct, tmp = np.empty((n, 3, d), dt), *(np.empty((n, d), dt) for _ in range(4))
        i, f, o = sig[:, 0], sig[:, 1], sig[:, 2]
        fb, drop = dt.type(self.args.forget_bias), self.args.drop_states
        dh_prev, dc_prev, dx = dh_prev[0], dc_prev[0], dx[0].reshape(n, 4, d)
        mul, sub, add, tanh = np.multiply, np.subtract, np.add, np.tanh

        fused = None
        if dt == np.float32:
            x2, dx2 = x.reshape(n, 4 * d), dx.reshape(n, 4 * d)
            fused = compiled.lstm_unit_grad(x2, c_prev, c, dh, dc, dh_prev, dc_prev, dx2, fb)

        def one_minus_times(a, b, out):  # out = (1 - a) * a * b
            sub(1, a, out=tmp)
            mul(tmp, a, out=tmp)
            mul(tmp, b, out=out)

        def step(invalid) -> None:
            if fused is not None and fused():
                if invalid is not None:
                    dx[invalid] = 0
                    _carry_over(invalid, drop, (dh_prev, dc_prev), (dh, dc))
                return
            _sigmoid_into(x[:, :3], sig)
            if fb:
                _sigmoid_into(x[:, 1] + fb, f)
            tanh(x[:, 3], out=g)
            tanh(c, out=tc)
            mul(tc, tc, out=ct)  # c_term = dh * o * (1 - tanh(c)^2) + dc
            sub(1, ct, out=ct)
            mul(ct, o, out=ct)
            mul(ct, dh, out=ct)
            add(ct, dc, out=ct)
            mul(ct, f, out=dc_prev)
            dh_prev[...] = 0
            one_minus_times(i, g, dx[:, 0])  # c_term * g * i * (1 - i)
            mul(dx[:, 0], ct, out=dx[:, 0])
            one_minus_times(f, c_prev, dx[:, 1])  # c_term * c_prev * f * (1 - f)
            mul(dx[:, 1], ct, out=dx[:, 1])
            one_minus_times(o, tc, dx[:, 2])  # dh * tanh(c) * o * (1 - o)
            mul(dx[:, 2], dh, out=dx[:, 2])
            mul(g, g, out=tmp)  # c_term * i * (1 - g^2)
            sub(1, tmp, out=tmp)
            mul(tmp, i, out=tmp)
            mul(tmp, ct, out=dx[:, 3])
            if invalid is not None:
                dx[invalid] = 0
                _carry_over(invalid, drop, (dh_prev, dc_prev), (dh, dc))

        return step

    def compile(self):
        """run()'s work on the arrays bound now (framework.net.program)."""
        dh_prev, dc_prev, dx = (b.array for b in self.outputs)
        n, d = dh_prev.shape[1], dh_prev.shape[2]
        k = 4 if self.has_lengths else 3
        return self._with_lengths(self._kernel(n, d, k + 1, dh_prev, dc_prev, dx))


@gradient("LSTMUnit")
def _lstm_unit_grad(g):
    n = len(g.def_.input)
    ins = [g.I(i) for i in range(n)] + [g.O(0), g.O(1), g.GO(0), g.GO(1)]
    return [g.op("LSTMUnitGradient", ins, [g.GI(0), g.GI(1), g.GI(2)])]


@register_op(
    "GRUUnit",
    inputs=(3, 4),
    outputs=1,
    input_docs=[
        ("hidden_t_prev", "1 x N x D"),
        ("gates", "1 x N x 3D pre-activations in order r, z, h (r is not used here)"),
        ("seq_lengths", "int32 [N] (left out when sequence_lengths=0)"),
        ("timestep", "int32 scalar t"),
    ],
    output_docs=[("hidden_t", "1 x N x D")],
    args=_ARGS,
    infer=_like(0),
    category="rnn",
)
class GRUUnit(_Unit):
    """GRUUnit computes the activations of a standard GRU, in a sequence-length aware fashion:
    z = sigmoid(x_z), h_bar = tanh(x_h), h = h_prev * z + h_bar * (1 - z) for rows with
    t < seq_lengths[n]; other rows keep h_prev (zeros with drop_states). The reset gate has
    already been applied to x_h by the cell (gru_cell)."""

    k = 3
    n_states = 1

    def run(self) -> None:
        n, d, invalid, _ = self._check(1)
        h_prev, x = self.input(0)[0], self.input(1)[0].reshape(n, 3, d)
        z = _sigmoid_into(x[:, 1], np.empty((n, d), x.dtype))
        hb = np.tanh(x[:, 2])
        h = self.output(0, (1, n, d), x.dtype)[0]
        np.subtract(h_prev, hb, out=h)
        h *= z
        h += hb
        if invalid is not None:
            h[invalid] = 0 if self.args.drop_states else h_prev[invalid]


@register_op(
    "GRUUnitGradient",
    inputs=(5, 6),
    outputs=2,
    input_docs=[
        ("hidden_t_prev", "1 x N x D"),
        ("gates", "1 x N x 3D"),
        ("seq_lengths", "int32 [N] (if sequence_lengths)"),
        ("timestep", "int32 scalar"),
        ("hidden_t", "forward output"),
        ("hidden_t_grad", "gradient of hidden_t"),
    ],
    output_docs=[("hidden_t_prev_grad", "gradient of hidden_t_prev"), ("gates_grad", "gradient of the gates (r: 0)")],
    args=_ARGS,
    infer=lambda args, ins: [ins[0], ins[1]] if len(ins) > 1 else [UNKNOWN] * 2,
    category="rnn",
    private=True,
)
class GRUUnitGradient(_Unit):
    """Gradient of GRUUnit: gradients of hidden_t_prev and of the gates (zero for r)."""

    k = 3
    n_states = 1

    def setup(self) -> None:
        self.has_lengths = bool(self.args.sequence_lengths)
        want = 6 if self.has_lengths else 5
        if len(self.inputs) != want:
            raise self.arg_error(f"takes {want} inputs with sequence_lengths={int(self.has_lengths)}")

    def run(self) -> None:
        n, d, invalid, k = self._check(1)
        h_prev, x = self.input(0)[0], self.input(1)[0].reshape(n, 3, d)
        dh = self.input(k + 1)
        if dh.shape != (1, n, d) or dh.dtype != x.dtype:
            raise ShapeError(
                f"{self.describe()}: '{self.input_names[k + 1]}' must be {x.dtype} 1 x {n} x {d}, "
                f"found {dh.dtype} {list(dh.shape)}"
            )
        dh = dh[0]
        z = _sigmoid_into(x[:, 1], np.empty((n, d), x.dtype))
        hb = np.tanh(x[:, 2])
        dh_prev = self.output(0, (1, n, d), x.dtype)[0]
        dx = self.output(1, (1, n, 3 * d), x.dtype)[0].reshape(n, 3, d)
        np.multiply(dh, z, out=dh_prev)
        dx[:, 0] = 0
        np.multiply(dh * (h_prev - hb), z * (1 - z), out=dx[:, 1])
        np.multiply(dh * (1 - z), 1 - hb * hb, out=dx[:, 2])
        if invalid is not None:
            dx[invalid] = 0
            dh_prev[invalid] = 0 if self.args.drop_states else dh[invalid]


@gradient("GRUUnit")
def _gru_unit_grad(g):
    n = len(g.def_.input)
    ins = [g.I(i) for i in range(n)] + [g.O(0), g.GO(0)]
    return [g.op("GRUUnitGradient", ins, [g.GI(0), g.GI(1)])]
