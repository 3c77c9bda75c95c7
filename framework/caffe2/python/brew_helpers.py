"""The rest of Caffe2's brew helpers (``caffe2/python/helpers/*``), registered on ``brew``:
instance_norm, spatial_gn, layer_norm, moments_with_running_stats, prelu, elementwise_linear,
conv_nd, conv_transpose, group_conv, group_conv_deprecated, depth_concat, mat_mul,
batch_mat_mul, db_input. Parameter names, shapes, initializers and outputs are Caffe2's.
"""

from __future__ import annotations

from typing import Any, Sequence

from framework.caffe2.python.brew import _const, _conv_inputs, _helper, _next_name, _op, _weight_and_bias, concat
from framework.caffe2.python.model_helper import ModelHelper, ParameterTags, update_initializer


@_helper
def instance_norm(
    model: ModelHelper, blob_in: Any, blob_out: Any, dim_in: int, order: str = "NCHW", **kwargs: Any
) -> Any:
    """InstanceNorm with ``<out>_s`` (ones) and ``<out>_b`` (zeros); in training it also writes
    ``<out>_sm`` / ``<out>_siv`` (saved mean and inverse std)."""
    blob_out = blob_out or _next_name(model, "instance_norm")
    scale, bias = _weight_and_bias(model, blob_out, ("_s", [dim_in], _const(1.0)), ("_b", [dim_in], _const(0.0)))
    if kwargs.get("is_test"):
        kwargs.pop("is_test")
        return _op(model.net, "InstanceNorm", [blob_in, scale, bias], [blob_out], order=order, **kwargs)
    outs = [blob_out, f"{blob_out}_sm", f"{blob_out}_siv"]
    kwargs.pop("is_test", None)
    return _op(model.net, "InstanceNorm", [blob_in, scale, bias], outs, order=order, **kwargs)[0]


@_helper
def spatial_gn(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    init_scale: float = 1.0,
    init_bias: float = 0.0,
    ScaleInitializer: Any = None,
    BiasInitializer: Any = None,
    RunningMeanInitializer: Any = None,
    RunningVarianceInitializer: Any = None,
    order: str = "NCHW",
    **kwargs: Any,
) -> Any:
    """GroupNorm (``group`` groups) with ``<out>_s`` and ``<out>_b``; also writes ``<out>_mean``
    and ``<out>_std``."""
    blob_out = blob_out or _next_name(model, "spatial_gn")
    scale, bias = _weight_and_bias(
        model,
        blob_out,
        ("_s", [dim_in], update_initializer(ScaleInitializer, None, _const(init_scale))),
        ("_b", [dim_in], update_initializer(BiasInitializer, None, _const(init_bias))),
    )
    outs = [blob_out, f"{blob_out}_mean", f"{blob_out}_std"]
    return _op(model.net, "GroupNorm", [blob_in, scale, bias], outs, order=order, **kwargs)[0]


@_helper
def layer_norm(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: Any,
    axis: int = 1,
    epsilon: float = 1e-4,
    initial_scale: float = 1.0,
    initial_bias: float = 0.0,
) -> tuple[Any, Any, Any]:
    """LayerNorm then a per-feature scale (``<out>_scale``) and bias (``<out>_bias``) applied with
    broadcast Mul/Add; returns (output, mean, std) as Caffe2's."""
    normalized, mean, std = model.net.LayerNorm(
        [blob_in], [blob_out, f"{blob_out}_mean", f"{blob_out}_std"], axis=axis, epsilon=epsilon
    )
    shape = [dim_in] if isinstance(dim_in, int) else list(dim_in)
    scale, bias = _weight_and_bias(
        model, blob_out, ("_scale", shape, _const(initial_scale)), ("_bias", shape, _const(initial_bias))
    )
    scaled = model.net.Mul([normalized, scale], [f"{blob_out}_scaled"], broadcast=1, axis=axis)
    biased = model.net.Add([scaled, bias], [f"{blob_out}_biased"], broadcast=1, axis=axis)
    return biased, mean, std


@_helper
def moments_with_running_stats(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    RunningMeanInitializer: Any = None,
    RunningVarianceInitializer: Any = None,
    order: str = "NCHW",
    **kwargs: Any,
) -> Any:
    """Per-channel batch mean and variance (``<out>_sm``, ``<out>_sv``) with running-statistics
    parameters ``<out>_rm`` / ``<out>_riv``."""
    _weight_and_bias(
        model,
        blob_out,
        ("_rm", [dim_in], update_initializer(RunningMeanInitializer, None, _const(0.0))),
        ("_riv", [dim_in], update_initializer(RunningVarianceInitializer, None, _const(1.0))),
        (ParameterTags.COMPUTED_PARAM, ParameterTags.COMPUTED_PARAM),
    )
    axes = [0, 2, 3] if order == "NCHW" else [0, 1, 2]
    outs = [f"{blob_out}_sm", f"{blob_out}_sv"]
    return _op(model.net, "Moments", [blob_in], outs, axes=axes, keepdims=False, **kwargs)


