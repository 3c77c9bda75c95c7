"""Inference rewrites for transformer blocks as exporters write them (part of framework/net/optimize.py's
pass; each applies only where every intermediate it removes is read by the next op of the chain alone
and is not observable):

- **linear**: ``BatchMatMul(X, W)`` by a constant 2-D ``W`` (or ``MatMul(X, W)`` of 2-D operands) followed
  by ``Add`` of a constant bias over the last axis becomes one ``FCTransposed`` (``FC`` when W is
  transposed) with ``axis=-1``: one GEMM over the flattened rows with the bias added in its epilogue.
- **gelu**: the erf form as exported, ``Mul(Mul(h, Add(Erf(Div(h, sqrt 2)), 1)), 0.5)`` (the Div may be a
  Mul by 1/sqrt 2, the 0.5 may multiply h first, operands in either order), becomes ``Gelu(h)``: one
  compiled pass instead of five.
- **attention**: ``BatchMatMul(Q, K) -> [Mul|Div by a scalar] -> [Add mask] -> Softmax(last axis) ->
  BatchMatMul(., V)`` (with ``Mul`` of Q and of K by scalar constants before it, as torch exports its
  scaled dot product) becomes one ``ScaledDotProductAttention`` op (framework/ops/nn/attention.py) over
  all heads: the scale folded into one multiply of the scores, the mask added and the softmax taken in
  place, no intermediates kept.

- **head split**: ``ExpandDims -> Transpose -> Squeeze`` that inserts an axis, moves it and squeezes it
  again (torch's export of the q/k/v split) becomes one ``Transpose``.

Results equal the unfused ops' within float rounding (the fused kernels evaluate in float64 where the
chain rounded to float32 between ops).
"""

from __future__ import annotations

import math
from typing import Any

from framework.ops.arg_reader import ArgReader
from framework.proto.framework_pb2 import OperatorDef

_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


def _args(op: OperatorDef) -> dict[str, Any]:
    return {a.name: ArgReader(op).value(a.name) for a in op.arg}


def _scalar(net: Any, blob: str) -> float | None:
    """The value of a constant one-element float blob, else None."""
    c = net.constant(blob)
    return float(c.reshape(-1)[0]) if c is not None and c.size == 1 else None


def _near(v: float | None, want: float) -> bool:
    return v is not None and abs(v - want) <= 1e-6 * abs(want)


def _next(net: Any, i: int, types: tuple[str, ...]) -> int | None:
    """The op reading op ``i``'s first output, if that output has exactly one reader, of one of
    ``types``, and is not observable; else None."""
    blob = net.ops[i].output[0]
    if blob in net.observable:
        return None
    readers = net.readers(i, blob)
    if len(readers) != 1 or net.ops[readers[0]].type not in types:
        return None
    return readers[0]


def _other(op: OperatorDef, blob: str) -> str | None:
    """The other input of a two-input op one of whose inputs is ``blob``."""
    if len(op.input) != 2 or blob not in op.input or op.input[0] == op.input[1]:
        return None
    return op.input[1] if op.input[0] == blob else op.input[0]


def _plain_binary(op: OperatorDef) -> bool:
    """A two-input elementwise op with numpy broadcasting (none of Caffe2's legacy broadcast args)."""
    return len(op.input) == 2 and len(op.output) == 1 and not op.arg


def _replace_chain(net: Any, chain: list[int], fused: OperatorDef, reads: list[str]) -> bool:
    """Put ``fused`` at the place of the chain's last op and delete the others, unless one of ``reads`` is
    written between the chain's first and last op (the fused op would read a later value)."""
    first, last = min(chain), max(chain)
    if any(net.written_between(b, first, last) for b in reads):
        return False
    fused.name = net.ops[last].name
    net.flow.replace(last, fused)
    for k in sorted(chain, reverse=True):
        if k != last:
            net.flow.delete(k)
    return True


