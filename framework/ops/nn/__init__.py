"""Neural-network ops: FC and MatMul, convolution and pooling, normalization, activations,
softmax and losses, dropout, image layout ops.

Each import below registers its module's ops; keep one line per module.
conv_args.py (shared conv/pool arguments) and axes.py (axis helpers) register no ops.
"""

from framework.ops.nn import (  # noqa: F401
    activations,
    batch_norm,
    calibration,
    concat_shuffle,
    conv,
    conv_fusion,
    conv_transpose,
    deform_conv,
    distances,
    dropout,
    fc,
    group_norm,
    hsoftmax,
    image,
    layer_norm,
    listwise,
    locally_connected,
    losses,
    matmul,
    normalization,
    pairwise_interactions,
    pool,
    rank_losses,
    rectifiers,
    resize_3d,
    rms_norm,
    smooth_activations,
    softmax,
    space_batch,
    spatial_softmax,
    stumps,
    summarize,
    top_k,
    upsample,
    vector_norms,
)
