"""The inference optimization pass: rewrite a predict net so it does less work and holds less memory.

Rewrites, in order (each only where the result is unobservable: a blob that is a declared output, or
read by any other op than the one being fused, is never folded or fused away):

1. Drop identities: Dropout with is_test=1 (and its unused mask), Alias/StopGradient/EnsureDense, Copy of a
   blob no op writes into one only it writes (readers of the output read the input instead).
1b. Transformer blocks (framework/net/fuse_transformer.py): MatMul + bias as FC, GELU, attention, head split.
2. Fold test-mode SpatialBN into the preceding Conv (as Caffe2's opt/fusion.cc fuseConvBN): with
   a = scale / sqrt(var + eps), W' = W * a (per output channel) and b' = (b - mean) * a + bias, written to
   new blobs ``<W>_bnfold`` / ``<b>_bnfold`` in the workspace (the weights must be constants there:
   blobs no op of the net writes). Likewise Mul and Add of a per-channel (or scalar) constant after a
   Conv (Caffe2's Mul/Add with broadcast=1, axis=1).
3. Fuse a residual Sum of two blobs (or an Add of two same-shape blobs, framework/net/add_as_sum.py) into the
   Conv producing one of them: the Conv becomes ConvFusion
   fusion_type 2 (Caffe2 IDEEP's Conv+Sum) at the Sum's place, writing in place over the other
   operand (which must die at the Sum, and be an activation, an input fed before every run (``shapes``)
   or one the workspace does not hold yet: never a parameter); later readers of the Sum's output read
   that blob.
4. Fuse Relu into the producing Conv/ConvFusion (fusion_type 1, or 2 -> 3), or into a test-mode
   SpatialBN left unfolded (one before which no conv stands, as DenseNet's pre-activations): it
   becomes SpatialBNRelu with keep_nan=1 (a separate Relu keeps NaN; Caffe2's fused op does not),
   one compiled pass instead of two.
4a. Fuse Clip(0, 6), HardSwish and Swish into the producing Conv, Relu into depthwise ones (fuse_activation.py).
4c. A squeeze-excitation block (global AveragePool, two 1x1 convs, Sigmoid/HardSigmoid, Mul) becomes one
   SqueezeExcite op (fuse_squeeze_excite.py).
4b. Average pooling after a 1x1 conv goes before it (DenseNet's transitions: the conv on a quarter of
   the pixels; see ``pool_before_pointwise``).
5. Fuse Concat over the channels -> ChannelShuffle (-> Split over the channels) into one
   ConcatChannelShuffle (framework/ops/nn/concat_shuffle.py): ShuffleNet's units copy their
   activations once instead of three times.
6. Drop a Concat over the channels whose inputs are all Conv+Relu outputs only it reads: the convs
   write their channels of its output directly (ConvFusion's out_channels / out_channel_offset,
   this framework's arguments), as SqueezeNet's expand convs.
7. Hold a chain of growing channel Concats (DenseNet's dense blocks) in one buffer: the convs write
   their channels of the last one's output, the BNs in between read their prefix of it
   (SpatialBN's ``in_channels``, this framework's), and the Concats but a copy of the first input go.
8. Share activation buffers by liveness (framework.net.memory_planner.optimize_inference_net).

Only 2-D NCHW, non-depthwise convolutions are fused (ConvFusion's kernel); depthwise ones still get
the BN fold. ``optimize_inference(net, ws, outputs)`` returns the new NetDef (the input is not
modified) and writes the folded weights into ``ws``; results equal the original net's within float
rounding (folding reassociates the BN arithmetic).

Applied by default where only declared outputs are observable: ``Predictor``, ``framework
run/predict/profile``; from Python, ``CreateNet(net, optimize=True)`` / ``ws.create_net(net,
optimize=True)`` opt in. Never applied silently elsewhere: a user may fetch any intermediate blob.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

import numpy as np

from framework.memory.tensor import Tensor
from framework.net.dataflow import DataFlow
from framework.net.fuse_transformer import fuse_transformer
from framework.net.graph import load_net_def
from framework.ops.arg_reader import ArgReader
from framework.proto.framework_pb2 import NetDef, OperatorDef

log = logging.getLogger("framework.net")

_IDENTITIES = {"Alias", "StopGradient", "EnsureDense"}


def _arg(op: OperatorDef, name: str, default: Any = None) -> Any:
    return ArgReader(op).value(name, default)


def _set_arg(op: OperatorDef, name: str, value: int) -> None:
    for a in op.arg:
        if a.name == name:
            a.i = value
            return
    a = op.arg.add()
    a.name = name
    a.i = value


class _Net:
    """The op list being rewritten and its dataflow view (framework/net/dataflow.py): every change to the
    list or to an op's inputs and outputs goes through ``flow``, so reader and writer queries stay exact."""

    def __init__(self, ops: list[OperatorDef], observable: set[str], ws: Any) -> None:
        self.flow = DataFlow(ops)
        self.ops = ops  # the live list: read freely, change through ``flow``
        self.observable = observable
        self.ws = ws
        self.created: list[str] = []  # blobs the pass wrote into the workspace (folded parameters)
        self.fed: set[str] = set()  # inputs the caller feeds before every run (``shapes``' names)

    def readers(self, i: int, blob: str) -> list[int]:
        """Ops after ``i`` reading the version of ``blob`` that op ``i`` leaves (until rewritten)."""
        return self.flow.readers(i, blob)

    def live_after(self, i: int, blob: str) -> bool:
        """Is the value of ``blob`` after op ``i`` read later or observable at the end?"""
        if self.flow.readers(i, blob):
            return True
        return self.flow.next_writer(i, blob) is None and blob in self.observable

    def written(self, blob: str) -> bool:
        return self.flow.written(blob)

    def written_between(self, blob: str, i: int, j: int) -> bool:
        return self.flow.written_between(blob, i, j)

    def constant(self, blob: str) -> np.ndarray | None:
        """The value of a blob no op writes, if the workspace holds it as a float tensor."""
        if self.written(blob) or not self.ws.has_blob(blob):
            return None
        obj = self.ws.get_blob(blob).held
        if type(obj) is not Tensor or not obj.is_allocated:
            return None
        a = obj.data()
        return a if a.dtype.kind == "f" else None

    def rename_from(self, start: int, old: str, new: str) -> bool:
        """Make ops after ``start`` read (and in-place write) ``new`` instead of ``old``, up to the op that
        writes ``old`` afresh; False (nothing changed) if ``new`` is touched in that range or ``old`` is
        observable there."""
        flow, n = self.flow, len(self.ops)
        fresh = (j for j in flow.writers(old) if j > start and old not in self.ops[j].input)
        end = next(fresh, n)
        if flow.touched_between((new,), start, end):
            return False
        if end == n and old in self.observable:
            return False
        span = sorted({j for j in (*flow.readers_of(old), *flow.writers(old)) if start < j < end})
        for j in span:
            with flow.edit(j) as op:
                for field in (op.input, op.output):
                    for k, b in enumerate(field):
                        if b == old:
                            field[k] = new
        if end < n:  # the fresh writer may still read the old value
            with flow.edit(end) as op:
                for k, b in enumerate(op.input):
                    if b == old:
                        op.input[k] = new
        return True


