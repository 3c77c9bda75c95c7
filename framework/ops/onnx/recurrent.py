"""ONNXRNN, ONNXGRU, ONNXLSTM: ONNX's recurrent layers (all directions, activations, clip, layout,
sequence_lens, initial states, peepholes, linear_before_reset, input_forget).

Caffe2's RecurrentNetwork/LSTMUnit/GRUUnit keep other gate orders, bias layouts and no per-layer
activation choice, so ONNX's layers are ops of their own. Inputs follow ONNX's positions:
``X, W, R, B, sequence_lens, initial_h`` (+ ``initial_c, P`` for LSTM); an absent optional input
is an EMPTY tensor (size 0) at its position (B: zeros, sequence_lens: every sequence full length,
initial states: zeros, P: no peepholes), trailing ones may be left out.

With ``sequence_lens``, steps at or past a sequence's length give zeros in Y and leave its state
unchanged (Y_h/Y_c hold the state after its last valid step); the reverse direction starts from
each sequence's own last valid step (onnxruntime's semantics).

Per direction the input projection of every step is one GEMM before the loop. On float32 with the default
activations (RNN: Tanh, Relu or Sigmoid) the loop is compiled (framework/kernels/
recurrent.py): the projection lands as [seq, batch, G*hidden], the layout the loop reads, and each step is one
GEMM by a contiguous copy of R^T (kept while R's tensor is unchanged) and one pass computing the gates and the
new state, h_t written straight into Y (with sequence_lens: in segments ending at each distinct length, the
reverse direction reading each row's steps from its own last one). Otherwise (or where the kernels cannot run)
the numpy loop: each step
one GEMM into a gates buffer the op keeps, with the activations applied in place on states held transposed
([hidden, batch], so each gate is a contiguous block of rows); with the default activations (and no clip or
peepholes) the sigmoid gates' rows of W, R and B are halved so one tanh serves every gate.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.kernels import recurrent as compiled
from framework.memory.allocator import check_elements
from framework.memory.binding import matches, stamp
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, FLOATS, INT, STRING, STRINGS, Arg, TensorSpec

_PARAMS = {  # activation -> (number of parameters, defaults)
    "relu": (0, ()),
    "tanh": (0, ()),
    "sigmoid": (0, ()),
    "softsign": (0, ()),
    "softplus": (0, ()),
    "affine": (2, (1.0, 0.0)),
    "leakyrelu": (1, (0.01,)),
    "thresholdedrelu": (1, (1.0,)),
    "scaledtanh": (2, (1.0, 1.0)),
    "hardsigmoid": (2, (0.2, 0.5)),
    "elu": (1, (1.0,)),
}


def _activation(name: str, a: float, b: float) -> Callable[[np.ndarray], np.ndarray]:
    if name == "relu":
        return lambda x: np.maximum(x, 0)
    if name == "tanh":
        return np.tanh
    if name == "sigmoid":
        return lambda x: 1.0 / (1.0 + np.exp(-x))
    if name == "softsign":
        return lambda x: x / (1 + np.abs(x))
    if name == "softplus":
        return lambda x: np.logaddexp(0, x)
    if name == "affine":
        return lambda x: a * x + b
    if name == "leakyrelu":
        return lambda x: np.where(x >= 0, x, a * x)
    if name == "thresholdedrelu":
        return lambda x: np.where(x > a, x, 0)
    if name == "scaledtanh":
        return lambda x: a * np.tanh(b * x)
    if name == "hardsigmoid":
        return lambda x: np.clip(a * x + b, 0, 1)
    return lambda x: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0)))  # elu


def _in_place(name: str, a: float, b: float) -> Callable[[np.ndarray], None]:
    """The activation as a function overwriting its argument (no temporaries for the common ones)."""
    if name == "sigmoid":

        def sigmoid(v: np.ndarray) -> None:
            np.negative(v, out=v)
            np.exp(v, out=v)
            v += 1
            np.reciprocal(v, out=v)

        return sigmoid
    if name == "tanh":
        return lambda v: np.tanh(v, out=v)
    if name == "relu":
        return lambda v: np.maximum(v, 0, out=v)
    fn = _activation(name, a, b)

    def other(v: np.ndarray) -> None:
        v[...] = fn(v)

    return other


# kind -> (gates per direction, default activations per direction, max inputs, max outputs)
_KINDS = {
    "RNN": (1, ("Tanh",), 6, 2),
    "GRU": (3, ("Sigmoid", "Tanh"), 6, 2),
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh"), 8, 3),
}
_DIRS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _infer(kind: str):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        x, w = ins[0], ins[1] if len(ins) > 1 else None
        dt = x.dtype
        n_out = args.num_outputs
        if x.shape is None or len(x.shape) != 3 or w is None or w.shape is None or len(w.shape) != 3:
            return [TensorSpec(None, dt)] * n_out
        g = _KINDS[kind][0]
        hidden = args.hidden_size if args.hidden_size > 0 else w.shape[1] // g
        d = w.shape[0]
        seq, batch = (x.shape[1], x.shape[0]) if args.layout else (x.shape[0], x.shape[1])
        y = (batch, seq, d, hidden) if args.layout else (seq, d, batch, hidden)
        h = (batch, d, hidden) if args.layout else (d, batch, hidden)
        return [TensorSpec(y, dt)] + [TensorSpec(h, dt)] * (n_out - 1)

    return infer


def _register(kind: str) -> Callable[[type], type]:
    gates, acts, max_in, max_out = _KINDS[kind]
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][:max_in]
    docs = {
        "X": "input sequences [seq_length, batch, input_size] (layout=1: [batch, seq_length, input_size])",
        "W": f"input weights [num_directions, {gates}*hidden_size, input_size]",
        "R": f"recurrence weights [num_directions, {gates}*hidden_size, hidden_size]",
        "B": f"biases [num_directions, {2 * gates}*hidden_size] (Wb then Rb); empty: zeros",
        "sequence_lens": "int32/int64 [batch] valid lengths; empty: all full length",
        "initial_h": "initial hidden state [num_directions, batch, hidden_size]; empty: zeros",
        "initial_c": "initial cell state [num_directions, batch, hidden_size]; empty: zeros",
        "P": "peephole weights [num_directions, 3*hidden_size] (i, o, f); empty: none",
    }
    outs = [("Y", "all hidden states [seq_length, num_directions, batch, hidden_size]"),
            ("Y_h", "last hidden state [num_directions, batch, hidden_size]"),
            ("Y_c", "last cell state [num_directions, batch, hidden_size]")][:max_out]  # fmt: skip
    args = [
        Arg("hidden_size", INT, 0, "number of hidden units (0: taken from R)", low=0),
        Arg("direction", STRING, "forward", "forward, reverse or bidirectional", choices=tuple(_DIRS)),
        Arg("activations", STRINGS, None, f"activation per gate function and direction (default {', '.join(acts)})"),
        Arg("activation_alpha", FLOATS, None, "alpha of the activations taking one, in order"),
        Arg("activation_beta", FLOATS, None, "beta of the activations taking one, in order"),
        Arg("clip", FLOAT, 0.0, "clip gate pre-activations to [-clip, clip] (0: no clipping)", low=0.0),
        Arg("layout", INT, 0, "0: sequence-major tensors, 1: batch-major", choices=(0, 1)),
    ]
    if kind == "GRU":
        args.append(Arg("linear_before_reset", INT, 0, "apply the recurrence weights before the reset gate"))
    if kind == "LSTM":
        args.append(Arg("input_forget", INT, 0, "couple the input and forget gates (f = 1 - i)"))
    types: dict = {i: "float" for i in range(max_in)}
    types[4] = "int"
    return register_op(
        f"ONNX{kind}",
        inputs=(3, max_in),
        outputs=(1, max_out),
        input_docs=[(n, docs[n]) for n in names],
        output_docs=outs,
        args=args,
        infer=_infer(kind),
        input_types=types,
        same_type=[tuple(i for i in range(max_in) if i != 4)],
        ranks={0: 3, 1: 3, 2: 3},
        category="recurrent",
    )


class _ONNXRecurrent(Operator):
    kind = "RNN"

    def setup(self) -> None:
        gates, defaults, _, _ = _KINDS[self.kind]
        a = self.args
        self.dirs = _DIRS[a.direction]
        n_f = len(defaults)
        acts = list(a.activations) if a.activations else list(defaults) * self.dirs
        if len(acts) != n_f * self.dirs:
            raise ArgumentError(
                f"{self.describe()}: activations needs {n_f * self.dirs} names ({n_f} per direction), got {acts}"
            )
        alphas, betas = list(a.activation_alpha or []), list(a.activation_beta or [])
        self.fns = []
        self.act_names = [str(name).lower() for name in acts]
        for name in acts:
            key = str(name).lower()
            if key not in _PARAMS:
                raise ArgumentError(f"{self.describe()}: unknown activation '{name}' (known: {', '.join(_PARAMS)})")
            n, dflt = _PARAMS[key]
            al = alphas.pop(0) if n >= 1 and alphas else (dflt[0] if n >= 1 else 0.0)
            be = betas.pop(0) if n >= 2 and betas else (dflt[1] if n >= 2 else 0.0)
            self.fns.append(_in_place(key, float(al), float(be)))
        self.gates = gates
        self._scratch: dict[str, np.ndarray] = {}
        per = [self.act_names[k * n_f : (k + 1) * n_f] for k in range(self.dirs)]
        self._compiled = all(self._compilable(names) for names in per)
        self._rt: tuple | None = None  # (stamp of R's tensor, per direction what _transpose_r gives)

    def _compilable(self, names: list) -> bool:
        """Whether a direction with these activations can run the compiled loop (kernels/recurrent.py)."""
        return False

    def _optional(self, i: int, shape: tuple, what: str) -> np.ndarray | None:
        if i >= len(self.inputs):
            return None
        v = self.input(i)
        if v.size == 0:
            return None
        if tuple(v.shape) != shape:
            raise ShapeError(
                f"{self.describe()}: {what} '{self.input_names[i]}' must have shape {list(shape)} (or be empty), "
                f"found {list(v.shape)}"
            )
        return v

    def _buf(self, name: str, shape: tuple, dt: np.dtype) -> np.ndarray:
        """Scratch array kept by the op between runs (reused while shape and type stay the same)."""
        v = self._scratch.get(name)
        if v is None or v.shape != shape or v.dtype != dt:
            v = self._scratch[name] = np.empty(shape, dt)
        return v

    def run(self) -> None:
        a = self.args
        x, w, r = self.input(0), self.input(1), self.input(2)
        if a.layout:
            x = x.transpose(1, 0, 2)
        seq, batch, isz = x.shape
        d, g = self.dirs, self.gates
        if w.shape[0] != d or w.shape[2] != isz or w.shape[1] % g:
            raise ShapeError(
                f"{self.describe()}: W '{self.input_names[1]}' must be [{d}, {g}*hidden_size, {isz}] "
                f"(direction {a.direction}), found {list(w.shape)}"
            )
        h = w.shape[1] // g
        if a.hidden_size and a.hidden_size != h:
            raise ShapeError(f"{self.describe()}: hidden_size={a.hidden_size} but W gives {h}")
        if tuple(r.shape) != (d, g * h, h):
            raise ShapeError(
                f"{self.describe()}: R '{self.input_names[2]}' must be {[d, g * h, h]}, found {list(r.shape)}"
            )
        b = self._optional(3, (d, 2 * g * h), "B")
        lens = self._optional(4, (batch,), "sequence_lens")
        if lens is not None and (np.any(lens < 0) or np.any(lens > seq)):
            raise ShapeError(f"{self.describe()}: sequence_lens '{self.input_names[4]}' must lie in [0, {seq}]")
        st_shape = (batch, d, h) if a.layout else (d, batch, h)
        h0 = self._optional(5, st_shape, "initial_h")
        c0 = self._optional(6, st_shape, "initial_c") if self.kind == "LSTM" else None
        p = self._optional(7, (d, 3 * h), "P") if self.kind == "LSTM" else None
        check_elements((seq, d, batch, h), x.dtype.itemsize, f"{self.describe()} output Y")
        if a.layout:
            h0 = None if h0 is None else h0.transpose(1, 0, 2)
            c0 = None if c0 is None else c0.transpose(1, 0, 2)
        dt = x.dtype
        if lens is not None and np.all(lens == seq):
            lens = None  # every sequence full length: the unmasked loop
        lens = None if lens is None else lens.astype(np.int64)
        y = self._buf("y", (seq, d, batch, h), dt)
        yh = self._buf("yh", (d, batch, h), dt)
        yc = self._buf("yc", (d, batch, h), dt)
        if self._compiled and dt == np.float32 and self._run_compiled(x, w, r, b, lens, h0, c0, p, y, yh, yc):
            self._write(y, yh, yc)
            return
        # The loop works on transposed states [hidden, batch]: each gate is then a contiguous block of rows,
        # and numpy's ufuncs run two to three times faster on contiguous blocks than on column slices.
        ht = self._buf("ht", (h, batch), dt)
        ct = self._buf("ct", (h, batch), dt)
        yt = self._buf("yt", (seq, h, batch), dt)
        n_f = len(self.fns) // d
        with np.errstate(all="ignore"):
            for k in range(d):
                reverse = a.direction == "reverse" or k == 1
                ht[...] = 0 if h0 is None else h0[k].T
                ct[...] = 0 if c0 is None else c0[k].T
                bk = None if b is None else b[k]
                pk = None if p is None else p[k][:, None]
                fns = self.fns[k * n_f : (k + 1) * n_f]
                wk, rk = w[k], r[k]
                scale = self._row_scale(self.act_names[k * n_f : (k + 1) * n_f], pk, h, dt)
                if scale is not None:
                    wk = np.multiply(wk, scale[:, None], out=self._buf("ws", wk.shape, dt))
                    rk = np.multiply(rk, scale[:, None], out=self._buf("rs", rk.shape, dt))
                if lens is None:
                    xw, rb = self._project(x, wk, bk, h, scale)
                    self._unmasked(xw, rk, rb, pk, ht, ct, fns, reverse, yt)
                else:
                    steps = np.arange(seq)[:, None]
                    active = steps < lens[None, :]  # [step, batch]
                    order = (
                        np.clip(lens[None, :] - 1 - steps, 0, seq - 1)
                        if reverse
                        else np.broadcast_to(steps, active.shape)
                    )
                    xs = x[order, np.arange(batch)] if reverse else x  # step s of row b reads time order[s, b]
                    xw, rb = self._project(xs, wk, bk, h, scale)
                    yt.fill(0)  # steps past a sequence's length stay zero
                    self._masked(xw, rk, rb, pk, active, order, ht, ct, fns, yt)
                np.copyto(y[:, k], yt.transpose(0, 2, 1))
                np.copyto(yh[k], ht.T)
                np.copyto(yc[k], ct.T)
        self._write(y, yh, yc)

    def _write(self, y, yh, yc) -> None:
        """Copy the results ([seq, d, batch, h], [d, batch, h] twice) to the outputs in the op's layout."""
        if self.args.layout:
            y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
        for i, v in enumerate((y, yh, yc)[: len(self.outputs)]):
            self.output(i, v.shape, v.dtype)[...] = v

    def _run_compiled(self, x, w, r, b, lens, h0, c0, p, y, yh, yc) -> bool:
        """Every direction by the compiled loop: the inputs of all steps projected by one GEMM into
        [seq, batch, G*h] (the layout the loop reads, no re-layout), then one kernel call per direction writing
        h_t straight into y. With sequence_lens (``lens``), see _masked_direction. False (nothing written to
        the outputs) when the kernels cannot run here."""
        seq, batch, isz = x.shape
        d, h = self.dirs, yh.shape[2]
        gh = self.gates * h
        dt = x.dtype
        xc = x
        if not x.flags.c_contiguous:  # layout 1: the steps' rows gathered once
            xc = self._buf("xc", x.shape, dt)
            np.copyto(xc, x)
        flat = self._buf("xwf", (seq, batch, gh), dt)
        h0k = self._buf("h0k", (batch, h), dt)
        t = self.input_tensor(2)
        if self._rt is None or not matches(self._rt[0], t):  # R^T copies, kept while R is unchanged
            self._rt = (stamp(t), [self._transpose_r(r[k]) for k in range(d)])
        rts = self._rt[1]
        for k in range(d):
            reverse = self.args.direction == "reverse" or k == 1
            order = None
            if lens is not None and reverse:  # step s of row b reads time order[s, b]: its own last step first
                order = np.clip(lens[None, :] - 1 - np.arange(seq)[:, None], 0, max(seq - 1, 0))
            xs = xc if order is None else xc[order, np.arange(batch)]
            np.matmul(xs.reshape(seq * batch, isz), w[k].T, out=flat.reshape(seq * batch, gh))
            h0k[...] = 0 if h0 is None else h0[k]
            c = yc[k]
            c[...] = 0 if c0 is None or self.kind != "LSTM" else c0[k]
            bias = self._buf("bias", (gh,), dt)
            if b is None:
                bias.fill(0)
            else:
                np.add(b[k][:gh], b[k][gh:], out=bias)
            if lens is not None:
                if not self._masked_direction(flat, rts[k], bias, b, k, h0k, c, p, y, yh, order, lens):
                    return False
                continue
            if not self._direction(flat, rts[k], bias, b, k, h0k, c, p, y, k, reverse):
                return False
            np.copyto(yh[k], h0k if seq == 0 else y[0 if reverse else seq - 1, k])
        return True

    def _masked_direction(self, xw, rt, bias, b, k, h0k, c, p, y, yh, order, lens) -> bool:
        """Direction k with sequence_lens: the rows run forward over xw (step s of row b projected from time
        order[s, b], or s without ``order``) in segments ending at each distinct length, so each row's final
        states are taken at its own last step; rows past their length compute values nobody reads. Then Y
        gets each valid step at its time and zeros elsewhere."""
        seq, batch = xw.shape[0], xw.shape[1]
        h = h0k.shape[1]
        ys = self._buf("ys", (seq, 1, batch, h), h0k.dtype)
        c_end = self._buf("c_end", c.shape, c.dtype)
        np.copyto(c_end, c)
        np.copyto(yh[k], h0k)  # rows of length 0 keep their initial states
        start, prev = 0, h0k
        for length in np.unique(lens[lens > 0]):
            stop = int(length)
            if not self._direction(xw[start:stop], rt, bias, b, k, prev, c, p, ys[start:stop], 0, False):
                return False
            rows = lens == stop
            yh[k][rows] = ys[stop - 1, 0][rows]
            c_end[rows] = c[rows]
            start, prev = stop, ys[stop - 1, 0]
        np.copyto(c, c_end)
        valid = np.arange(seq)[:, None] < lens[None, :]  # [step, batch]
        y[:, k] = 0
        steps, rows = np.nonzero(valid)
        times = steps if order is None else order[steps, rows]
        y[times, k, rows] = ys[steps, 0, rows]
        return True

    def _transpose_r(self, r: np.ndarray):
        """What the compiled loop takes of one direction's R [G*h, h]: its contiguous transpose."""
        return np.ascontiguousarray(r.T)

    def _direction(self, xw, rt, bias, b, k, h0k, c, p, y, slot, reverse) -> bool:
        """Run direction k's steps xw by the kind's compiled loop from hidden state h0k (and cell state c, in
        place), h_t into y[t, slot] (see _run_compiled); False if it could not run."""
        raise NotImplementedError

    def _row_scale(self, names: list, p, h: int, dt) -> np.ndarray | None:
        """Factors for the rows of W, R and B (the direction's activations ``names``, peepholes ``p``), or
        None: the weights as given."""
        return None

    def _project(self, x, w, b, h, scale):
        """W X_t^T for every step t in one GEMM, with the biases that can be added before the recurrence folded
        in: ([seq, G*h, batch], the recurrence bias still to add per step ([h, 1]) or None)."""
        seq, batch, _ = x.shape
        gh = w.shape[0]
        flat = self._buf("xw_flat", (gh, seq * batch), x.dtype)
        np.matmul(w, x.reshape(seq * batch, x.shape[2]).T, out=flat)  # one GEMM (a batched matmul is slower here)
        xw = self._buf("xw", (seq, gh, batch), x.dtype)
        by_step = flat.reshape(gh, seq, batch).transpose(1, 0, 2)
        rb = None
        if b is None:
            np.copyto(xw, by_step)
        else:
            bias = b[:gh] + b[gh:]
            if self.kind == "GRU" and self.args.linear_before_reset:  # Rb_h goes inside r * (H R_h^T + Rb_h)
                bias[2 * h :] = b[2 * h : gh]
                rb = b[gh + 2 * h :, None]
            if scale is not None:
                bias *= scale
            np.add(by_step, bias[:, None], out=xw)  # the bias added in the same pass as the re-layout
        return xw, rb

    def _unmasked(self, xw, r, rb, p, ht, ct, fns, reverse, yt) -> None:
        """Every sequence full length: each step's new hidden state is written straight into its slot of yt."""
        seq = xw.shape[0]
        prev = ht
        for s in range(seq):
            t = seq - 1 - s if reverse else s
            out = yt[t]
            self._step(xw[t], prev, ct, out, ct, r, rb, p, fns)
            prev = out
        if seq:
            ht[...] = prev

    def _masked(self, xw, r, rb, p, active, order, ht, ct, fns, yt) -> None:
        """With sequence_lens: step s of row b has read time order[s, b] into xw[s]; rows past their length
        (active[s, b] false) keep their state and leave yt zero."""
        nh = self._buf("nh", ht.shape, ht.dtype)
        nc = self._buf("nc", ct.shape, ct.dtype)
        for s in range(int(active.any(axis=1).sum())):  # steps where some row is still active
            nc[...] = ct
            self._step(xw[s], ht, ct, nh, nc, r, rb, p, fns)
            m = active[s]
            np.copyto(ht, nh, where=m[None, :])
            np.copyto(ct, nc, where=m[None, :])
            rows = np.nonzero(m)[0]
            yt[order[s, rows], :, rows] = nh[:, rows].T

    def _step(self, xt, ht, ct, nh, nc, r, rb, p, fns) -> None:
        """One step for all rows, states transposed ([hidden, batch]): reads xt (projected input, [G*h, batch]),
        ht, ct and R; writes the new states to nh and nc (nc may be ct itself; nh never aliases ht)."""
        raise NotImplementedError