def _op(op_type: str, inputs: list[str], outputs: list[str], **args: Any) -> OperatorDef:
    op = OperatorDef(type=op_type)
    op.input.extend(inputs)
    op.output.extend(outputs)
    for k, v in args.items():
        a = op.arg.add()
        a.name = k
        a.i = int(v)
    return op


# -- linear ---------------------------------------------------------------------------------------------


def fuse_linear(net: Any) -> int:
    n = 0
    i = 0
    while i < len(net.ops):
        if _try_linear(net, i):
            n += 1
        i += 1
    return n


def _try_linear(net: Any, i: int) -> bool:
    op = net.ops[i]
    if op.type not in ("BatchMatMul", "MatMul") or len(op.input) != 2 or len(op.output) != 1:
        return False
    x, w_name = op.input
    args = _args(op)
    w = net.constant(w_name)
    if w is None or w.ndim != 2 or args.get("trans_a", 0):
        return False
    if op.type == "MatMul" and (args.get("axis_a", 1) != 1 or args.get("axis_b", 1) != 1):
        return False
    if op.type == "BatchMatMul" and not args.get("broadcast", 0):
        return False  # without broadcast, BatchMatMul wants equal ranks: a 2-D W means a 2-D X, kept as is
    trans_b = bool(args.get("trans_b", 0))
    j = _next(net, i, ("Add",))
    if j is None or not _plain_binary(net.ops[j]):
        return False
    b_name = _other(net.ops[j], op.output[0])
    b = net.constant(b_name) if b_name is not None else None
    n_out = w.shape[0] if trans_b else w.shape[1]
    if b is None or b_name is None or b.dtype != w.dtype or b.shape != (n_out,):
        return False
    fc_type = "FC" if trans_b else "FCTransposed"
    fc = _op(fc_type, [x, w_name, b_name], [net.ops[j].output[0]], axis=-1 if op.type == "BatchMatMul" else 1)
    return _replace_chain(net, [i, j], fc, [x])


# -- gelu -----------------------------------------------------------------------------------------------


def _rewrite_each(net: Any, op_type: str, try_at: Any) -> int:
    """How many ops of ``op_type`` ``try_at(net, i)`` rewrote, trying each once: a rewrite removes its chain,
    so the op then at ``i`` is one not yet visited."""
    n = 0
    i = 0
    while i < len(net.ops):
        if net.ops[i].type == op_type and try_at(net, i):
            n += 1
            continue
        i += 1
    return n


def fuse_gelu(net: Any) -> int:
    return _rewrite_each(net, "Erf", _try_gelu)


def _scaled_input(net: Any, i_erf: int) -> tuple[int, str] | None:
    """(index, h) of the op computing Erf's input as h / sqrt 2 (Div) or h * (1 / sqrt 2) (Mul)."""
    e = net.ops[i_erf].input[0]
    k = net.flow.producer(i_erf, e)
    if k is None or not _plain_binary(net.ops[k]) or net.readers(k, e) != [i_erf] or e in net.observable:
        return None
    op = net.ops[k]
    if op.type == "Div" and _near(_scalar(net, op.input[1]), math.sqrt(2.0)):
        return k, op.input[0]
    if op.type == "Mul":
        for a, c in ((0, 1), (1, 0)):
            if _near(_scalar(net, op.input[c]), _INV_SQRT_2):
                return k, op.input[a]
    return None