def _producer(net: _Net, j: int, blob: str) -> int | None:
    return net.flow.producer(j, blob)


def _fusable_conv(op: OperatorDef, net: _Net) -> bool:
    if op.type not in ("Conv", "Conv2D"):
        return False
    if str(_arg(op, "order", "NCHW")).upper() != "NCHW":
        return False
    w = net.constant(op.input[1])
    if w is None or w.ndim != 4:
        return False
    group = _arg(op, "group", 1)
    return not (group > 1 and group == w.shape[0] == w.shape[1] * group)


def _test_bn(op: OperatorDef) -> bool:
    """A test-mode SpatialBN (one output), which SpatialBNRelu can replace together with its Relu."""
    return op.type == "SpatialBN" and _arg(op, "is_test", 0) == 1 and len(op.output) == 1


# -- 1. identities ---------------------------------------------------------------------------------


def _constant_copy(net: _Net, i: int) -> bool:
    """Drop Copy op ``i`` when its source is a blob no op writes and its output one only it writes (an
    ONNX Identity of a weight): the readers read the source instead (neither can change in between)."""
    op = net.ops[i]
    src, dst = op.input[0], op.output[0]
    if len(op.input) != 1 or net.written(src) or dst in net.observable or net.flow.writers(dst) != [i]:
        return False
    for j in net.flow.readers_of(dst):
        with net.flow.edit(j) as reader:
            for k, b in enumerate(reader.input):
                if b == dst:
                    reader.input[k] = src
    net.flow.delete(i)
    return True


