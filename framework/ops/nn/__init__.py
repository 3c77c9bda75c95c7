"""Neural-network ops: FC and MatMul, convolution and pooling, normalization, activations,
softmax and losses, dropout, image layout ops.

``MODULES`` names every module that registers ops, one line each; ``framework.ops.families`` imports
them one by one as their op types are first looked up (importing this package registers nothing).
conv_args.py (shared conv/pool arguments) and axes.py (axis helpers) register no ops.
"""

MODULES = (
    "activations",
    "attention",
    "batch_norm",
    "calibration",
    "concat_shuffle",
    "conv",
    "conv_fusion",
    "conv_transpose",
    "deform_conv",
    "distances",
    "dropout",
    "fc",
    "group_norm",
    "hsoftmax",
    "image",
    "layer_norm",
    "listwise",
    "locally_connected",
    "losses",
    "matmul",
    "normalization",
    "pairwise_interactions",
    "pool",
    "rank_losses",
    "rectifiers",
    "resize_3d",
    "rms_norm",
    "smooth_activations",
    "softmax",
    "space_batch",
    "spatial_softmax",
    "squeeze_excite",
    "stumps",
    "summarize",
    "top_k",
    "upsample",
    "vector_norms",
)