def _try_gelu(net: Any, i_erf: int) -> bool:
    erf = net.ops[i_erf]
    if len(erf.input) != 1 or len(erf.output) != 1:
        return False
    found = _scaled_input(net, i_erf)
    if found is None:
        return False
    i_div, h = found
    i_add = _next(net, i_erf, ("Add",))
    if i_add is None or not _plain_binary(net.ops[i_add]):
        return False
    if not _near(_scalar(net, _other(net.ops[i_add], erf.output[0]) or ""), 1.0):
        return False
    g = net.ops[i_add].output[0]
    i_m1 = _next(net, i_add, ("Mul",))
    if i_m1 is None or not _plain_binary(net.ops[i_m1]):
        return False
    other = _other(net.ops[i_m1], g)
    chain = [i_div, i_erf, i_add, i_m1]
    if other == h:  # (h * g) * 0.5
        i_m2 = _next(net, i_m1, ("Mul",))
        if i_m2 is None or not _plain_binary(net.ops[i_m2]):
            return False
        if not _near(_scalar(net, _other(net.ops[i_m2], net.ops[i_m1].output[0]) or ""), 0.5):
            return False
        chain.append(i_m2)
    else:  # (h * 0.5) * g
        k = net.flow.producer(i_m1, other) if other is not None else None
        if k is None or k > i_m1 or not _plain_binary(net.ops[k]) or net.ops[k].type != "Mul":
            return False
        if net.readers(k, other) != [i_m1] or other in net.observable:
            return False
        if _other(net.ops[k], h) is None or not _near(_scalar(net, _other(net.ops[k], h) or ""), 0.5):
            return False
        chain.append(k)
    out = net.ops[max(chain)].output[0]
    return _replace_chain(net, chain, _op("Gelu", [h], [out]), [h])


# -- attention ------------------------------------------------------------------------------------------


def fuse_attention(net: Any) -> int:
    return _rewrite_each(net, "Softmax", _try_attention)


def _single_producer(net: Any, j: int, blob: str, types: tuple[str, ...]) -> int | None:
    """The op writing the ``blob`` op ``j`` reads, if of one of ``types``, read by ``j`` alone and not
    observable."""
    k = net.flow.producer(j, blob)
    if k is None or net.ops[k].type not in types or blob in net.observable or net.readers(k, blob) != [j]:
        return None
    return k


def _scaled_operand(net: Any, j: int, blob: str) -> tuple[str, float, int | None]:
    """(operand, factor, producer index or None): ``blob`` as operand * scalar constant where a Mul by one
    writes it for op ``j`` alone, else (blob, 1.0, None)."""
    k = _single_producer(net, j, blob, ("Mul",))
    if k is not None and _plain_binary(net.ops[k]):
        for a, c in ((0, 1), (1, 0)):
            v = _scalar(net, net.ops[k].input[c])
            if v is not None:
                return net.ops[k].input[a], v, k
    return blob, 1.0, None