def _clip_(v: np.ndarray, clip: float) -> None:
    if clip > 0:
        np.clip(v, -clip, clip, out=v)


@_register("RNN")
class ONNXRNN(_ONNXRecurrent):
    """ONNX RNN: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), f Tanh by default (per direction)."""

    kind = "RNN"

    def _compilable(self, names):
        return names[0] in compiled.RNN_ACTIVATIONS

    def _direction(self, xw, rt, bias, b, k, h0k, c, p, y, slot, reverse):
        g = self._buf("g", h0k.shape, h0k.dtype)
        act = self.act_names[k]
        return compiled.rnn(xw, rt, bias, h0k, y, slot, reverse, self.args.clip, act, g)

    def _step(self, xt, ht, ct, nh, nc, r, rb, p, fns) -> None:
        np.matmul(r, ht, out=nh)
        nh += xt
        _clip_(nh, self.args.clip)
        fns[0](nh)


@_register("GRU")
class ONNXGRU(_ONNXRecurrent):
    """ONNX GRU (gates z, r, h in W/R/B order): z = f(..), r = f(..), with linear_before_reset=0
    h~ = g(X W_h^T + (r * H) R_h^T + Rb_h + Wb_h), else g(X W_h^T + r * (H R_h^T + Rb_h) + Wb_h);
    H = (1 - z) * h~ + z * H. f Sigmoid, g Tanh by default."""

    kind = "GRU"

    def _compilable(self, names):
        return names == ["sigmoid", "tanh"]

    def _transpose_r(self, r):
        h = r.shape[1]
        return tuple(np.ascontiguousarray(part.T) for part in (r, r[: 2 * h], r[2 * h :]))

    def _direction(self, xw, rts, bias, b, k, h0k, c, p, y, slot, reverse):
        n, h = h0k.shape
        dt = h0k.dtype
        rbh = self._buf("rbh", (h,), dt)
        rbh.fill(0)
        lbr = bool(self.args.linear_before_reset)
        if lbr and b is not None:  # Rb_h goes inside r * (H R_h^T + Rb_h)
            bias[2 * h :] = b[k][2 * h : 3 * h]
            rbh[...] = b[k][5 * h :]
        scratch = [self._buf(f"g{i}", (n, m * h), dt) for i, m in enumerate((3, 2, 1, 1))]
        return compiled.gru(xw, rts, bias, rbh, h0k, y, slot, reverse, self.args.clip, lbr, scratch)

    def _row_scale(self, names, p, h, dt):
        # Default activations, no clip: the z and r rows are halved (exact in binary floating point), so
        # sigmoid(v) = 0.5 * tanh(v / 2) + 0.5 takes three in-place passes instead of four.
        self._halved = names == ["sigmoid", "tanh"] and self.args.clip == 0
        if not self._halved:
            return None
        scale = np.ones(3 * h, dt)
        scale[: 2 * h] = 0.5
        return scale

    def _gates(self, zr, f) -> None:
        if self._halved:
            np.tanh(zr, out=zr)
            zr *= 0.5
            zr += 0.5
        else:
            _clip_(zr, self.args.clip)
            f(zr)

    def _step(self, xt, ht, ct, nh, nc, r, rb, p, fns) -> None:
        f, g = fns
        clip = self.args.clip
        h = ht.shape[0]
        gates = self._buf("gates", (3 * h, ht.shape[1]), ht.dtype)
        tmp = self._buf("tmp", ht.shape, ht.dtype)
        zr, hh = gates[: 2 * h], gates[2 * h :]
        if self.args.linear_before_reset:
            np.matmul(r, ht, out=gates)
            zr += xt[: 2 * h]
            self._gates(zr, f)
            if rb is not None:
                hh += rb
            hh *= zr[h:]
        else:
            np.matmul(r[: 2 * h], ht, out=zr)
            zr += xt[: 2 * h]
            self._gates(zr, f)
            np.multiply(zr[h:], ht, out=tmp)
            np.matmul(r[2 * h :], tmp, out=hh)
        hh += xt[2 * h :]
        _clip_(hh, clip)
        g(hh)
        np.subtract(ht, hh, out=tmp)  # H = h~ + z * (H - h~)
        tmp *= zr[:h]
        np.add(hh, tmp, out=nh)