def drop_identities(net: _Net) -> int:
    n = 0
    i = 0
    while i < len(net.ops):
        op = net.ops[i]
        ident = op.type in _IDENTITIES or (op.type == "Dropout" and _arg(op, "is_test", 0))
        if op.type == "Copy" and _constant_copy(net, i):
            n += 1
            continue
        if ident and len(op.input) == 1:
            src, dst = op.input[0], op.output[0]
            extra_live = any(net.live_after(i, b) for b in op.output[1:])
            if not extra_live and (src == dst or net.rename_from(i, dst, src)):
                net.flow.delete(i)
                n += 1
                continue
        i += 1
    return n


# -- 2. folding into a Conv --------------------------------------------------------------------------


def _fold_into_conv(net: _Net, i: int, j: int, a: np.ndarray, beta: np.ndarray) -> bool:
    """Conv ``i`` followed by per-channel affine op ``j`` (y*a + beta): fold and drop op ``j``."""
    conv, nxt = net.ops[i], net.ops[j]
    w = net.constant(conv.input[1])
    if w is None:
        return False
    b = net.constant(conv.input[2]) if len(conv.input) > 2 else np.zeros(w.shape[0], w.dtype)
    if b is None:
        return False
    m = w.shape[0]
    a = np.broadcast_to(np.asarray(a, np.float64).reshape(-1), (m,))
    beta = np.broadcast_to(np.asarray(beta, np.float64).reshape(-1), (m,))
    w2 = w.astype(np.float64)
    w2 *= a.reshape(-1, 1, 1, 1)
    w2 = w2.astype(w.dtype)
    b2 = (b.astype(np.float64) * a + beta).astype(w.dtype)
    wn = _fresh(net, conv.input[1] + "_fold")
    bn = _fresh(net, (conv.input[2] if len(conv.input) > 2 else conv.output[0] + "_b") + "_fold")
    net.ws.feed_blob(wn, w2)
    net.ws.feed_blob(bn, b2)
    net.created += [wn, bn]
    with net.flow.edit(i):
        del conv.input[1:]
        conv.input.extend([wn, bn])
        conv.output[0] = nxt.output[0]
    for a_ in list(conv.arg):
        if a_.name == "no_bias":
            conv.arg.remove(a_)
    net.flow.delete(j)
    return True


def _fresh(net: _Net, name: str) -> str:
    k, out = 0, name
    while net.ws.has_blob(out):
        k += 1
        out = f"{name}{k}"
    return out


def fold_affine(net: _Net) -> int:
    n = 0
    i = 0
    while i < len(net.ops):
        conv = net.ops[i]
        if conv.type not in ("Conv", "Conv2D") or net.constant(conv.input[1]) is None:
            i += 1
            continue
        if str(_arg(conv, "order", "NCHW")).upper() != "NCHW":
            i += 1
            continue
        y = conv.output[0]
        rd = net.readers(i, y)
        if len(rd) != 1 or y in net.observable and y not in net.ops[rd[0]].output:
            i += 1
            continue
        j = rd[0]
        nxt = net.ops[j]
        if nxt.input[0] != y or list(nxt.input).count(y) != 1 or net.written_between(conv.input[0], i, j + 1):
            i += 1
            continue
        w = net.constant(conv.input[1])
        ab = _affine_of(net, nxt, w.shape[0]) if w is not None else None
        has_b = len(conv.input) < 3 or net.constant(conv.input[2]) is not None
        if ab is not None and has_b and _move_after(net, i, j) and _fold_into_conv(net, j - 1, j, *ab):
            n += 1
            continue
        i += 1
    return n


def _affine_of(net: _Net, op: OperatorDef, m: int):
    """(a, beta) if ``op`` is y*a + beta per channel of an NCHW conv output, else None."""
    if op.type == "SpatialBN" and _arg(op, "is_test", 0) and len(op.output) == 1:
        if str(_arg(op, "order", "NCHW")).upper() != "NCHW":
            return None
        vals = [net.constant(b) for b in op.input[1:5]]
        if any(v is None or v.shape != (m,) for v in vals):
            return None
        s, bias, mean, var = (v.astype(np.float64) for v in vals if v is not None)
        a = s / np.sqrt(var + float(_arg(op, "epsilon", 1e-5)))
        return a, bias - mean * a
    if op.type in ("Mul", "Add") and len(op.input) == 2 and _arg(op, "broadcast", 0):
        c = net.constant(op.input[1])
        if c is None:
            return None
        if c.size == 1:
            v = np.full(m, float(c.reshape(-1)[0]))
        elif c.shape == (m,) and _arg(op, "axis", -1) == 1:
            v = c.astype(np.float64)
        else:
            return None
        return (v, np.zeros(m)) if op.type == "Mul" else (np.ones(m), v)
    return None


