"""LSTMUnit / GRUUnit against numpy loop references, PyTorch cells, and central differences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_gradient_checks, assert_reference_checks


def sig(x):
    return 1 / (1 + np.exp(-x))


def lstm_ref(h, c, x, lengths, t, forget_bias=0.0, drop_states=False):
    n, d = c.shape[1], c.shape[2]
    H, C = np.zeros_like(c), np.zeros_like(c)
    for r in range(n):
        if lengths is not None and t >= lengths[r]:
            H[0, r] = 0 if drop_states else h[0, r]
            C[0, r] = 0 if drop_states else c[0, r]
            continue
        gi, gf, go, gg = (x[0, r, k * d : (k + 1) * d] for k in range(4))
        cc = sig(gf + forget_bias) * c[0, r] + sig(gi) * np.tanh(gg)
        C[0, r] = cc
        H[0, r] = sig(go) * np.tanh(cc)
    return H, C


def gru_ref(h, x, lengths, t, drop_states=False):
    n, d = h.shape[1], h.shape[2]
    H = np.zeros_like(h)
    for r in range(n):
        if lengths is not None and t >= lengths[r]:
            H[0, r] = 0 if drop_states else h[0, r]
            continue
        z = sig(x[0, r, d : 2 * d])
        hb = np.tanh(x[0, r, 2 * d :])
        H[0, r] = h[0, r] * z + hb * (1 - z)
    return H


case = st.tuples(
    st.integers(1, 4), st.integers(1, 4), st.integers(0, 3), st.booleans(), st.booleans(), st.integers(0, 2**16)
)


@settings(max_examples=30, deadline=None)
@given(case, st.sampled_from([0.0, 1.0]))
def test_lstm_unit_reference(c, forget_bias):
    n, d, t, drop, with_lengths, seed = c
    rng = np.random.default_rng(seed)
    h, cs = rng.standard_normal((2, 1, n, d)).astype(np.float32)
    x = rng.standard_normal((1, n, 4 * d)).astype(np.float32)
    lengths = rng.integers(0, 4, n).astype(np.int32)
    ts = np.array([t], np.int32)
    if with_lengths:
        op = CreateOperator(
            "LSTMUnit", ["h", "c", "x", "l", "t"], ["H", "C"], forget_bias=forget_bias, drop_states=drop
        )
        ins = [h, cs, x, lengths, ts]
    else:
        op = CreateOperator("LSTMUnit", ["h", "c", "x", "t"], ["H", "C"], forget_bias=forget_bias, sequence_lengths=0)
        ins = [h, cs, x, ts]
    ref = lstm_ref(h, cs, x, lengths if with_lengths else None, t, forget_bias, drop)
    assert_reference_checks(op, ins, lambda *_: ref)
    for k in (0, 1, 2):  # the maker needs both output gradients, as Caffe2's
        assert_gradient_checks(op, ins, k, [0, 1], threshold=2e-3)


@settings(max_examples=30, deadline=None)
@given(case)
def test_gru_unit_reference(c):
    n, d, t, drop, with_lengths, seed = c
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((1, n, d)).astype(np.float32)
    x = rng.standard_normal((1, n, 3 * d)).astype(np.float32)
    lengths = rng.integers(0, 4, n).astype(np.int32)
    ts = np.array([t], np.int32)
    if with_lengths:
        op = CreateOperator("GRUUnit", ["h", "x", "l", "t"], ["H"], drop_states=drop)
        ins = [h, x, lengths, ts]
    else:
        op = CreateOperator("GRUUnit", ["h", "x", "t"], ["H"], sequence_lengths=0, drop_states=drop)
        ins = [h, x, ts]
    assert_reference_checks(op, ins, lambda *_: gru_ref(h, x, lengths if with_lengths else None, t, drop))
    for k in (0, 1):
        assert_gradient_checks(op, ins, k, threshold=2e-3)


def test_units_on_empty_batch():
    z = np.zeros((1, 0, 2), np.float32)
    assert_reference_checks(
        CreateOperator("LSTMUnit", ["h", "c", "x", "l", "t"], ["H", "C"]),
        [z, z, np.zeros((1, 0, 8), np.float32), np.zeros(0, np.int32), np.array([0], np.int32)],
        lambda *_: [z, z],
    )
    assert_reference_checks(
        CreateOperator("GRUUnit", ["h", "x", "l", "t"], ["H"]),
        [z, np.zeros((1, 0, 6), np.float32), np.zeros(0, np.int32), np.array([0], np.int32)],
        lambda *_: z,
    )


@pytest.mark.parametrize(
    "shapes, msg",
    [
        (((1, 2, 3), (1, 2, 3), (1, 2, 11), (2,)), "4 x D"),
        (((1, 2, 3), (1, 2, 4), (1, 2, 12), (2,)), "expected"),
        (((2, 3), (2, 3), (2, 12), (2,)), "1 x N x D"),
        (((1, 2, 3), (1, 2, 3), (1, 2, 12), (3,)), "seq_lengths"),
    ],
)
def test_lstm_unit_errors(shapes, msg):
    ws = Workspace()
    for name, s in zip("hcxl", shapes):
        ws.feed_blob(name, np.zeros(s, np.int32 if name == "l" else np.float32))
    ws.feed_blob("t", np.array([0], np.int32))
    with pytest.raises(FrameworkError, match=msg) as e:
        ws.run_operator_once(CreateOperator("LSTMUnit", ["h", "c", "x", "l", "t"], ["H", "C"]))
    assert "LSTMUnit" in str(e.value)
    assert not ws.has_blob("H")
    with pytest.raises(FrameworkError, match="inputs"):
        ws.run_operator_once(CreateOperator("LSTMUnit", ["h", "c", "x", "t"], ["H", "C"]))


@pytest.mark.torch
def test_units_match_torch_cells():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    n, din, d = 3, 5, 4
    x = rng.standard_normal((n, din)).astype(np.float32)
    h = rng.standard_normal((n, d)).astype(np.float32)
    c = rng.standard_normal((n, d)).astype(np.float32)
    cell = torch.nn.LSTMCell(din, d)
    with torch.no_grad():
        th, tc = cell(torch.from_numpy(x), (torch.from_numpy(h), torch.from_numpy(c)))
    w_ih, w_hh = cell.weight_ih.detach().numpy(), cell.weight_hh.detach().numpy()
    b = (cell.bias_ih + cell.bias_hh).detach().numpy()
    gates = x @ w_ih.T + h @ w_hh.T + b  # torch order i, f, g, o
    i, f, g, o = np.split(gates, 4, axis=1)
    ws = Workspace()
    ws.feed_blob("h", h[None])
    ws.feed_blob("c", c[None])
    ws.feed_blob("x", np.concatenate([i, f, o, g], axis=1)[None])  # Caffe2 order i, f, o, g
    ws.feed_blob("t", np.array([0], np.int32))
    ws.run_operator_once(CreateOperator("LSTMUnit", ["h", "c", "x", "t"], ["H", "C"], sequence_lengths=0))
    np.testing.assert_allclose(ws.fetch_blob("H")[0], th.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("C")[0], tc.numpy(), rtol=1e-5, atol=1e-6)

    gcell = torch.nn.GRUCell(din, d)
    with torch.no_grad():
        gh = gcell(torch.from_numpy(x), torch.from_numpy(h)).numpy()
    wi, wh = gcell.weight_ih.detach().numpy(), gcell.weight_hh.detach().numpy()
    bi, bh = gcell.bias_ih.detach().numpy(), gcell.bias_hh.detach().numpy()
    gi, gh_ = x @ wi.T + bi, h @ wh.T + bh
    r = sig(gi[:, :d] + gh_[:, :d])
    pre = np.concatenate(
        [gi[:, :d] + gh_[:, :d], gi[:, d : 2 * d] + gh_[:, d : 2 * d], gi[:, 2 * d :] + r * gh_[:, 2 * d :]], axis=1
    )
    ws.feed_blob("gx", pre[None].astype(np.float32))
    ws.run_operator_once(CreateOperator("GRUUnit", ["h", "gx", "t"], ["GH"], sequence_lengths=0))
    np.testing.assert_allclose(ws.fetch_blob("GH")[0], gh, rtol=1e-5, atol=1e-6)
