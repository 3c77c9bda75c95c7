"""Packing sequences for RNNs, and decoders: PackRNNSequence, UnpackRNNSequence,
CTCGreedyDecoder, ViterbiPath, SwapBestPath (Caffe2's pack_rnn_sequence_op, ctc_greedy_decoder_op,
crf_viterbi_op)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, Arg, TensorSpec

_VALUE_TYPES = (np.int32, np.int64, np.float32, np.float64)


def _lengths(op: Operator, i: int = 1) -> np.ndarray:
    lengths = op.input(i)
    if lengths.ndim != 1 or lengths.dtype != np.int32 or (lengths < 0).any():
        raise ShapeError(
            f"{op.describe()}: lengths '{op.input_names[i]}' must be 1-D non-negative int32, "
            f"found {lengths.dtype} {list(lengths.shape)}"
        )
    return lengths


class _Pack(Operator):
    forward = True

    def run(self) -> None:
        values, lengths = self.input(0), _lengths(self)
        if values.dtype not in _VALUE_TYPES:
            raise TypeMismatchError(
                f"{self.describe()}: values must be int32/int64/float32/float64, found {values.dtype}"
            )
        off = 1 if self.forward else 2
        if values.ndim <= off:
            raise ShapeError(
                f"{self.describe()}: values must have more than {off} dimensions, found {list(values.shape)}"
            )
        cols = lengths.size
        rows = int(lengths.max()) if cols else 0
        total = int(lengths.sum())
        feat = values.shape[off:]
        if self.forward:
            if values.shape[0] != total:
                raise ShapeError(f"{self.describe()}: values have {values.shape[0]} rows, lengths sum to {total}")
            out = self.output(0, (rows, cols, *feat), values.dtype)
            out[...] = 0
            pos = 0
            for c, n in enumerate(lengths.tolist()):
                out[:n, c] = values[pos : pos + n]
                pos += n
        else:
            if values.shape[1] != cols or values.shape[0] < rows:
                raise ShapeError(
                    f"{self.describe()}: packed values {list(values.shape)} do not hold {cols} columns of up to "
                    f"{rows} rows"
                )
            out = self.output(0, (total, *feat), values.dtype)
            pos = 0
            for c, n in enumerate(lengths.tolist()):
                out[pos : pos + n] = values[:n, c]
                pos += n


@register_op(
    "PackRNNSequence",
    inputs=2,
    outputs=1,
    input_docs=[("values", "Data tensor, contains a sequence of features"), ("lengths", "lengths with each number")],
    output_docs=[("output", "Packed values: max(lengths) x len(lengths) x features, zero padded")],
    infer=lambda args, ins: [
        TensorSpec(
            (None, ins[1].shape[0] if ins[1].shape else None, *ins[0].shape[1:]) if ins[0].shape else None,
            ins[0].dtype,
        )
    ],
    category="rnn",
)
class PackRNNSequence(_Pack):
    """Pack values based on the length blob. Each number from length blob represents the
    corresponding values that need to be packed. The dimension for each pack is the same as the
    maximum number from the length blob (padding with zero is implemented for smaller length
    value). The overall output dimension is: T * N * D, where T is the max number of lengths, N
    is the size of lengths, and D is the dimension of each feature value."""

    forward = True


@register_op(
    "UnpackRNNSequence",
    inputs=2,
    outputs=1,
    input_docs=[("values", "Packed data: T x N x features"), ("lengths", "lengths with each number")],
    output_docs=[("output", "The sum(lengths) rows, sequence after sequence")],
    infer=lambda args, ins: [
        TensorSpec((None, *ins[0].shape[2:]) if ins[0].shape and len(ins[0].shape) > 2 else None, ins[0].dtype)
    ],
    category="rnn",
)
class UnpackRNNSequence(_Pack):
    """This is the reverse operator for PackRNNSequence. It maps the packed values back to
    sequence values based on the length blob. Each number from length blob represents the
    corresponding values that has been grouped. The dimension for each pack is the same as the
    maximum number from the length blob (padding with zero was implemented for smaller length
    value). The overall output dimension is: M * D, where M is the sum of lengths, and D is the
    dimension of each feature value."""

    forward = False


@gradient("PackRNNSequence")
def _pack_grad(g):
    return [g.op("UnpackRNNSequence", [g.GO(0), g.I(1)], [g.GI(0)])]


@gradient("UnpackRNNSequence")
def _unpack_grad(g):
    return [g.op("PackRNNSequence", [g.GO(0), g.I(1)], [g.GI(0)])]


@register_op(
    "CTCGreedyDecoder",
    inputs=(1, 2),
    outputs=2,
    input_docs=[
        ("INPUTS", "3D float Tensor sized [max_time, batch_size, num_classes]"),
        ("SEQ_LEN", "(optional) 1D int vector containing sequence lengths, having size [batch_size]"),
    ],
    output_docs=[
        ("OUTPUT_LEN", "Output_len matrix size (batch). The row store: [decoded_length]"),
        ("VALUES", "Values vector, size (total_decoded_outputs). The vector stores the decoded classes"),
    ],
    args=[Arg("merge_repeated", BOOL, True, "When merge_repeated is true, merge repeated classes in output.")],
    infer=lambda args, ins: [
        TensorSpec((ins[0].shape[1],) if ins[0].shape is not None else None, np.dtype(np.int32)),
        TensorSpec(None, np.dtype(np.int32)),
    ],
    category="rnn",
)
class CTCGreedyDecoder(Operator):
    """Greedy decoder for connectionist temporal classification: per time step the most likely
    class (first on ties); class 0 is the blank and is dropped; with merge_repeated, a class equal
    to the previous step's is dropped too."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim != 3 or x.dtype.kind != "f":
            raise ShapeError(f"{self.describe()}: INPUTS must be a 3-D float tensor, found {x.dtype} {list(x.shape)}")
        t_max, batch, classes = x.shape
        if len(self.inputs) > 1:
            seq = self.input(1)
            if seq.dtype != np.int32 or seq.shape != (batch,) or (seq < 0).any() or (seq > t_max).any():
                raise ShapeError(
                    f"{self.describe()}: SEQ_LEN must be int32 [{batch}] with values in [0, {t_max}], "
                    f"found {seq.dtype} {list(seq.shape)}"
                )
        else:
            seq = np.full(batch, t_max, np.int32)
        best = np.argmax(x, axis=2) if classes else np.zeros((t_max, batch), np.int64)
        values, lens = [], []
        for b in range(batch):
            prev, n = 0, 0
            for t in range(int(seq[b])):
                k = int(best[t, b])
                if k != 0 and (not self.args.merge_repeated or k != prev):
                    values.append(k)
                    n += 1
                prev = k
            lens.append(n)
        np.copyto(self.output(0, (batch,), np.int32), lens, casting="unsafe")
        np.copyto(self.output(1, (len(values),), np.int32), values, casting="unsafe")