def _move_after(net: _Net, i: int, j: int) -> bool:
    """Move op ``i`` to just before op ``j`` (its inputs unchanged in between, its outputs unread)."""
    op = net.ops[i]
    for b in op.input:
        if net.written_between(b, i, j):
            return False
    if net.flow.touched_between(op.output, i, j):
        return False
    net.flow.move(i, j - 1)
    return True


# -- 3./4. fusing Sum and Relu into a Conv ---------------------------------------------------------------


def fuse_sum(net: _Net) -> int:
    n = 0
    j = 0
    while j < len(net.ops):
        op = net.ops[j]
        if op.type != "Sum" or len(op.input) != 2 or op.input[0] == op.input[1]:
            j += 1
            continue
        done = False
        for k in (0, 1):
            y, r = op.input[k], op.input[1 - k]
            i = _producer(net, j, y)
            if i is None or not _fusable_conv(net.ops[i], net) or net.ops[i].output[0] != y:
                continue
            conv = net.ops[i]
            if net.readers(i, y) != [j] or y in net.observable or r in net.observable or r in conv.input:
                continue  # (the sum is written over r: the conv must not read it)
            if net.live_after(j, r) or any(net.written_between(b, i, j) for b in conv.input):
                continue
            if _producer(net, j, r) is None and r not in net.fed and net.constant(r) is not None:
                continue  # a parameter (or a tensor the caller fed and may read again): the next run reads it
            s = op.output[0]
            if s != r and not net.rename_from(j, s, r):
                continue
            fused = OperatorDef()
            fused.CopyFrom(conv)
            fused.type = "ConvFusion"
            _set_arg(fused, "fusion_type", 2)
            fused.input.append(r)
            fused.output[0] = r
            net.flow.replace(j, fused)
            net.flow.delete(i)
            n += 1
            done = True
            break
        if not done:
            j += 1
    return n


def fuse_relu(net: _Net) -> int:
    n = 0
    j = 0
    while j < len(net.ops):
        op = net.ops[j]
        if op.type != "Relu" or len(op.input) != 1:
            j += 1
            continue
        x, z = op.input[0], op.output[0]
        i = _producer(net, j, x)
        if i is None or net.readers(i, x) != [j] or (x in net.observable and x != z):
            j += 1
            continue
        prod = net.ops[i]
        if prod.type == "ConvFusion" and _arg(prod, "fusion_type") == 2 and prod.output[0] == x:
            # the in-place sum writes x: a Relu to another blob z fuses when later readers can read x for z
            if x != z and (x in net.observable or not net.rename_from(j, z, x)):
                j += 1
                continue
            _set_arg(prod, "fusion_type", 3)
        elif (_fusable_conv(prod, net) or _test_bn(prod)) and prod.output[0] == x:
            if z != x and net.flow.touched_between((z,), i, j):
                j += 1
                continue
            if prod.type == "SpatialBN":  # Relu keeps NaN: so does the fused op with keep_nan=1
                prod.type = "SpatialBNRelu"
                _set_arg(prod, "keep_nan", 1)
            else:
                prod.type = "ConvFusion"
                _set_arg(prod, "fusion_type", 1)
            with net.flow.edit(i):
                prod.output[0] = z
        else:
            j += 1
            continue
        net.flow.delete(j)
        n += 1
    return n


# -- 4b. average pooling before a 1x1 conv ------------------------------------------------------------

_GEOMETRY_ARGS = {
    "stride": 1, "strides": 1, "stride_h": 1, "stride_w": 1, "dilation": 1, "dilations": 1,
    "pad": 0, "pads": 0, "pad_t": 0, "pad_l": 0, "pad_b": 0, "pad_r": 0, "legacy_pad": 0,
}  # fmt: skip


def _plain_geometry(op: OperatorDef) -> bool:
    """No stride, dilation, padding or legacy padding argument other than the defaults."""
    args = ArgReader(op)
    return all(v == plain for name, plain in _GEOMETRY_ARGS.items() for v in args.repeated(name))


