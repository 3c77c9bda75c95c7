"""ONNX ops with no Caffe2 counterpart (family ``onnx``): what the ONNX backend
(``framework/onnx/importer.py``) maps an ONNX node to when no Caffe2 op has its exact semantics.
Named ``ONNX<Op>`` (e.g. ``ONNXGatherElements``); each follows the ONNX operator spec of the opsets
its translator accepts, and is a full op here: schema, docs, shape inference, gradient decision, tests.

Each import below registers its module's ops: one ``from framework.ops.onnx import <module>  # noqa: F401``
line per module, kept in alphabetical order.
"""

from framework.ops.onnx import (
    attention,  # noqa: F401
    batch_norm_training,  # noqa: F401
    cast,  # noqa: F401
    col2im,  # noqa: F401
    cumulative,  # noqa: F401
    deform_conv,  # noqa: F401
    det,  # noqa: F401
    dft,  # noqa: F401
    einsum,  # noqa: F401
    elements,  # noqa: F401
    elementwise,  # noqa: F401
    gated,  # noqa: F401
    grid_sample,  # noqa: F401
    image_decoder,  # noqa: F401
    linear_attention,  # noqa: F401
    losses,  # noqa: F401
    masks,  # noqa: F401
    ml,  # noqa: F401
    mvn,  # noqa: F401
    native,  # noqa: F401
    nd_index,  # noqa: F401
    nms,  # noqa: F401
    optional,  # noqa: F401
    pad,  # noqa: F401
    pool,  # noqa: F401
    qlinear_conv,  # noqa: F401
    qlinear_matmul,  # noqa: F401
    quantize,  # noqa: F401
    recurrent,  # noqa: F401
    reduce,  # noqa: F401
    resize,  # noqa: F401
    rms_norm,  # noqa: F401
    roi_align,  # noqa: F401
    rotary,  # noqa: F401
    sequence,  # noqa: F401
    slice,  # noqa: F401
    sorting,  # noqa: F401
    squeeze,  # noqa: F401
    strings,  # noqa: F401
    tensor_scatter,  # noqa: F401
    tfidf,  # noqa: F401
    training,  # noqa: F401
    tree_ensemble,  # noqa: F401
    trilu,  # noqa: F401
    unary,  # noqa: F401
    unpool,  # noqa: F401
    values,  # noqa: F401
)