@_register("LSTM")
class ONNXLSTM(_ONNXRecurrent):
    """ONNX LSTM (gates i, o, f, c in W/R/B order; peepholes P = [Pi, Po, Pf]):
    i = f(.. + Pi * C_{t-1}), f_t = f(.. + Pf * C_{t-1}) (1 - i with input_forget), c = g(..),
    C = f_t * C_{t-1} + i * c, o = f(.. + Po * C), H = o * h(C). Defaults f Sigmoid, g h Tanh."""

    kind = "LSTM"

    def _compilable(self, names):
        return names == ["sigmoid", "tanh", "tanh"]

    def _direction(self, xw, rt, bias, b, k, h0k, c, p, y, slot, reverse):
        n, h = h0k.shape
        pk = self._buf("p_none", (0,), h0k.dtype) if p is None else np.ascontiguousarray(p[k])
        g = self._buf("g", (n, 4 * h), h0k.dtype)
        a = self.args
        return compiled.lstm(
            xw, rt, bias, pk, h0k, c, y, slot, reverse, a.clip, a.input_forget, (0, h, 2 * h, 3 * h), g
        )

    def _row_scale(self, names, p, h, dt):
        # Default activations, no peepholes, no clip: the i, o, f rows are halved (exact in binary floating
        # point), so one tanh over all four gates and 0.5 * t + 0.5 on the first three give
        # sigmoid(v) = 0.5 * tanh(v / 2) + 0.5 for i, o, f and tanh for c.
        a = self.args
        self._halved = names == ["sigmoid", "tanh", "tanh"] and p is None and not a.input_forget and a.clip == 0
        if not self._halved:
            return None
        scale = np.ones(4 * h, dt)
        scale[: 3 * h] = 0.5
        return scale

    def _step(self, xt, ht, ct, nh, nc, r, rb, p, fns) -> None:
        f, g, hf = fns
        clip = self.args.clip
        h = ht.shape[0]
        gates = self._buf("gates", (4 * h, ht.shape[1]), ht.dtype)
        np.matmul(r, ht, out=gates)
        gates += xt
        gi, go, gf, gc = gates[:h], gates[h : 2 * h], gates[2 * h : 3 * h], gates[3 * h :]
        plain = p is None and not self.args.input_forget
        if self._halved:
            np.tanh(gates, out=gates)
            sig = gates[: 3 * h]
            sig *= 0.5
            sig += 0.5
        elif plain:  # i, o, f in one pass
            _clip_(gates, clip)
            f(gates[: 3 * h])
        else:
            tmp = self._buf("tmp", ct.shape, ct.dtype)
            if p is not None:
                np.multiply(p[:h], ct, out=tmp)
                gi += tmp
                np.multiply(p[2 * h :], ct, out=tmp)
                gf += tmp
            _clip_(gi, clip)
            f(gi)
            if self.args.input_forget:
                np.subtract(1, gi, out=gf)
            else:
                _clip_(gf, clip)
                f(gf)
            _clip_(gc, clip)
        if not self._halved:
            g(gc)
        np.multiply(gi, gc, out=gc)  # i * c
        np.multiply(gf, ct, out=nc)  # nc may be ct: f * C_{t-1} in place
        nc += gc
        if not plain:
            if p is not None:
                np.multiply(p[h : 2 * h], nc, out=gc)
                go += gc
            _clip_(go, clip)
            f(go)
        np.copyto(nh, nc)
        hf(nh)
        nh *= go


for _k in _KINDS:
    no_gradient(f"ONNX{_k}")