def _try_attention(net: Any, j: int) -> bool:
    sm = net.ops[j]
    if len(sm.input) != 1 or len(sm.output) != 1:
        return False
    chain = [j]
    scale = 1.0
    mask = None
    s = sm.input[0]
    k = _single_producer(net, j, s, ("Add", "Sum"))  # the ONNX path writes a same-shape Add as Sum
    if k is not None and _plain_binary(net.ops[k]):  # scores + mask: the scores come from a product chain
        a, b = net.ops[k].input
        pa = net.flow.producer(k, a)
        if pa is not None and net.ops[pa].type in ("BatchMatMul", "Mul", "Div"):
            s, mask = a, b
        else:
            s, mask = b, a
        chain.append(k)
        j_in = k
    else:
        j_in = j
    k = _single_producer(net, j_in, s, ("Mul", "Div"))
    if k is not None and _plain_binary(net.ops[k]):  # a scalar scale of the scores
        op = net.ops[k]
        v, u = _scalar(net, op.input[1]), _scalar(net, op.input[0])
        if op.type == "Div" and v:
            s, scale = op.input[0], 1.0 / v
        elif op.type == "Mul" and v is not None:
            s, scale = op.input[0], v
        elif op.type == "Mul" and u is not None:
            s, scale = op.input[1], u
        else:
            return False
        chain.append(k)
        j_in = k
    i_qk = _single_producer(net, j_in, s, ("BatchMatMul",))
    if i_qk is None:
        return False
    qk = net.ops[i_qk]
    qk_args = _args(qk)
    if len(qk.input) != 2 or qk_args.get("trans_a", 0) or set(qk_args) - {"trans_a", "trans_b", "broadcast"}:
        return False
    chain.append(i_qk)
    q, fq, iq = _scaled_operand(net, i_qk, qk.input[0])
    kk, fk, ik = _scaled_operand(net, i_qk, qk.input[1]) if qk.input[1] != qk.input[0] else (qk.input[1], 1.0, None)
    chain += [i for i in (iq, ik) if i is not None]
    transposed_k = not qk_args.get("trans_b", 0)
    i_t = _single_producer(net, ik if ik is not None else i_qk, kk, ("Transpose",)) if kk != q else None
    axes = _args(net.ops[i_t]).get("axes") if i_t is not None else None
    if (
        i_t is not None
        and axes
        and len(axes) >= 2
        and list(axes) == [*range(len(axes) - 2), len(axes) - 1, len(axes) - 2]
    ):
        # K^T made by a Transpose only this chain reads: read K itself (a strided operand of the GEMM)
        kk, transposed_k = net.ops[i_t].input[0], not transposed_k
        chain.append(i_t)
    i_pv = _next(net, j, ("BatchMatMul",))
    if i_pv is None or net.ops[i_pv].input[0] != sm.output[0] or len(net.ops[i_pv].input) != 2:
        return False
    pv_args = _args(net.ops[i_pv])
    if pv_args.get("trans_a", 0) or pv_args.get("trans_b", 0) or set(pv_args) - {"trans_a", "trans_b", "broadcast"}:
        return False
    v_blob = net.ops[i_pv].input[1]
    chain.append(i_pv)
    inputs = [q, kk, v_blob] + ([mask] if mask is not None else [])
    fused = _op("ScaledDotProductAttention", inputs, [net.ops[i_pv].output[0]])
    arg = fused.arg.add()
    arg.name, arg.f = "scale", scale * fq * fk
    for name, value in (("transposed_k", transposed_k), ("axis", _args(sm).get("axis", 1))):
        arg = fused.arg.add()
        arg.name, arg.i = name, int(value)
    # V is read where the second product stood (the fused op's place): only Q, K and the mask must keep
    # their values across the chain
    return _replace_chain(net, chain, fused, [q, kk] + ([mask] if mask is not None else []))


# -- head split -----------------------------------------------------------------------------------------


def fuse_head_split(net: Any) -> int:
    """ExpandDims(dims=[d]) -> Transpose(axes) -> Squeeze(dims=[s]) with the inserted axis d moved to s and
    squeezed there (torch's export of a multi-head attention's q/k/v split) -> one Transpose: two ops and
    a copy fewer per layer."""
    return _rewrite_each(net, "ExpandDims", _try_head_split)


def _try_head_split(net: Any, i: int) -> bool:
    ed = net.ops[i]
    dims = _args(ed).get("dims")
    if len(ed.input) != 1 or len(ed.output) != 1 or not dims or len(dims) != 1 or dims[0] < 0:
        return False
    j = _next(net, i, ("Transpose",))
    if j is None:
        return False
    perm = _args(net.ops[j]).get("axes")
    k = _next(net, j, ("Squeeze",))
    if not perm or k is None or len(net.ops[j].output) != 1:
        return False
    sq = _args(net.ops[k]).get("dims")
    d = dims[0]
    if not sq or len(sq) != 1 or not 0 <= sq[0] < len(perm) or perm[sq[0]] != d or len(net.ops[k].output) != 1:
        return False
    new_perm = [p - (p > d) for p in perm if p != d]
    fused = _op("Transpose", [ed.input[0]], [net.ops[k].output[0]])
    arg = fused.arg.add()
    arg.name = "axes"
    arg.ints.extend(new_perm)
    return _replace_chain(net, [i, j, k], fused, [ed.input[0]])


def fuse_transformer(net: Any) -> dict[str, int]:
    """Apply this module's rewrites to ``net`` (optimize.py's ``_Net``); counts by rewrite."""
    return {
        "gelus": fuse_gelu(net),
        "attentions": fuse_attention(net),
        "linears": fuse_linear(net),
        "head_splits": fuse_head_split(net),
    }
