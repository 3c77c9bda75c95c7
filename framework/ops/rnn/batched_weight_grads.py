"""RecurrentNetworkGradient's FC weight gradients as one GEMM over all time steps instead of one per step.

The backward step net of a recurrent cell computes, at every step t, ``FCGradient(X_t, W, dY_t)``: the
input gradient dX_t (needed by step t - 1) and dW_t, db_t, which the gradient op sums over the steps (the
``<grad>_tmpstep`` cells and the ``Sum`` ops appended to the step net). Summed, they are
``dW = sum_t dY_t^T X_t = dY^T X`` and ``db = sum_t colsum(dY_t) = colsum(dY)`` over the (T * M)-row
stacks of the steps, so ``defer_fc_weight_grads`` takes them out of the step net:

- the step's FCGradient becomes ``FCTransposed(dY_t, W, zeros)``, the same ``dY_t W`` product as its dX
  (with a zero bias), or is dropped when nothing reads dX;
- the two ``Sum`` ops of its cells are dropped;
- ``dY_t`` is linked into a (T, ...) buffer (a new backward link, unless it is linked already, as the first
  layer's gates gradient is to the input gradient), so the steps leave every dY_t in one array;
- after the steps, ``BatchedWeightGrad.run`` computes dW with one GEMM and db with one GEMV on the stacked
  X (the sequence blob X_t is linked to) and dY, split by output features over the intra-op threads.

An FCGradient qualifies when its dW and db are cells of the op's parameters written only by it and read
only by their Sum, its X is a blob linked with window 1 that no step op writes, and its dY is linked with
window 1 or written by exactly one step op. Values differ from the per-step sums by float summation order.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from framework.memory.tensor import Tensor
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import INT
from framework.proto.framework_pb2 import NetDef, OperatorDef
from framework.runtime.parallel import run_parallel, work_split


class BatchedWeightGrad(NamedTuple):
    """One FC's weight and bias gradient, computed after the steps from the stacked X and dY."""

    w_param: str  # the weight parameter (its gradient's shape)
    w_out: int  # output index of dW
    b_out: int  # output index of db
    x_seq: str  # the sequence blob X_t is linked to, at x_offset + t
    x_offset: int
    dy_seq: str  # the sequence blob dY_t is linked to, at dy_offset + t
    dy_offset: int
    dy_owned: bool  # the gradient op makes dy_seq (in the step workspaces' shared parent)
    axis: int
    axis_w: int
    zero_bias: str  # the zero bias of the step's FCTransposed (K values), made by the gradient op

    def run(self, op: Any, shared_ws: Any, seq_len: int) -> None:
        """dW = dY^T X and db = colsum(dY) over the seq_len steps, into the op's outputs."""
        w = op.workspace.get_blob(self.w_param).get_tensor().data()
        dw = op.output(self.w_out, w.shape, w.dtype)
        n_out = math.prod(w.shape[: self.axis_w])
        db = op.output(self.b_out, (n_out,), w.dtype)
        if seq_len == 0:
            dw[...] = 0
            db[...] = 0
            return
        x = _sequence(op, shared_ws, self.x_seq)[self.x_offset : self.x_offset + seq_len]
        dy = _sequence(op, shared_ws, self.dy_seq)[self.dy_offset : self.dy_offset + seq_len]
        k = dw.size // n_out
        x2, dy2, dw2 = x.reshape(-1, k), dy.reshape(-1, n_out), dw.reshape(n_out, k)
        ones = _ones(op, dy2.shape[0], dy2.dtype)
        parts = work_split(n_out, dy2.shape[0] * k * n_out / 16)
        if parts is None:
            np.matmul(dy2.T, x2, out=dw2)
            np.matmul(ones, dy2, out=db)
            return
        run_parallel([_rows(dy2, x2, ones, dw2, db, a, b) for a, b in parts], steal=True)

    def prepare(self, op: Any, shared_ws: Any, seq_len: int) -> None:
        """Before the steps: the dY buffer (when owned) and the step's zero bias, each made once per shape."""
        w = op.workspace.get_blob(self.w_param).get_tensor().data()
        n_out = math.prod(w.shape[: self.axis_w])
        _zeros(shared_ws, self.zero_bias, (w.size // n_out,), w.dtype)
        if self.dy_owned:
            x = _sequence(op, shared_ws, self.x_seq)
            shape = (seq_len + self.dy_offset, *x.shape[1 : self.axis], n_out)
            _zeros(shared_ws, self.dy_seq, shape, w.dtype)


def _rows(dy2, x2, ones, dw2, db, a: int, b: int):
    dyc, dwc, dbc = dy2[:, a:b], dw2[a:b], db[a:b]

    def part() -> None:
        np.matmul(dyc.T, x2, out=dwc)
        np.matmul(ones, dyc, out=dbc)

    return part


def _sequence(op: Any, shared_ws: Any, name: str) -> np.ndarray:
    ws = shared_ws if shared_ws.has_blob(name) else op.workspace
    return ws.get_blob(name).get_tensor().data()


def _zeros(ws: Any, name: str, shape: tuple, dtype: np.dtype) -> None:
    t = ws.create_blob(name).get_mutable(Tensor)
    if t.array is None or t.array.shape != shape or t.array.dtype != dtype:
        t.resize(shape)
        t.mutable_data(dtype)
        t.data()[...] = 0


def _ones(op: Any, n: int, dtype: np.dtype) -> np.ndarray:
    ones = op.__dict__.get("_batched_ones")
    if ones is None or ones.shape != (n,) or ones.dtype != dtype:
        ones = op._batched_ones = np.ones(n, dtype)
    return ones


def defer_fc_weight_grads(
    net: NetDef, cells: dict[str, int], links: list[tuple[str, str, int, int]], tag: str
) -> tuple[list[BatchedWeightGrad], list[tuple[str, str, int, int]]]:
    """Rewrite ``net`` (the backward step net, with its parameter Sums appended, in place) as the module
    doc says. ``cells``: {cell blob: output index of the parameter gradient it is summed into}; ``links``:
    the step net's links (internal, external, offset, window); ``tag``: makes the names of the blobs the
    gradient op adds unique. Returns (the batched gradients, the links to add: the caller adds their
    apply-link ops and makes their internal blobs local to each step)."""
    linked = {}
    for internal, external, offset, window in links:
        if window == 1:
            linked.setdefault(internal, []).append((external, offset))
    writers: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for i, o in enumerate(net.op):
        if o.type == "rnn_internal_apply_link":  # the links themselves (``links``)
            continue
        for b in o.output:
            writers.setdefault(b, []).append(i)
        for b in o.input:
            readers.setdefault(b, []).append(i)
    out, new_links, drop, replace = [], [], set(), {}
    for i, o in enumerate(net.op):
        if o.type != "FCGradient" or len(o.input) != 3 or len(o.output) < 2 or o.engine:
            continue
        cell_w, cell_b = o.output[0], o.output[1]
        sums = [_sum_of(net, readers, writers, c, i) for c in (cell_w, cell_b)]
        if cell_w not in cells or cell_b not in cells or None in sums or cell_w == cell_b:
            continue
        x, w, dy = o.input
        if len(linked.get(x, ())) != 1 or x in writers or w in writers:
            continue
        if len(linked.get(dy, ())) == 1:
            (dy_seq, dy_offset), owned = linked[dy][0], False
        elif len(writers.get(dy, ())) == 1 and dy not in linked:
            dy_seq, dy_offset, owned = f"{dy}@{tag}/steps", 0, True
            new_links.append((dy, dy_seq, 0, 1))
        else:
            continue
        args = ArgReader(o)
        axis, axis_w = args.single("axis", kind=INT, default=1), args.single("axis_w", kind=INT, default=1)
        if axis < 1 or axis_w < 1:
            continue  # negative axes: keep the per-step form
        (x_seq, x_offset) = linked[x][0]
        zero = f"{w}@{tag}/zero_bias"
        out.append(
            BatchedWeightGrad(
                w, cells[cell_w], cells[cell_b], x_seq, x_offset, dy_seq, dy_offset, owned, axis, axis_w, zero
            )
        )
        drop.update(sums)
        if len(o.output) > 2:
            dx = OperatorDef(type="FCTransposed", input=[dy, w, zero], output=[o.output[2]])
            dx.device_option.CopyFrom(o.device_option)
            dx.arg.add(name="axis", i=axis)
            dx.arg.add(name="axis_w", i=axis_w)
            replace[i] = dx
            net.external_input.append(zero)
        else:
            drop.add(i)
    if not out:
        return [], []
    ops = [replace.get(i, o) for i, o in enumerate(net.op) if i not in drop]
    del net.op[:]
    net.op.extend(ops)
    return out, new_links


def _sum_of(net: NetDef, readers: dict, writers: dict, cell: str, producer: int) -> int | None:
    """Index of the one op reading ``cell``, when it is a ``Sum(grad, cell) -> grad`` after ``producer``
    and ``producer`` is the only writer of ``cell``; else None."""
    if writers.get(cell) != [producer] or len(readers.get(cell, ())) != 1:
        return None
    j = readers[cell][0]
    s = net.op[j]
    if s.type != "Sum" or len(s.input) != 2 or s.input[1] != cell or list(s.output) != [s.input[0]] or j < producer:
        return None
    return j