@register_op(
    "ViterbiPath",
    inputs=2,
    outputs=1,
    input_docs=[("predictions", "N*D predictions matrix"), ("transitions", "D*D transitions matrix")],
    output_docs=[("viterbi_path", "N*1 vector holds the best path indices")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape[:1] if ins[0].shape else None, np.dtype(np.int32))],
    category="rnn",
)
class ViterbiPath(Operator):
    """Given a predictions matrix and a transitions matrix, get the path with the best score:
    trellis[0] = predictions[0], trellis[t][k] = predictions[t][k] + max_j (trellis[t-1][j] +
    transitions[j][k]) (first j on ties), then backtrack from the best final state."""

    def run(self) -> None:
        p, tr = self.input(0), self.input(1)
        if p.ndim != 2 or tr.ndim != 2 or p.dtype != np.float32 or tr.dtype != np.float32:
            raise ShapeError(f"{self.describe()}: Predictions and transitions should be 2D float matrices")
        if tr.shape != (p.shape[1], p.shape[1]):
            raise ShapeError(
                f"{self.describe()}: Predictions and transitions dimensions not matching: {list(p.shape)} and "
                f"{list(tr.shape)}"
            )
        n, d = p.shape
        out = self.output(0, (n,), np.int32)
        if n == 0 or d == 0:
            out[...] = 0
            return
        back = np.zeros((n, d), np.int64)
        trellis = p[0].astype(np.float32)
        for t in range(1, n):
            dp = trellis[:, None] + tr
            back[t] = np.argmax(dp, axis=0)
            trellis = (p[t] + dp.max(axis=0)).astype(np.float32)
        path = [int(np.argmax(trellis))]
        for t in range(n - 1, 0, -1):
            path.append(int(back[t, path[-1]]))
        out[...] = path[::-1]