@_helper
def prelu(
    model: ModelHelper, blob_in: Any, blob_out: Any, num_channels: int = 1, slope_init: Any = None, **kwargs: Any
) -> Any:
    """PRelu with a learned slope ``<out>_slope`` ([num_channels], 0.25 by default)."""
    init = update_initializer(None, slope_init, _const(0.25))
    slope = model.create_param(f"{blob_out}_slope", [num_channels], init, ParameterTags.WEIGHT)
    return _op(model.net, "PRelu", [blob_in, slope], [blob_out], **kwargs)


@_helper
def elementwise_linear(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    weight_init: Any = None,
    bias_init: Any = None,
    **kwargs: Any,
) -> Any:
    """``Y = X * w + b`` per feature with ``<out>_w`` (ones) and ``<out>_b`` (zeros), [dim_in]."""
    w, b = _weight_and_bias(
        model,
        blob_out,
        ("_w", [dim_in], update_initializer(None, weight_init, _const(1.0))),
        ("_b", [dim_in], update_initializer(None, bias_init, _const(0.0))),
    )
    return _op(model.net, "ElementwiseLinear", [blob_in, w, b], blob_out, **kwargs)


@_helper
def conv_nd(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    kernel: Sequence[int],
    weight_init: Any = None,
    bias_init: Any = None,
    WeightInitializer: Any = None,
    BiasInitializer: Any = None,
    group: int = 1,
    transform_inputs: Any = None,
    order: str = "NCHW",
    **kwargs: Any,
) -> Any:
    """N-d convolution: ``kernel`` a list; weight ``[dim_out, dim_in / group, *kernel]`` (NCHW)."""
    kernel = list(kernel)
    blob_out = blob_out or _next_name(model, "conv")
    inits = (WeightInitializer, weight_init, BiasInitializer, bias_init)
    inputs = _conv_inputs(
        model, blob_in, blob_out, dim_in, dim_out, kernel, inits, group, transform_inputs, order, kwargs
    )
    return _op(model.net, "Conv", inputs, blob_out, kernels=kernel, order=order, **kwargs)


@_helper
def conv_transpose(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    kernel: int,
    weight_init: Any = None,
    bias_init: Any = None,
    use_cudnn: bool = False,
    order: str = "NCHW",
    cudnn_exhaustive_search: bool = False,
    ws_nbytes_limit: Any = None,
    **kwargs: Any,
) -> Any:
    """ConvTranspose with ``<out>_w`` ([dim_in, dim_out, k, k] NCHW / [dim_in, k, k, dim_out] NHWC)
    and ``<out>_b`` ([dim_out])."""
    shape = [dim_in, dim_out, kernel, kernel] if order == "NCHW" else [dim_in, kernel, kernel, dim_out]
    w, b = _weight_and_bias(
        model,
        blob_out,
        ("_w", shape, update_initializer(None, weight_init, ("XavierFill", {}))),
        ("_b", [dim_out], update_initializer(None, bias_init, ("ConstantFill", {}))),
    )
    return _op(model.net, "ConvTranspose", [blob_in, w, b], blob_out, kernel=kernel, order=order, **kwargs)


@_helper
def group_conv(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    kernel: Any,
    weight_init: Any = None,
    bias_init: Any = None,
    group: int = 1,
    **kwargs: Any,
) -> Any:
    """Group convolution: ``brew.conv`` with ``group``."""
    from framework.caffe2.python.brew import conv

    return conv(
        model,
        blob_in,
        blob_out,
        dim_in,
        dim_out,
        kernel,
        weight_init=weight_init,
        bias_init=bias_init,
        group=group,
        **kwargs,
    )


