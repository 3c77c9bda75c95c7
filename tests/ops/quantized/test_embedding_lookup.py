"""Pooled lookups in quantized tables against float references: dequantize every row with a loop over the
layout, then look up, weight and pool per segment; pruned tables; the pruning step; GatherFused8BitRowwise."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on

f32, f16 = np.float32, np.float16
ROWS, COLS = 7, 8


def quantize(kind, table):
    """The quantized table (and extra inputs) made by the framework's own conversion ops (tested bit-exact
    elsewhere)."""
    if kind.startswith("8Bits"):
        return run_op_on(CreateOperator("FloatToRowwiseQuantized8Bits", ["x"], ["q", "sb"]), [table])
    bits = int(kind.lstrip("Fused")[0])
    op = "FloatToFused8BitRowwiseQuantized" if bits == 8 else f"FloatToFused{bits}BitRowwiseQuantized"
    return run_op_on(CreateOperator(op, ["x"], ["q"]), [table])


def dequant_row(kind, q, r, sb=None):
    if sb is not None:
        return q[r].astype(f32) * sb[r, 0] + sb[r, 1]
    row = q[r]
    if "8Bit" in kind:
        scale, bias = np.frombuffer(bytes(row[-8:]), f32)
        return row[:-8].astype(f32) * scale + bias
    bits = 4 if "4Bit" in kind else 2
    per = 8 // bits
    scale, bias = np.frombuffer(bytes(row[-4:]), f16).astype(f32)
    codes = [(int(row[c // per]) >> ((c % per) * bits)) & ((1 << bits) - 1) for c in range((len(row) - 4) * per)]
    return np.array(codes, f32) * scale + bias


def reference(kind, reducer, q, idx, lengths, w=None, sb=None, mapping=None):
    out = np.zeros((len(lengths), COLS), np.float64)
    k = 0
    for m, n in enumerate(lengths):
        for _ in range(n):
            r = idx[k]
            if mapping is not None and not (len(mapping) == 1 and mapping[0] == 0):
                r = mapping[r]
            if r >= 0:
                out[m] += dequant_row(kind, q, r, sb) * (w[k] if w is not None else 1.0)
            k += 1
        if "Mean" in reducer and n:
            out[m] /= n
    return out.astype(f32)


KINDS = [
    "Fused8BitRowwise",
    "Fused4BitRowwise",
    "Fused2BitRowwise",
    "8BitsRowwise",
    "8BitRowwiseSparse",
    "4BitRowwiseSparse",
    "2BitRowwiseSparse",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reducer", ["Sum", "WeightedSum", "Mean"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_lookups_against_dequantized_loops(kind, reducer, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    table = rng.standard_normal((ROWS, COLS)).astype(f32)
    lengths = np.array(data.draw(st.lists(st.integers(0, 4), max_size=4)), np.int32)
    pruned = kind.endswith("Sparse")
    n_ids = 10 if pruned else ROWS
    idx = np.array(
        data.draw(st.lists(st.integers(0, n_ids - 1), min_size=int(lengths.sum()), max_size=int(lengths.sum()))),
        np.int64,
    )
    w = rng.standard_normal(idx.size).astype(f32)
    q = quantize(kind, table)
    ins, vals = ["q"], [q[0]]
    if "Weighted" in reducer:
        ins.append("w")
        vals.append(w)
    ins += ["i", "l"]
    vals += [idx, lengths]
    sb = mapping = None
    if kind == "8BitsRowwise":
        ins.append("sb")
        vals.append(q[1])
        sb = q[1]
    if pruned:
        mapping = np.array([data.draw(st.integers(-1, ROWS - 1)) for _ in range(n_ids)], np.int32)
        if data.draw(st.booleans()):
            mapping = np.array([0], np.int32)  # "not pruned"
            vals[ins.index("i")] = idx = idx % ROWS
        ins.append("map")
        vals.append(mapping)
    op = CreateOperator(f"SparseLengths{reducer}{kind}", ins, ["y"])
    expected = reference(kind, reducer, q[0], idx, lengths, w if "Weighted" in reducer else None, sb, mapping)
    assert_reference_checks(op, vals, lambda *_: expected, threshold=1e-4, atol=1e-4)


def test_weighted_mean_8bits_rowwise():
    table = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(f32)
    q, sb = quantize("8BitsRowwise", table)
    idx, lengths, w = np.array([1, 3, 3, 0]), np.array([3, 0, 1], np.int32), np.array([0.5, 2, -1, 1], f32)
    expected = reference("8BitsRowwise", "Mean", q, idx, lengths, w, sb)
    op = CreateOperator("SparseLengthsWeightedMean8BitsRowwise", ["q", "w", "i", "l", "sb"], ["y"])
    assert_reference_checks(op, [q, w, idx, lengths, sb], lambda *_: expected, threshold=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_sparse_lookup_drops_pruned_ids(data):
    mapping = np.array(data.draw(st.lists(st.integers(-1, 5), min_size=8, max_size=8)), np.int32)
    lengths = np.array(data.draw(st.lists(st.integers(0, 3), max_size=4)), np.int32)
    idx = np.array(
        data.draw(st.lists(st.integers(0, 7), min_size=int(lengths.sum()), max_size=int(lengths.sum()))), np.int32
    )
    w = np.arange(idx.size, dtype=f32)
    kept, new_lengths, new_w, k = [], [], [], 0
    for n in lengths:
        c = 0
        for _ in range(n):
            if mapping[idx[k]] != -1:
                kept.append(mapping[idx[k]])
                new_w.append(w[k])
                c += 1
            k += 1
        new_lengths.append(c)
    op = CreateOperator("SparseLengthsSumSparseLookup", ["i", "l", "m", "w"], ["oi", "ol", "ow"])
    assert_reference_checks(
        op,
        [idx, lengths, mapping, w],
        lambda *_: [np.array(kept, np.int32), np.array(new_lengths, np.int32), np.array(new_w, f32)],
        check_inference=False,
    )


@given(rows=st.integers(1, 6), cols=st.integers(1, 9), n=st.integers(0, 8), seed=st.integers(0, 2**16))
@settings(max_examples=15, deadline=None)
def test_gather_fused_8bit_rowwise_dequantizes(rows, cols, n, seed):
    rng = np.random.default_rng(seed)
    q = quantize("Fused8BitRowwise", rng.standard_normal((rows, cols)).astype(f32))[0]
    idx = rng.integers(0, rows, n).astype(np.int64)

    def reference(q, idx):
        return np.array([dequant_row("Fused8BitRowwise", q, r) for r in idx], f32).reshape(n, cols)

    assert_reference_checks(CreateOperator("GatherFused8BitRowwise", ["q", "i"], ["y"]), [q, idx], reference)


def test_gather_fused_8bit_rowwise_needs_a_fused_table():
    with pytest.raises(FrameworkError, match="GatherFused8BitRowwise.*more than 8 columns"):
        run_op_on(CreateOperator("GatherFused8BitRowwise", ["q", "i"], ["y"]), [np.zeros((3, 8), np.uint8), [0]])


@pytest.mark.parametrize(
    "op_type, inputs, message",
    [
        (
            "SparseLengthsSumFused8BitRowwise",
            [np.zeros((3, 12), np.uint8), np.array([3]), np.array([1], np.int32)],
            "index 3",
        ),
        ("SparseLengthsSumFused8BitRowwise", [np.zeros((3, 12), f32), np.array([0]), np.array([1], np.int32)], "uint8"),
        (
            "SparseLengthsSumFused4BitRowwise",
            [np.zeros((3, 6), np.uint8), np.array([0, 1]), np.array([1], np.int32)],
            "sum to 1",
        ),
        (
            "SparseLengthsSum4BitRowwiseSparse",
            [np.zeros((3, 6), np.uint8), np.array([5]), np.array([1], np.int32), np.array([0, 1, 2], np.int32)],
            "index 5",
        ),
    ],
)
def test_bad_input_is_a_named_error(op_type, inputs, message):
    names = [f"in{k}" for k in range(len(inputs))]
    with pytest.raises(FrameworkError, match=f"{op_type}.*{message}"):
        run_op_on(CreateOperator(op_type, names, ["y"]), inputs)


def test_the_lookup_family_is_complete():
    from framework.ops import all_schemas

    names = sorted(s.type for s in all_schemas() if s.operator_class.__module__.endswith("embedding_lookup"))
    assert names == [
        "GatherFused8BitRowwise",
        "SparseLengthsMean2BitRowwiseSparse",
        "SparseLengthsMean4BitRowwiseSparse",
        "SparseLengthsMean8BitRowwiseSparse",
        "SparseLengthsMean8BitsRowwise",
        "SparseLengthsMeanFused2BitRowwise",
        "SparseLengthsMeanFused4BitRowwise",
        "SparseLengthsMeanFused8BitRowwise",
        "SparseLengthsSum2BitRowwiseSparse",
        "SparseLengthsSum4BitRowwiseSparse",
        "SparseLengthsSum8BitRowwiseSparse",
        "SparseLengthsSum8BitsRowwise",
        "SparseLengthsSumFused2BitRowwise",
        "SparseLengthsSumFused4BitRowwise",
        "SparseLengthsSumFused8BitRowwise",
        "SparseLengthsSumSparseLookup",
        "SparseLengthsWeightedMean8BitsRowwise",
        "SparseLengthsWeightedSum2BitRowwiseSparse",
        "SparseLengthsWeightedSum4BitRowwiseSparse",
        "SparseLengthsWeightedSum8BitRowwiseSparse",
        "SparseLengthsWeightedSum8BitsRowwise",
        "SparseLengthsWeightedSumFused2BitRowwise",
        "SparseLengthsWeightedSumFused4BitRowwise",
        "SparseLengthsWeightedSumFused8BitRowwise",
    ]


def test_brew_dequantize_helper():
    from framework.caffe2.python import brew
    from framework.caffe2.python.model_helper import ModelHelper
    from framework.memory.workspace import Workspace

    table = np.random.default_rng(0).standard_normal((4, 8)).astype(f32)
    q = quantize("Fused8BitRowwise", table)[0]
    m = ModelHelper(name="deq")
    out = brew.fused_8bit_rowwise_quantized_to_float(m, "q", "t")
    ws = Workspace()
    ws.feed_blob("q", q)
    ws.run_net_once(m.net.Proto())
    np.testing.assert_allclose(ws.fetch_blob(str(out)), table, atol=0.02)
