"""ONNXTfIdfVectorizer: ONNX's TfIdfVectorizer, n-gram counts of token rows against a pool.

The pool lists n-grams grouped by length (``ngram_counts[k]``: where the (k+1)-grams start in
``pool_int64s``/``pool_strings``); the j-th pool n-gram counts into output column
``ngram_indexes[j]``. Only lengths in [min_gram_length, max_gram_length] count. Each row is
scanned with skip distances 1 .. max_skip_count + 1 (the tokens at s, s+d, s+2d...); unigrams are
counted on the first distance only. ``mode``: TF (the counts), IDF (the weight, or 1, where the
count is non-zero), TFIDF (weight * count). Not differentiable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOATS, INT, INTS, REQUIRED, STRING, STRINGS, Arg, TensorSpec


def _infer(args: Any, ins: list) -> list:
    size = max(args.ngram_indexes, default=-1) + 1
    s = ins[0].shape
    shape = None if s is None else ((size,) if len(s) <= 1 else (s[0], size))
    return [TensorSpec(shape, np.dtype(np.float32))]


@register_op(
    "ONNXTfIdfVectorizer",
    args=[
        Arg("max_gram_length", INT, REQUIRED, "longest n-gram counted"),
        Arg("min_gram_length", INT, REQUIRED, "shortest n-gram counted"),
        Arg("max_skip_count", INT, REQUIRED, "largest number of tokens skipped between n-gram items"),
        Arg("mode", STRING, "TF", "TF, IDF or TFIDF (ONNX requires it)", choices=("TF", "IDF", "TFIDF")),
        Arg("ngram_counts", INTS, REQUIRED, "start index in the pool of the n-grams of each length 1, 2..."),
        Arg("ngram_indexes", INTS, REQUIRED, "output column of each pool n-gram"),
        Arg("pool_int64s", INTS, [], "the pool (integer tokens)"),
        Arg("pool_strings", STRINGS, [], "the pool (string tokens)"),
        Arg("weights", FLOATS, [], "per output column weight (IDF/TFIDF); empty: 1"),
    ],
    input_docs=[("X", "int32/int64 or string tokens, shape [C] or [N, C]")],
    output_docs=[("Y", "float32 [max(ngram_indexes)+1] or [N, max(ngram_indexes)+1]")],
    infer=_infer,
    category="onnx",
    input_types="any",
    ranks={0: (1, 2)},
)
class ONNXTfIdfVectorizer(Operator):
    """ONNX TfIdfVectorizer (see the module docs): n-gram frequencies of each row of X against the
    pool, weighted by ``mode``."""

    def setup(self) -> None:
        a = self.args
        pool: list = [int(v) for v in a.pool_int64s] or [
            v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in a.pool_strings
        ]
        self._strings = not a.pool_int64s
        self._size = max(a.ngram_indexes, default=-1) + 1
        if any(i < 0 for i in a.ngram_indexes):
            raise self.arg_error(f"ngram_indexes must be >= 0, got {min(a.ngram_indexes)}")
        check_elements((self._size,), 8, f"{self.describe()}: the output of {self._size} columns")
        self._grams: dict[tuple, int] = {}
        starts = list(a.ngram_counts) + [len(pool)]
        j = 0
        for k in range(len(a.ngram_counts)):
            n = k + 1
            items = pool[starts[k] : starts[k + 1]]
            for g in range(len(items) // n):
                if j >= len(a.ngram_indexes):
                    raise self.arg_error("ngram_indexes has fewer entries than the pool has n-grams")
                if a.min_gram_length <= n <= a.max_gram_length:
                    self._grams.setdefault(tuple(items[g * n : (g + 1) * n]), a.ngram_indexes[j])
                j += 1
        if a.weights and len(a.weights) < self._size:
            raise self.arg_error(f"weights has {len(a.weights)} entries, the output {self._size} columns")

    def _tokens(self, x: np.ndarray) -> list:
        if self._strings != (x.dtype == object) or (not self._strings and x.dtype.kind not in "iu"):
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, expected "
                f"{'strings' if self._strings else 'integers'} like the pool"
            )
        if self._strings:
            return [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in x.tolist()]
        return [int(v) for v in x.tolist()]

    def _count(self, row: list) -> np.ndarray:
        a = self.args
        counts = np.zeros(self._size, np.int64)
        start_n = max(a.min_gram_length, 1)
        for d in range(1, min(a.max_skip_count, len(row)) + 2):  # a longer skip cannot fit in the row
            for s in range(len(row)):
                for n in range(start_n, a.max_gram_length + 1):
                    last = s + (n - 1) * d
                    if last >= len(row):
                        break
                    col = self._grams.get(tuple(row[s : last + 1 : d]))
                    if col is not None:
                        counts[col] += 1
            if start_n == 1:  # unigrams do not depend on the skip: count them once
                start_n = 2
                if start_n > a.max_gram_length:
                    break
        return counts

    def run(self) -> None:
        x = self.input(0)
        if x.ndim == 2 and x.shape[0] == 0:
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' has no rows (shape [0, C])")
        rows = [x] if x.ndim == 1 else list(x)
        counts = np.stack([self._count(self._tokens(r)) for r in rows])
        w = np.asarray(self.args.weights[: self._size], np.float32) if self.args.weights else None
        mode = self.args.mode
        if mode == "TF":
            y = counts.astype(np.float32)
        elif mode == "IDF":
            y = (counts > 0).astype(np.float32) * (w if w is not None else 1)
        else:
            y = counts.astype(np.float32) * (w if w is not None else 1)
        shape = (self._size,) if x.ndim == 1 else (x.shape[0], self._size)
        out = self.output(0, shape, np.float32)
        out[...] = y.reshape(shape)


no_gradient("ONNXTfIdfVectorizer")