@_helper
def group_conv_deprecated(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    kernel: int,
    weight_init: Any = None,
    bias_init: Any = None,
    use_cudnn: bool = False,
    order: str = "NCHW",
    cudnn_exhaustive_search: bool = False,
    ws_nbytes_limit: Any = None,
    **kwargs: Any,
) -> Any:
    """The old group convolution: split the channels, one Conv per group (``<out>_gconv_<i>_w``,
    ``_b``), concatenate (Caffe2 split with DepthSplit, the alias of Split used here)."""
    w_init = weight_init or ("XavierFill", {})
    b_init = bias_init or ("ConstantFill", {})
    group = kwargs.pop("group", 1)
    if dim_in % group or dim_out % group:
        raise ValueError("dim_in and dim_out should be divisible by group.")
    axis = 1 if order == "NCHW" else 3
    parts = model.net.Split(
        blob_in, [f"_{blob_out}_gconv_split_{i}" for i in range(group)], axis=axis, split=[dim_in // group] * group
    )
    parts = [parts] if group == 1 else parts
    gi, go = dim_in // group, dim_out // group
    shape = [go, gi, kernel, kernel] if order == "NCHW" else [go, kernel, kernel, gi]
    outs = []
    for i in range(group):
        w, b = _weight_and_bias(model, f"{blob_out}_gconv_{i}", ("_w", shape, w_init), ("_b", [go], b_init))
        outs.append(
            _op(model.net, "Conv", [parts[i], w, b], f"{blob_out}_gconv_{i}", kernel=kernel, order=order, **kwargs)
        )
    return model.net.Concat(outs, [blob_out, f"_{blob_out}_concat_dims"], order=order)[0]


@_helper
def depth_concat(model: ModelHelper, blobs_in: Sequence[Any], blob_out: Any, **kwargs: Any) -> Any:
    """The old name of ``concat``."""
    return concat(model, blobs_in, blob_out, **kwargs)


@_helper
def mat_mul(model: ModelHelper, blob_in: Any, blob_out: Any, **kwargs: Any) -> Any:
    return _op(model.net, "MatMul", blob_in, blob_out, **kwargs)


@_helper
def batch_mat_mul(
    model: ModelHelper, blob_in: Any, blob_out: Any, enable_tensor_core: bool = False, **kwargs: Any
) -> Any:
    if enable_tensor_core:
        kwargs["engine"] = "TENSORCORE"
    return _op(model.net, "BatchMatMul", blob_in, blob_out, **kwargs)


@_helper
def db_input(model: ModelHelper, blobs_out: Any, batch_size: int, db: str, db_type: str) -> Any:
    """A DB reader ``dbreader_<db>`` in the init net and TensorProtosDBInput in the net."""
    reader = model.param_init_net.CreateDB([], f"dbreader_{db}", db=db, db_type=db_type)
    return model.net.TensorProtosDBInput(reader, blobs_out, batch_size=batch_size)


@_helper
def image_input(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Sequence[Any],
    order: str = "NCHW",
    use_gpu_transform: bool = False,
    **kwargs: Any,
) -> Any:
    """ImageInput (``is_test`` required). ImageInput writes NHWC; for NCHW the image output is
    written as ``<out>_nhwc`` and moved to NCHW by NHWC2NCHW, as Caffe2's helper (with
    ``use_gpu_transform`` the op converts itself)."""
    if "is_test" not in kwargs:
        raise ValueError("brew.image_input: argument 'is_test' is required")
    blob_out = [str(b) for b in blob_out]
    if order == "NCHW" and not use_gpu_transform:
        outputs = list(_op(model.net, "ImageInput", blob_in, [blob_out[0] + "_nhwc"] + blob_out[1:], **kwargs))
        outputs[0] = model.net.NHWC2NCHW(outputs[0], blob_out[0])
        return tuple(outputs)
    if order == "NCHW":
        kwargs["use_gpu_transform"] = 1
    return _op(model.net, "ImageInput", blob_in, blob_out, **kwargs)


@_helper
def fused_8bit_rowwise_quantized_to_float(model: ModelHelper, blob_in: Any, blob_out: Any) -> Any:
    """Dequantize a fused 8-bit row-wise quantized table (Caffe2's helpers/quantization.py)."""
    return model.net.Fused8BitRowwiseQuantizedToFloat(blob_in, blob_out)


@_helper
def cond(
    model: ModelHelper, cond_blob: Any, external_blobs: Any, then_model: ModelHelper, else_model: Any = None
) -> None:
    """Caffe2's helpers/control_ops ``cond``: an If op in ``model.net`` running ``then_model.net`` (or
    ``else_model.net``) on the bool ``cond_blob``; ``external_blobs`` are the outer blobs the branches see."""
    from framework.caffe2.python.control_ops_util import add_if_op

    add_if_op(model.net, cond_blob, external_blobs, then_model.net, else_model.net if else_model else None)


@_helper
def loop(
    model: ModelHelper, cond_blob: Any, external_blobs: Any, loop_model: ModelHelper, cond_model: Any = None
) -> None:
    """Caffe2's helpers/control_ops ``loop``: a While op in ``model.net`` running ``loop_model.net`` while
    ``cond_blob`` holds (``cond_model.net``, if given, recomputes it before each iteration)."""
    from framework.caffe2.python.control_ops_util import add_while_op

    add_while_op(model.net, cond_blob, external_blobs, loop_model.net, cond_model.net if cond_model else None)


@_helper
def max_pool_with_index(model: ModelHelper, blob_in: Any, blob_out: Any, order: str = "NCHW", **kwargs: Any) -> Any:
    """Caffe2's ``max_pool_with_index``: MaxPoolWithIndex writing ``blob_out`` and ``<blob_out>_index``
    (Caffe2 registers that op for CUDA only; it fails here as an unknown op type)."""
    return model.net.MaxPoolWithIndex(blob_in, [blob_out, f"{blob_out}_index"], order=order, **kwargs)[0]


HELPERS = [
    "instance_norm",
    "spatial_gn",
    "layer_norm",
    "moments_with_running_stats",
    "prelu",
    "elementwise_linear",
    "conv_nd",
    "conv_transpose",
    "group_conv",
    "group_conv_deprecated",
    "depth_concat",
    "mat_mul",
    "batch_mat_mul",
    "db_input",
    "image_input",
    "fused_8bit_rowwise_quantized_to_float",
    "cond",
    "loop",
    "max_pool_with_index",
]