@register_op(
    "SwapBestPath",
    inputs=2,
    outputs=1,
    input_docs=[("predictions", "N*D predictions matrix"), ("bestPath", "N*1 vector holds the best path indices")],
    output_docs=[("new_predictions", "N*D updated predictions matrix")],
    infer=lambda args, ins: [ins[0]],
    category="rnn",
)
class SwapBestPath(Operator):
    """Given a sequence of indices and a matrix, enforce that these indices have the best
    columnwise scores: in each row, the value at bestPath[i] is swapped with the row's maximum
    (the first maximum on ties)."""

    def run(self) -> None:
        x, idx = self.input(0), self.input(1)
        if x.ndim != 2 or idx.ndim != 1 or x.dtype != np.float32:
            raise ShapeError(f"{self.describe()}: predictions should be a 2D float matrix and bestPath a 1D vector")
        if idx.shape[0] != x.shape[0] or idx.dtype.kind not in "iu":
            raise ShapeError(f"{self.describe()}: predictions and bestPath dimensions not matching")
        if idx.size and (idx.min() < 0 or idx.max() >= x.shape[1]):
            raise ShapeError(f"{self.describe()}: bestPath indices must be in [0, {x.shape[1]})")
        out = self.output(0, x.shape, np.float32)
        np.copyto(out, x)
        if x.size == 0:
            return
        rows = np.arange(x.shape[0])
        old = np.argmax(x, axis=1)
        new = idx.astype(np.int64)
        a, b = out[rows, new].copy(), out[rows, old].copy()
        out[rows, new] = b
        out[rows, old] = a


no_gradient("CTCGreedyDecoder", "ViterbiPath", "SwapBestPath")


