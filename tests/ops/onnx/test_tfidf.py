"""ONNXTfIdfVectorizer against a reference written here: for each pool n-gram, the number of
(start, skip distance) placements that spell it in the row."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on

POOL_1 = [2, 3, 5]  # unigrams
POOL_2 = [2, 3, 3, 5, 5, 2, 4, 4]  # bigrams (2,3) (3,5) (5,2) (4,4)


def _reference(rows, grams, size, lo, hi, max_skip, mode, weights):
    out = np.zeros((len(rows), size), np.float64)
    for r, row in enumerate(rows):
        for g, col in grams:
            n = len(g)
            if not lo <= n <= hi:
                continue
            dists = [1] if n == 1 else range(1, max_skip + 2)
            c = sum(
                1
                for d in dists
                for s in range(len(row))
                if s + (n - 1) * d < len(row) and all(row[s + i * d] == g[i] for i in range(n))
            )
            out[r, col] += c
    if mode == "IDF":
        out = (out > 0) * (np.asarray(weights) if weights else 1.0)
    elif mode == "TFIDF" and weights:
        out = out * np.asarray(weights)
    return out.astype(np.float32)


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_counts_against_placements(data):
    lo = data.draw(st.integers(1, 2))
    hi = data.draw(st.integers(lo, 2))
    max_skip = data.draw(st.integers(0, 2))
    mode = data.draw(st.sampled_from(["TF", "IDF", "TFIDF"]))
    indexes = data.draw(st.permutations(list(range(7))))
    weights = data.draw(st.sampled_from([[], [0.5, 1, 2, 3, 0.25, 1, 4]]))
    x = data.draw(arrays(data.draw(st.sampled_from([(9,), (2, 6)])), np.int64, elements=st.integers(2, 5)))
    op = CreateOperator(
        "ONNXTfIdfVectorizer", ["X"], ["Y"], min_gram_length=lo, max_gram_length=hi, max_skip_count=max_skip,
        mode=mode, ngram_counts=[0, 3], ngram_indexes=indexes, pool_int64s=POOL_1 + POOL_2, weights=weights,
    )  # fmt: skip
    grams = [((v,), indexes[i]) for i, v in enumerate(POOL_1)]
    grams += [(tuple(POOL_2[2 * k : 2 * k + 2]), indexes[3 + k]) for k in range(4)]

    def ref(x):
        rows = [x.tolist()] if x.ndim == 1 else x.tolist()
        y = _reference(rows, grams, 7, lo, hi, max_skip, mode, weights)
        return y[0] if x.ndim == 1 else y

    assert_reference_checks(op, [x], ref)


def test_string_pool_and_type_errors():
    op = CreateOperator(
        "ONNXTfIdfVectorizer", ["X"], ["Y"], min_gram_length=1, max_gram_length=2, max_skip_count=0, mode="TF",
        ngram_counts=[0, 2], ngram_indexes=[0, 1, 2], pool_strings=["a", "b", "a", "b"],
    )  # fmt: skip
    x = np.array([b"a", b"b", b"a", b"b", b"c"], dtype=object)
    (y,) = run_op_on(op, [x])
    assert y.tolist() == [2.0, 2.0, 2.0]  # a, b, (a b)
    with pytest.raises(TypeMismatchError, match="ONNXTfIdfVectorizer.*'X'.*strings"):
        run_op_on(op, [np.array([1, 2], np.int64)])
