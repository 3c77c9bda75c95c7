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
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, UNKNOWN, Arg, TensorSpec


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.tanh(0.5 * x) + 0.5


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
                xw = layer_in.reshape(-1, din) @ w_ih.T + bias
                xw = xw.reshape(t_len, n, 4 * hsz)
                h, c = h0[idx].astype(x.dtype), c0[idx].astype(x.dtype)
                out = np.empty((t_len, n, hsz), x.dtype)
                steps = range(t_len - 1, -1, -1) if d == 1 else range(t_len)
                for t in steps:
                    g = xw[t] + h @ w_hh.T
                    i, f = _sigmoid(g[:, :hsz]), _sigmoid(g[:, hsz : 2 * hsz])
                    gg, o = np.tanh(g[:, 2 * hsz : 3 * hsz]), _sigmoid(g[:, 3 * hsz :])
                    c = f * c + i * gg
                    h = o * np.tanh(c)
                    out[t] = h
                hs[idx], cs[idx] = h, c
                outs.append(out)
            layer_in = np.concatenate(outs, axis=2) if self.dirs == 2 else outs[0]
        result = layer_in.transpose(1, 0, 2) if a.batch_first else layer_in
        np.copyto(self.output(0, result.shape, x.dtype), result)
        np.copyto(self.output(1, hs.shape, hs.dtype), hs)
        np.copyto(self.output(2, cs.shape, cs.dtype), cs)


no_gradient("InferenceLSTM")