def pool_before_pointwise(net: _Net) -> int:
    """A 1x1 NCHW Conv (stride 1, no padding) whose output only an NCHW AveragePool reads: the pool goes
    first. Each window's average weighs its cells by weights summing to 1 (padding only with
    count_include_pad off), so avg(W x + b) = W avg(x) + b and the conv runs on the pooled pixels:
    DenseNet's transitions (1x1 conv, then 2x2/2 average) do a quarter of their multiplies."""
    n = 0
    for i in range(len(net.ops) - 1, -1, -1):
        conv = net.ops[i]
        w = net.constant(conv.input[1]) if conv.type in ("Conv", "Conv2D") and len(conv.input) >= 2 else None
        if w is None or w.ndim != 4 or w.shape[2:] != (1, 1) or not _plain_geometry(conv):
            continue
        if str(_arg(conv, "order", "NCHW")).upper() != "NCHW":
            continue
        x, y = conv.input[0], conv.output[0]
        rd = net.readers(i, y)
        if len(rd) != 1 or y in net.observable or len(conv.output) != 1:
            continue
        j = rd[0]
        pool = net.ops[j]
        if pool.type not in ("AveragePool", "AveragePool2D") or list(pool.input) != [y] or y in pool.output:
            continue
        if str(_arg(pool, "order", "NCHW")).upper() != "NCHW" or _arg(pool, "legacy_pad", 0):
            continue
        pool_args = ArgReader(pool)
        padded = any(name.startswith("pad") and any(pool_args.repeated(name)) for name in pool_args.names())
        if padded and _arg(pool, "count_include_pad", 0):
            continue
        if net.written_between(x, i, j) or x in pool.output:
            continue
        tmp = f"{y}_pooled_input"
        if net.flow.mentioned(tmp) or tmp in net.observable:
            continue
        first, second = OperatorDef(), OperatorDef()
        first.CopyFrom(pool)
        del first.input[:]
        first.input.append(x)
        first.output[0] = tmp
        second.CopyFrom(conv)
        second.input[0] = tmp
        second.output[0] = pool.output[0]
        net.flow.replace(j, first)
        net.flow.insert(j + 1, second)
        net.flow.delete(i)
        n += 1
    return n


# -- 5. Concat -> ChannelShuffle (-> Split) ----------------------------------------------------------


def _channels_op(op: OperatorDef, types: tuple) -> bool:
    """A Concat/Split (``types``) over the channel axis of NCHW."""
    if op.type not in types or _arg(op, "add_axis", 0):
        return False
    axis = _arg(op, "axis")
    return axis == 1 if axis is not None else str(_arg(op, "order", "NCHW")).upper() == "NCHW"


def _touched(net: _Net, names, i: int, j: int) -> bool:
    """Does an op between i and j read or write any of ``names``?"""
    return net.flow.touched_between(names, i, j)


def fuse_shuffle(net: _Net) -> int:
    """Concat over the channels whose result only a ChannelShuffle reads, and a Split of the shuffled
    result over the channels when it is the only reader, become one ConcatChannelShuffle at the
    ChannelShuffle's place (ShuffleNet's units: one copy instead of three)."""
    n = 0
    j = 0
    while j < len(net.ops):
        op = net.ops[j]
        if op.type != "ChannelShuffle" or str(_arg(op, "order", "NCHW")).upper() != "NCHW":
            j += 1
            continue
        c, s = op.input[0], op.output[0]
        i = _producer(net, j, c)
        if i is None:
            j += 1
            continue
        cat = net.ops[i]
        if (
            not _channels_op(cat, ("Concat", "DepthConcat"))
            or cat.output[0] != c
            or net.readers(i, c) != [j]
            or c in net.observable
            or any(net.live_after(i, b) for b in cat.output[1:])
            or any(net.written_between(b, i, j) for b in cat.input)
            or s in cat.input
        ):
            j += 1
            continue
        fused = OperatorDef(type="ConcatChannelShuffle", name=op.name, input=list(cat.input), output=[s])
        fused.device_option.CopyFrom(op.device_option)
        _set_arg(fused, "group", _arg(op, "group", 1))
        readers = net.readers(j, s)
        k = readers[0] if len(readers) == 1 else -1
        sp = net.ops[k] if k >= 0 else None
        if (
            sp is not None
            and s not in net.observable
            and _channels_op(sp, ("Split", "DepthSplit"))
            and list(sp.input) == [s]
            and s not in sp.output
            and not any(b in cat.input for b in sp.output)
            and not _touched(net, set(sp.output), j, k)
        ):
            del fused.output[:]
            fused.output.extend(sp.output)
            split = _arg(sp, "split")
            if split:
                a = fused.arg.add()
                a.name = "split"
                a.ints.extend(split)
            net.flow.delete(k)
        net.flow.replace(j, fused)
        net.flow.delete(i)
        n += 1
    return n


