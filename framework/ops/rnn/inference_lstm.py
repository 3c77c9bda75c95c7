"""InferenceLSTM: a whole (multi-layer, optionally bidirectional) LSTM in one op, PyTorch's layout.

Caffe2's inference_lstm_op (ported from ATen's LSTM): inputs are the sequence, the initial
hidden and cell states (layers * directions, N, H), then per layer and direction the weights
w_ih (4H x in), w_hh (4H x H) and, with has_biases, b_ih and b_hh (4H), gates in PyTorch's order
i, f, g, o. Outputs: the last layer's output sequence (both directions concatenated), and the
final hidden and cell states per layer and direction.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.kernels import recurrent as compiled
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, UNKNOWN, Arg, TensorSpec


def _direction(x, w_ih, w_hh, bias, h0, c0, reverse: bool, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One layer and direction over the whole sequence x [T, N, D] into out [T, N, H]; (final h, final c) [N, H].

    float32 runs the compiled loop where it can (framework/kernels/recurrent.py), otherwise this numpy loop.
    The input projection of every step is one matmul before the loop. The loop keeps its states transposed,
    [H, N], so that each gate is a contiguous block of rows of the [4H, N] gates buffer, computed in place. The
    gate rows are reordered i, f, o, g and the sigmoid rows' weights halved (exact in binary floating point), so
    one tanh over all gates followed by ``0.5 * t + 0.5`` on the first 3H rows gives sigmoid(v) =
    0.5 * tanh(v / 2) + 0.5 for i, f, o and tanh for g."""
    t_len, n, _ = x.shape
    hsz = w_hh.shape[1]
    dt = x.dtype
    if dt == np.float32 and compiled.available():
        done = _compiled_direction(x, w_ih, w_hh, bias, h0, c0, reverse, out)
        if done is not None:
            return done
    perm = np.r_[0 : 2 * hsz, 3 * hsz : 4 * hsz, 2 * hsz : 3 * hsz]
    scale = np.ones(4 * hsz, dt)
    scale[: 3 * hsz] = 0.5
    w_x = w_ih[perm] * scale[:, None]
    w_h = w_hh[perm] * scale[:, None]
    xw = np.matmul(w_x, x.transpose(0, 2, 1))  # [T, 4H, N]
    xw += (bias[perm] * scale)[:, None]
    ht = np.ascontiguousarray(h0.T, dt)
    ct = np.ascontiguousarray(c0.T, dt)
    yt = np.empty((t_len, hsz, n), dt)
    gates = np.empty((4 * hsz, n), dt)
    i, f, o, g = gates[:hsz], gates[hsz : 2 * hsz], gates[2 * hsz : 3 * hsz], gates[3 * hsz :]
    sig = gates[: 3 * hsz]
    prev = ht
    for s in range(t_len):
        t = t_len - 1 - s if reverse else s
        np.matmul(w_h, prev, out=gates)
        gates += xw[t]
        np.tanh(gates, out=gates)
        sig *= 0.5
        sig += 0.5
        ct *= f  # c = f * c + i * g
        g *= i
        ct += g
        h = yt[t]
        np.tanh(ct, out=h)  # h = o * tanh(c)
        h *= o
        prev = h
    np.copyto(out, yt.transpose(0, 2, 1))
    return prev.T, ct.T


def _compiled_direction(x, w_ih, w_hh, bias, h0, c0, reverse, out):
    """_direction by the compiled loop (framework/kernels/recurrent.py), PyTorch's gate order i, f, g, o given
    as column offsets; None when the kernels cannot run here (nothing written)."""
    t_len, n, din = x.shape
    hsz = w_hh.shape[1]
    xw = np.matmul(np.ascontiguousarray(x).reshape(t_len * n, din), w_ih.T).reshape(t_len, n, 4 * hsz)
    rt = np.ascontiguousarray(w_hh.T)
    h_init = np.ascontiguousarray(h0, np.float32)
    c = np.array(c0, np.float32, order="C")  # initial in, final out
    y = out.reshape(t_len, 1, n, hsz)
    g = np.empty((n, 4 * hsz), np.float32)
    bias = np.ascontiguousarray(bias, np.float32)
    offsets = (0, 3 * hsz, hsz, 2 * hsz)  # i, o, f, c (= g)
    if not compiled.lstm(xw, rt, bias, np.zeros(0, np.float32), h_init, c, y, 0, reverse, 0.0, False, offsets, g):
        return None
    return (h_init if t_len == 0 else out[0 if reverse else t_len - 1]), c


def _infer(args, ins):
    x, h = ins[0], ins[1] if len(ins) > 1 else UNKNOWN
    if x.shape is None or h.shape is None or len(x.shape) != 3 or len(h.shape) != 3:
        return [UNKNOWN] * 3
    dirs = 2 if args.bidirectional else 1
    out = (*x.shape[:2], h.shape[2] * dirs)
    return [TensorSpec(out, x.dtype), h, ins[2] if len(ins) > 2 else h]


