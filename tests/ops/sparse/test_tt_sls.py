"""TTSparseLengthsSum against a numpy reference that rebuilds the whole table from the cores (einsum), and
its gradient against central differences for each core."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_gradient_checks, run_op_on


def _table(c0, c1, c2):
    # T[i0, i1, i2, j0, j1, j2] = sum_ab c0[i0, 0, j0, a] c1[i1, a, j1, b] c2[i2, b, j2, 0]
    t = np.einsum("pxja,qakb,rblx->pqrjkl", c0, c1, c2)
    v = c0.shape[0] * c1.shape[0] * c2.shape[0]
    return t.reshape(v, -1)


def _case(seed, fi, fj, ranks, lengths):
    rng = np.random.default_rng(seed)
    cores = [rng.standard_normal((fi[k], ranks[k], fj[k], ranks[k + 1])).astype(np.float32) for k in range(3)]
    n = int(sum(lengths))
    idx = rng.integers(0, int(np.prod(fi)), size=n).astype(np.int64)
    return cores, idx, np.array(lengths, np.int32)


def _op(fi, fj, ranks):
    return CreateOperator(
        "TTSparseLengthsSum", ["c0", "c1", "c2", "idx", "len"], ["Y", "o0", "o1", "digits"],
        factor_i=fi, factor_j=fj, ranks=ranks, emb_size=int(np.prod(fj)),
    )  # fmt: skip


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), fi=st.lists(st.integers(1, 4), min_size=3, max_size=3),
       fj=st.lists(st.integers(1, 3), min_size=3, max_size=3), r=st.lists(st.integers(1, 3), min_size=2, max_size=2),
       lengths=st.lists(st.integers(0, 3), min_size=1, max_size=4))  # fmt: skip
def test_forward_matches_the_rebuilt_table(seed, fi, fj, r, lengths):
    ranks = [1, *r, 1]
    cores, idx, lens = _case(seed, fi, fj, ranks, lengths)
    y, o0, o1, digits = run_op_on(_op(fi, fj, ranks), [*cores, idx, lens])
    table = _table(*(c.astype(np.float64) for c in cores))
    segments = np.repeat(np.arange(lens.size), lens)
    want = np.zeros((lens.size, table.shape[1]))
    np.add.at(want, segments, table[idx])
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    assert digits.tolist() == [[i // (fi[1] * fi[2]), (i // fi[2]) % fi[1], i % fi[2]] for i in idx.tolist()]
    assert o0.shape == (idx.size, fj[0], ranks[1]) and o1.shape == (idx.size, fj[0] * fj[1], ranks[2])


@pytest.mark.parametrize("core", [0, 1, 2])
def test_gradient_of_each_core(core):
    fi, fj, ranks = [3, 2, 2], [2, 2, 3], [1, 2, 3, 1]
    cores, idx, lens = _case(7, fi, fj, ranks, [2, 0, 3])
    assert_gradient_checks(_op(fi, fj, ranks), [*cores, idx, lens], core, [0], threshold=1e-3)


def test_out_of_range_index_and_bad_lengths_are_refused():
    fi, fj, ranks = [2, 2, 2], [1, 1, 1], [1, 1, 1, 1]
    cores, idx, lens = _case(1, fi, fj, ranks, [2])
    with pytest.raises(FrameworkError, match="outside"):
        run_op_on(_op(fi, fj, ranks), [*cores, np.array([0, 8], np.int64), lens])
    with pytest.raises(FrameworkError, match="lengths sum to 3"):
        run_op_on(_op(fi, fj, ranks), [*cores, idx, np.array([3], np.int32)])