# -- 6. convs writing a Concat's channels ------------------------------------------------------------


def concat_in_place(net: _Net) -> int:
    """A Concat over the channels whose every input is the only output of a ConvFusion (Relu, fusion
    type 1) that nothing else reads: each conv writes its channels of the Concat's output directly
    (ConvFusion's ``out_channels`` / ``out_channel_offset``, the filter's rows from the workspace) and
    the Concat goes. SqueezeNet's fire modules: their expand outputs are not copied again."""
    n = 0
    j = 0
    while j < len(net.ops):
        cat = net.ops[j]
        distinct = len(set(cat.input)) == len(cat.input) >= 2
        if not _channels_op(cat, ("Concat", "DepthConcat")) or not distinct:
            j += 1
            continue
        y = cat.output[0]
        convs = _concat_producers(net, j) if y not in cat.input else None
        if convs is None or any(net.live_after(j, b) for b in cat.output[1:]) or _touched(net, {y}, min(convs), j):
            j += 1
            continue
        total = sum(convs.values())
        offset = 0
        for i in sorted(convs, key=lambda i: list(cat.input).index(net.ops[i].output[0])):
            op = net.ops[i]
            with net.flow.edit(i):
                op.output[0] = y
            _set_arg(op, "out_channels", total)
            _set_arg(op, "out_channel_offset", offset)
            offset += convs[i]
        net.flow.delete(j)
        n += 1
    return n


def _concat_producers(net: _Net, j: int) -> dict[int, int] | None:
    """op index -> filter rows of the ConvFusion producing each input of the Concat at ``j``, if every
    input qualifies (see ``concat_in_place``), else None."""
    cat = net.ops[j]
    out: dict[int, int] = {}
    for b in cat.input:
        i = _producer(net, j, b)
        if i is None:
            return None
        op = net.ops[i]
        if op.type != "ConvFusion" or _arg(op, "fusion_type") != 1 or _arg(op, "out_channels", 0):
            return None
        w = net.constant(op.input[1])
        if w is None or w.ndim != 4 or list(op.output) != [b] or cat.output[0] in op.input:
            return None
        if b in net.observable or net.readers(i, b) != [j]:
            return None
        out[i] = w.shape[0]
    return out


# -- 7. growing concatenations in one buffer ---------------------------------------------------------


def concat_chains(net: _Net) -> int:
    """A chain of channel Concats h_k = Concat(h_(k-1), t_k...) (k = 1..n, n >= 2) whose every t is the
    only output of a Conv (or ConvFusion with Relu) that only this Concat reads, and whose every h_k
    but the last is read only by test-mode SpatialBN(Relu) ops before the next link and by that link:
    DenseNet's dense blocks, where each Concat copies the block's features so far (quadratic in the
    block's length). The block's features then live in one buffer, the last link's output: the
    convs write their channels of it (``out_channels`` / ``out_channel_offset``; a plain Conv becomes
    ConvFusion fusion_type 0), the first link copies h_0 into its first channels (Concat with the
    same arguments), the SpatialBN readers read their prefix of it (``in_channels``) and the other
    Concats go."""
    n = 0
    j = 0
    while j < len(net.ops):
        chain = _chain_from(net, j)
        if chain is None:
            j += 1
            continue
        _rewrite_chain(net, chain)
        n += 1
    return n


def _link(net: _Net, j: int, prev: str | None) -> dict[int, int] | None:
    """op index -> filter rows of the convs producing inputs 1.. of the Concat at ``j`` (input 0 being
    ``prev`` when given), if the Concat can be a link of a chain (see ``concat_chains``)."""
    cat = net.ops[j]
    ins = list(cat.input)
    if not _channels_op(cat, ("Concat", "DepthConcat")) or _arg(cat, "out_channels", 0) or len(ins) < 2:
        return None
    if len(set(ins)) != len(ins) or cat.output[0] in ins or (prev is not None and ins[0] != prev):
        return None
    if any(net.live_after(j, b) for b in cat.output[1:]):
        return None
    convs: dict[int, int] = {}
    for b in ins[1:]:
        i = _producer(net, j, b)
        if i is None:
            return None
        op = net.ops[i]
        if list(op.output) != [b] or b in net.observable or net.readers(i, b) != [j]:
            return None
        plain = _fusable_conv(op, net)
        fused = op.type == "ConvFusion" and _arg(op, "fusion_type") == 1 and not _arg(op, "out_channels", 0)
        if not (plain or fused):
            return None
        w = net.constant(op.input[1])
        if w is None or w.ndim != 4:
            return None
        convs[i] = w.shape[0]
    return convs