@register_op(
    "InferenceLSTM",
    inputs=(3, float("inf")),
    outputs=3,
    input_docs=[
        ("input", "T x N x D (N x T x D with batch_first)"),
        ("hidden_0", "initial hidden states, (num_layers * directions) x N x H"),
        ("cell_0", "initial cell states, (num_layers * directions) x N x H"),
        ("weights", "per layer and direction: w_ih, w_hh[, b_ih, b_hh] (PyTorch's gate order i, f, g, o)"),
    ],
    output_docs=[
        ("output", "the output of the last layer of lstm"),
        ("hidden", "hidden state at t = seq_len"),
        ("cell", "cell state at t = seq_len"),
    ],
    args=[
        Arg("num_layers", INT, 1, "number of layers in the lstm stack"),
        Arg("has_biases", BOOL, True, "whether the cells have biases or not"),
        Arg("batch_first", BOOL, False, "whether the batch is at dim 0"),
        Arg("bidirectional", BOOL, False, "if bidirectional"),
    ],
    infer=_infer,
    category="rnn",
)
class InferenceLSTM(Operator):
    """A multi-layer (optionally bidirectional) LSTM over a whole sequence in one op, with
    PyTorch's weight layout (as Caffe2's InferenceLSTM, which ports ATen's). No gradient."""

    def setup(self) -> None:
        a = self.args
        self.dirs = 2 if a.bidirectional else 1
        per = 4 if a.has_biases else 2
        if a.num_layers < 1:
            raise self.arg_error(f"num_layers must be >= 1, got {a.num_layers}")
        want = 3 + per * a.num_layers * self.dirs
        if len(self.inputs) != want:
            raise self.arg_error(
                f"expects {want} inputs for num_layers={a.num_layers}, bidirectional={int(a.bidirectional)}, "
                f"has_biases={int(a.has_biases)} (input, hidden_0, cell_0, {per} weights per layer and direction); "
                f"got {len(self.inputs)}"
            )
        self.per = per

    def run(self) -> None:
        a = self.args
        x, h0, c0 = self.input(0), self.input(1), self.input(2)
        if x.ndim != 3 or x.dtype.kind != "f":
            raise ShapeError(f"{self.describe()}: input must be a 3-D float tensor, found {x.dtype} {list(x.shape)}")
        if a.batch_first:
            x = x.transpose(1, 0, 2)
        t_len, n, _ = x.shape
        layers = a.num_layers * self.dirs
        if h0.ndim != 3 or h0.shape[:2] != (layers, n) or c0.shape != h0.shape:
            raise ShapeError(
                f"{self.describe()}: hidden_0/cell_0 must both be {layers} x {n} x H, found {list(h0.shape)} and "
                f"{list(c0.shape)}"
            )
        hsz = h0.shape[2]
        params = [self.input(k) for k in range(3, len(self.inputs))]
        layer_in = x
        hs, cs = np.empty_like(h0), np.empty_like(c0)
        for layer in range(a.num_layers):
            outs = []
            for d in range(self.dirs):
                idx = layer * self.dirs + d
                w = params[idx * self.per : (idx + 1) * self.per]
                w_ih, w_hh = w[0], w[1]
                din = layer_in.shape[2]
                if w_ih.shape != (4 * hsz, din) or w_hh.shape != (4 * hsz, hsz) or w_ih.dtype != x.dtype:
                    raise ShapeError(
                        f"{self.describe()}: layer {layer} direction {d}: w_ih must be {4 * hsz} x {din} and w_hh "
                        f"{4 * hsz} x {hsz} ({x.dtype}), found {list(w_ih.shape)} and {list(w_hh.shape)}"
                    )
                bias = np.zeros(4 * hsz, x.dtype)
                if a.has_biases:
                    if w[2].shape != (4 * hsz,) or w[3].shape != (4 * hsz,):
                        raise ShapeError(f"{self.describe()}: biases of layer {layer} must have {4 * hsz} values")
                    bias = w[2] + w[3]
                out = np.empty((t_len, n, hsz), x.dtype)
                hs[idx], cs[idx] = _direction(layer_in, w_ih, w_hh, bias, h0[idx], c0[idx], d == 1, out)
                outs.append(out)
            layer_in = np.concatenate(outs, axis=2) if self.dirs == 2 else outs[0]
        result = layer_in.transpose(1, 0, 2) if a.batch_first else layer_in
        np.copyto(self.output(0, result.shape, x.dtype), result)
        np.copyto(self.output(1, hs.shape, hs.dtype), hs)
        np.copyto(self.output(2, cs.shape, cs.dtype), cs)


no_gradient("InferenceLSTM")
