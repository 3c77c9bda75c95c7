"""Sparse ops: segment reductions (Lengths*, SortedSegment*, UnsortedSegment*, their Sparse* gather-first
forms, and the SortedSegmentRange* reducers), the lengths / segment-id utilities that recommendation
models use, gathers over batches and ranges, packing, one-hot encodings, sparse <-> dense conversions,
boolean masks, Unique and LengthsTopK, the growing id -> index map (Index*), key-value maps and
id-list merging and hashing, and the tensor-train embedding sum (TTSparseLengthsSum).

``MODULES`` names every module that registers ops, one line each; ``framework.ops.families`` imports
them one by one as their op types are first looked up (importing this package registers nothing).
"""

MODULES = (
    "boolean_mask",
    "bucketize",
    "feature_maps",
    "gather",
    "id_lists",
    "index",
    "lengths",
    "maps",
    "one_hot",
    "pack_segments",
    "partition",
    "position_encoding",
    "reduce_front",
    "regularizers",
    "scatter",
    "segment_range",
    "segment_reductions",
    "sparse_to_dense",
    "tt_sls",
    "unique",
    "utility",
)