def _prefix_reader(net: _Net, k: int, blob: str) -> int | None:
    """Channels a test-mode NCHW SpatialBN(Relu) at ``k`` reads of ``blob`` (its scale's length), else None."""
    op = net.ops[k]
    if op.type not in ("SpatialBN", "SpatialBNRelu") or _arg(op, "is_test", 0) != 1 or len(op.output) != 1:
        return None
    if list(op.input).count(blob) != 1 or op.input[0] != blob or op.output[0] == blob or _arg(op, "in_channels", 0):
        return None
    if str(_arg(op, "order", "NCHW")).upper() != "NCHW":
        return None
    scale = net.constant(op.input[1])
    return scale.shape[0] if scale is not None and scale.ndim == 1 else None


def _chain_from(net: _Net, j: int) -> dict | None:
    """The chain starting at the Concat at ``j``, else None: its links' indices, each link's convs (op
    index -> filter rows, in input order), each intermediate output's SpatialBN readers (op index ->
    channels read), the channels of h_0 and each link's rows in all."""
    convs = _link(net, j, None)
    if convs is None:
        return None
    links, all_convs = [j], [convs]
    readers: list[dict[int, int]] = []
    while True:
        h = net.ops[links[-1]].output[0]
        if h in net.observable:
            break
        rs = net.readers(links[-1], h)
        nxt = [k for k in rs if net.ops[k].type in ("Concat", "DepthConcat") and net.ops[k].input[0] == h]
        if len(nxt) != 1:
            break
        convs = _link(net, nxt[0], h)
        read = {k: _prefix_reader(net, k, h) for k in rs if k != nxt[0]}
        bns = {k: c for k, c in read.items() if c is not None}
        if convs is None or len(bns) != len(read) or any(k > nxt[0] for k in bns):
            break
        readers.append(bns)
        links.append(nxt[0])
        all_convs.append(convs)
    if len(links) < 2:
        return None
    # Channels of h_0 from a reader's count: c_k = c_0 + the rows of links 1..k.
    rows = [sum(c.values()) for c in all_convs]
    c0s = {c - sum(rows[: k + 1]) for k, bns in enumerate(readers) for c in bns.values()}
    if len(c0s) != 1 or min(c0s) <= 0:
        return None
    y = net.ops[links[-1]].output[0]
    first = min(min(c) for c in all_convs)
    h0 = net.ops[links[0]].input[0]
    names = {net.ops[k].output[0] for k in links[:-1]} | {y}
    allowed = set(links) | {k for bns in readers for k in bns}
    others = (net.ops[i] for i in range(first, links[-1]) if i not in allowed)
    if h0 == y or _touched(net, {y}, first - 1, links[-1]) or any(b in names for op in others for b in op.input):
        return None
    return dict(links=links, convs=all_convs, readers=readers, c0=c0s.pop(), rows=rows)


def _rewrite_chain(net: _Net, chain: dict) -> None:
    links, y, c0 = chain["links"], net.ops[chain["links"][-1]].output[0], chain["c0"]
    total = c0 + sum(chain["rows"])
    offset = c0
    for convs in chain["convs"]:  # in the links' input order (``_link``): their channels' order
        for i, rows in convs.items():
            op = net.ops[i]
            if op.type != "ConvFusion":
                op.type = "ConvFusion"
                _set_arg(op, "fusion_type", 0)
            with net.flow.edit(i):
                op.output[0] = y
            _set_arg(op, "out_channels", total)
            _set_arg(op, "out_channel_offset", offset)
            offset += rows
    for k, bns in enumerate(chain["readers"]):
        width = c0 + sum(chain["rows"][: k + 1])
        for r in bns:
            with net.flow.edit(r):
                net.ops[r].input[0] = y
            _set_arg(net.ops[r], "in_channels", width)
    first = net.ops[links[0]]
    with net.flow.edit(links[0]):
        del first.input[1:]
        del first.output[1:]
        first.output[0] = y
    _set_arg(first, "out_channels", total)
    _set_arg(first, "out_channel_offset", 0)
    for k in sorted(links[1:], reverse=True):
        net.flow.delete(k)


# -- the pass ----------------------------------------------------------------------------------------


