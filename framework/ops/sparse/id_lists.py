"""Id-list utilities: ``MergeIdLists`` (``merge_id_lists_op.h``) and ``IndexHash`` (``index_hash_ops.h``).

- ``MergeIdLists(LENGTHS_0, VALUES_0, LENGTHS_1, VALUES_1, ...) -> (MERGED_LENGTHS, MERGED_VALUES)``: per
  example, the sorted set of ids from every list (duplicates dropped). No gradient.
- ``IndexHash(INDICES) -> HASHED``: Caffe2's hash of each id's bytes, ``h = seed * 0xDEADBEEF``, then
  ``h = h * 65537 + byte`` over the id's little-endian bytes (as signed int8), in the id's own integer
  width with wraparound, finally ``(modulo + h % modulo) % modulo`` (C's truncating %). No gradient.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec
from framework.ops.sparse.lengths import lengths_of

I32 = np.dtype(np.int32)


@register_op(
    "MergeIdLists",
    inputs=lambda n: n > 0 and n % 2 == 0,
    outputs=2,
    input_docs=[("LENGTHS_k", "ids per example of list k (all lists: same batch)"), ("VALUES_k", "ids of list k")],
    output_docs=[("MERGED_LENGTHS", "int32 ids per example"), ("MERGED_VALUES", "sorted distinct ids per example")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, I32), TensorSpec((None,), ins[1].dtype)],
    category="sparse",
)
class MergeIdLists(Operator):
    """Union of several id lists, example by example, sorted and without duplicates."""

    def run(self) -> None:
        pairs = len(self.inputs) // 2
        batch = self.input(0).shape[0] if self.input(0).ndim == 1 else -1
        dtype = self.input(1).dtype
        segs, vals = [], []
        for k in range(pairs):
            lengths, values = lengths_of(self, 2 * k), self.input(2 * k + 1)
            if len(lengths) != batch:
                raise ShapeError(
                    f"{self.describe()}: LENGTHS '{self.input_names[2 * k]}' has {len(lengths)} examples, "
                    f"expected {batch}"
                )
            if values.ndim != 1 or values.dtype.kind not in "iu" or values.dtype != dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: VALUES '{self.input_names[2 * k + 1]}' must be 1-D {dtype}"
                )
            if int(lengths.sum()) != values.size:
                raise ShapeError(
                    f"{self.describe()}: LENGTHS '{self.input_names[2 * k]}' sum to {int(lengths.sum())}, "
                    f"VALUES has {values.size}"
                )
            segs.append(np.repeat(np.arange(batch), lengths))
            vals.append(values)
        seg = np.concatenate(segs) if segs else np.zeros(0, np.int64)
        val = np.concatenate(vals).astype(dtype, copy=False)
        pairs_sorted = (
            np.unique(np.stack([seg.astype(np.int64), val.astype(np.int64)], axis=1), axis=0)
            if seg.size
            else np.zeros((0, 2), np.int64)
        )
        counts = np.bincount(pairs_sorted[:, 0], minlength=batch) if batch else np.zeros(0, np.int64)
        self.output(0, (batch,), I32)[:] = counts
        self.output(1, (len(pairs_sorted),), dtype)[:] = pairs_sorted[:, 1]


@register_op(
    "IndexHash",
    allow_inplace={(0, 0)},
    args=[Arg("seed", INT, 0, "hash seed"), Arg("modulo", INT, 0, "hashed ids fall in [0, modulo); must be > 0")],
    input_docs=[("INDICES", "int32/int64 ids")],
    output_docs=[("HASHED_INDICES", "the ids hashed into [0, modulo), same shape and type")],
    infer=lambda args, ins: [ins[0]],
    category="sparse",
)
class IndexHash(Operator):
    """Hash ids into [0, modulo) with Caffe2's byte-wise multiplicative hash (module doc)."""

    def setup(self) -> None:
        if self.args.modulo <= 0:
            raise self.arg_error(f"modulo should be > 0, got {self.args.modulo}")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeMismatchError(f"{self.describe()}: INDICES must be int32 or int64, got {x.dtype}")
        if self.args.modulo > np.iinfo(x.dtype).max:
            raise self.arg_error(f"modulo {self.args.modulo} is larger than the {x.dtype} ids allow")
        t = x.dtype
        with np.errstate(over="ignore"):
            seed = np.array([self.args.seed], np.int64) * np.int64(0xDEADBEEF)  # int64 product, then T
            h = np.full(x.shape, seed.astype(t)[0], t)
            raw = np.ascontiguousarray(x).astype(t.newbyteorder("<"), copy=False).view(np.int8)
            raw = raw.reshape(*x.shape, t.itemsize)
            mult = np.array(65537, t)
            for b in range(t.itemsize):
                h = h * mult + raw[..., b].astype(t)
        mod = np.int64(self.args.modulo)
        r = np.fmod(h.astype(np.int64), mod)  # C's %: the sign of the dividend
        self.output(0, x.shape, t)[...] = np.fmod(mod + r, mod).astype(t)


no_gradient("MergeIdLists", "IndexHash")