@register_op(
    "CTCBeamSearchDecoder",
    inputs=(1, 2),
    outputs=(2, 3),
    input_docs=[
        ("INPUTS", "3D float Tensor sized [max_activation_length, batch_size, alphabet_size] of probabilities"),
        ("SEQ_LEN", "(optional) 1D int vector containing sequence lengths, having size [batch_size]"),
    ],
    output_docs=[
        ("OUTPUT_LEN", "int32 [batch_size * num_candidates]: the length of each decoded candidate (0: none)"),
        ("VALUES", "The flattened vector of the candidates' sequences, in batch then rank order"),
        ("OUTPUT_PROB", "(optional) float [batch_size * num_candidates]: each candidate's probability"),
    ],
    args=[
        Arg("beam_width", INT, 10, "Maximum number of candidates to carry over to next activation step."),
        Arg("prune_threshold", FLOAT, 0.001, "Probability threshold below which outputs are ignored."),
        Arg("num_candidates", INT, 1, "Number of best candidates to output per batch item (Caffe2 2020)."),
    ],
    infer=lambda args, ins: [
        TensorSpec((ins[0].shape[1] * args.num_candidates,) if ins[0].shape is not None else None, np.dtype(np.int32)),
        TensorSpec(None, np.dtype(np.int32)),
        TensorSpec(
            (ins[0].shape[1] * args.num_candidates,) if ins[0].shape is not None else None, np.dtype(np.float32)
        ),
    ][: args.num_outputs],
    category="rnn",
)
class CTCBeamSearchDecoder(Operator):
    """Prefix beam search decoder for connectionist temporal classification (class 0 is the
    blank): per step, classes with probability <= prune_threshold are skipped (all are used if
    none passes), the beam_width most probable prefixes are kept (ties: the lexicographically
    smaller prefix, as Caffe2's ordered maps). The ``num_candidates`` best prefixes of the last step are
    the output (Caffe2 2020): their lengths (0 for a missing candidate) and, with a third output, their
    probabilities (Pb + Pnb). Probabilities are summed in double precision (Caffe2: float)."""

    def setup(self) -> None:
        if self.args.beam_width < 0:
            raise self.arg_error(f"beam_width must be >= 0, got {self.args.beam_width}")
        if self.args.num_candidates < 1:
            raise self.arg_error(f"num_candidates must be >= 1, got {self.args.num_candidates}")

    def run(self) -> None:
        x = self.input(0)
        if x.ndim != 3 or x.dtype != np.float32:
            raise ShapeError(f"{self.describe()}: INPUTS must be a 3-D float tensor, found {x.dtype} {list(x.shape)}")
        t_max, batch, classes = x.shape
        if len(self.inputs) > 1:
            seq = self.input(1)
            if seq.dtype != np.int32 or seq.shape != (batch,) or (seq < 0).any() or (seq > t_max).any():
                raise ShapeError(f"{self.describe()}: SEQ_LEN must be int32 [{batch}] with values in [0, {t_max}]")
        else:
            seq = np.full(batch, t_max, np.int32)
        k = self.args.num_candidates
        lens, probs, values = np.zeros(batch * k, np.int32), np.zeros(batch * k, np.float32), []
        for b in range(batch):
            ranked = self._decode(x[: int(seq[b]), b].astype(np.float64), classes)
            for j, (prefix, prob) in enumerate(ranked[:k]):
                lens[b * k + j] = len(prefix)
                probs[b * k + j] = prob
                values.extend(prefix)
        np.copyto(self.output(0, (batch * k,), np.int32), lens)
        np.copyto(self.output(1, (len(values),), np.int32), values, casting="unsafe")
        if len(self.outputs) > 2:
            np.copyto(self.output(2, (batch * k,), np.float32), probs)

    def _decode(self, probs: np.ndarray, classes: int) -> list:
        """The last step's prefixes with their probabilities, best first (empty when there is no step)."""
        beam, thr = self.args.beam_width, self.args.prune_threshold
        pb, pnb = {(): 1.0}, {(): 0.0}
        prev = [()]
        ranked: list = []
        for ctc in probs:
            alpha = [c for c in range(classes) if ctc[c] > thr] or list(range(classes))
            nb, nnb = {}, {}
            prev_set = set(prev)
            for ln in sorted(prev_set):
                for c in alpha:
                    if c == 0:
                        nb[ln] = nb.get(ln, 0.0) + ctc[0] * (pb.get(ln, 0.0) + pnb.get(ln, 0.0))
                        continue
                    lp = ln + (c,)
                    if ln and c == ln[-1]:
                        nnb[lp] = nnb.get(lp, 0.0) + ctc[c] * pb.get(ln, 0.0)
                        nnb[ln] = nnb.get(ln, 0.0) + ctc[c] * pnb.get(ln, 0.0)
                    else:
                        nnb[lp] = nnb.get(lp, 0.0) + ctc[c] * (pb.get(ln, 0.0) + pnb.get(ln, 0.0))
                    if lp not in prev_set:
                        nb[lp] = nb.get(lp, 0.0) + ctc[0] * (pb.get(lp, 0.0) + pnb.get(lp, 0.0))
                        nnb[lp] = nnb.get(lp, 0.0) + ctc[c] * pnb.get(lp, 0.0)
            total = dict(nb)
            for k, v in nnb.items():
                total[k] = total.get(k, 0.0) + v
            ranked = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
            prev = [k for k, _ in ranked[:beam]]
            pb, pnb = nb, nnb
        return ranked


should_not_do_gradient("CTCBeamSearchDecoder")