def optimize_inference(
    net: Any,
    ws: Any,
    outputs: Iterable[str] | None = None,
    share_buffers: bool = True,
    shapes: dict[str, Any] | None = None,
) -> NetDef:
    """The optimized copy of ``net`` (see module doc). ``ws`` holds the parameters (folded ones are
    written there); ``outputs`` are the blobs the caller will read (default: the net's
    external_output); ``shapes`` (input name -> shape) lets buffer sharing match blobs by size
    (default: the shapes of the external inputs in ``ws``)."""
    src = load_net_def(net)
    observable = set(outputs if outputs is not None else src.external_output) | set(src.external_output)
    ops = []
    for op in src.op:
        c = OperatorDef()
        c.CopyFrom(op)
        ops.append(c)
    if any(op.type in ("If", "While", "Do", "RecurrentNetwork") or op.control_input for op in ops):
        log.debug("optimize_inference: net '%s' has control flow; left unchanged", src.name)
        out = NetDef()
        out.CopyFrom(src)
        return out
    state = _Net(ops, observable, ws)
    state.fed = set(shapes or ())
    from framework.net.add_as_sum import adds_as_sums  # (these import this module's helpers)
    from framework.net.fuse_activation import fuse_activations
    from framework.net.fuse_squeeze_excite import fuse_squeeze_excite

    stats: dict[str, int | str] = {
        "identities": drop_identities(state),
        **fuse_transformer(state),
        "folded": fold_affine(state),
        "adds": adds_as_sums(state, shapes),
        "sums": fuse_sum(state),
        "relus": fuse_relu(state),
        "activations": fuse_activations(state),
        "squeeze_excite": fuse_squeeze_excite(state),
        "pools_first": pool_before_pointwise(state),
        "shuffles": fuse_shuffle(state),
        "concats": concat_in_place(state),
        "concat_chains": concat_chains(state),
    }
    out = NetDef()
    out.CopyFrom(src)
    del out.op[:]
    out.op.extend(state.ops)
    used = {b for op in out.op for b in op.input}
    new_params = [b for b in state.created if b in used]
    params = _all_params(src)
    ext = [b for b in out.external_input if b in used or b not in params]
    del out.external_input[:]
    out.external_input.extend(ext + [b for b in new_params if b not in ext])
    if share_buffers:
        from framework.net.memory_planner import optimize_inference_net

        if shapes is None:
            shapes = {}
            for b in out.external_input:
                if ws.has_blob(b):
                    obj = ws.get_blob(b).held
                    if type(obj) is Tensor and obj.is_allocated:
                        shapes[b] = tuple(obj.dims)
        out, report = optimize_inference_net(out, static_blobs=observable, shapes=shapes)
        stats["memonger"] = str(report)
    log.debug("optimize_inference %s: %s", src.name, stats)
    return out


def _all_params(net: NetDef) -> set[str]:
    written = {b for op in net.op for b in op.output}
    return {b for op in net.op for b in op.input if b not in written}


_NOT_REPEATABLE = frozenset({"distributed", "checkpoint", "data"})


def explain_failure(ws: Any, written: Any, error: BaseException, init: Any = None) -> BaseException:
    """The error to show for ``error``, raised by the optimized copy of net ``written`` in ``ws``.

    The optimized net's ops and blobs are not the user's (``ConvFusion``, ``SpatialBNRelu``, shared
    buffers such as ``__m1_shared``, shifted op indices), so the net as written runs once more in ``ws``
    on the same inputs: its error names the user's op index, type and blobs, and is returned (chained to
    ``error``). If the net as written runs, the optimized net failed where the original does not: a bug
    of this pass, returned as a NetError naming both. ``init`` (run first) recreates parameters the
    caller removed after folding them (the Predictor does).
    """
    from framework.errors import FrameworkError, NetError
    from framework.ops.registry import get_schema, has_op

    written = load_net_def(written)
    # a net that talks to other processes or reads and writes files cannot run twice: a collective would
    # wait for ranks that are not running it, a reader would move on; its error stays as raised
    if any(has_op(op.type) and get_schema(op.type).category in _NOT_REPEATABLE for op in written.op):
        return error
    try:
        if init is not None:
            ws.run_net_once(init)
        ws.run_net_once(written)
    except FrameworkError as e:
        e.__context__ = error
        return e
    return NetError(
        f"the optimized copy of net '{written.name}' failed ({error}) but the net as written runs: "
        "a bug in the inference optimization pass; run with --no-optimize (Python: optimize=False) and "
        "please report it"
    )
