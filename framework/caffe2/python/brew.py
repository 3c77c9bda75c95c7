"""``brew``: helpers that add a layer (its parameters and its op) to a ModelHelper.

Every helper takes the model first. Its keyword arguments are, in rising
priority: the model's ``arg_scope`` (order, use_cudnn...), any enclosing
``brew.arg_scope(...)`` for that helper, and the call's own keywords. As in
Caffe2, ``fc`` creates ``<out>_w`` (XavierFill, shape [dim_out, dim_in]) and
``<out>_b`` (ConstantFill 0, [dim_out]) in ``model.param_init_net`` and adds
``FC([in, w, b], out)`` to ``model.net``; ``conv`` does the same with weights
``[dim_out, dim_in / group, k, k]`` (NCHW).

>>> from framework.caffe2.python.model_helper import ModelHelper
>>> m = ModelHelper("m")
>>> with arg_scope([fc], axis=1):
...     y = fc(m, "x", "y", dim_in=2, dim_out=3)
>>> [(a.name, a.i) for a in m.net.Proto().op[-1].arg]
[('axis', 1)]

Scope keys the target op does not declare (``order`` for FC, ``use_cudnn``)
are dropped rather than written into the OperatorDef. ``conv`` records
``use_cudnn`` as Caffe2 does (``engine="CUDNN"``); every op runs the CPU
implementation whatever its engine.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
from typing import Any, Callable, Iterator, Sequence

from framework.caffe2.python.model_helper import ModelHelper, ParameterTags, update_initializer
from framework.proto.framework_pb2 import TensorProto

__all__ = [
    "Register",
    "accuracy",
    "add_weight_decay",
    "arg_scope",
    "average_pool",
    "concat",
    "conv",
    "dropout",
    "fc",
    "has_helper",
    "iter",
    "leaky_relu",
    "lrn",
    "max_pool",
    "relu",
    "sigmoid",
    "softmax",
    "spatial_bn",
    "sum",
    "tanh",
    "transpose",
]

_HELPERS: dict[str, Callable[..., Any]] = {}
_SCOPES: list[dict[str, dict[str, Any]]] = [{}]
_SCOPE_KEYS = frozenset({"order", "use_cudnn", "cudnn_exhaustive_search", "ws_nbytes_limit", "float16_compute"})


@contextlib.contextmanager
def arg_scope(helpers: Any, **kwargs: Any) -> Iterator[None]:
    """Default keyword arguments for ``helpers`` (one helper or a list) inside the block."""
    if not isinstance(helpers, (list, tuple)):
        helpers = [helpers]
    new = {k: dict(v) for k, v in _SCOPES[-1].items()}
    for h in helpers:
        name = h if isinstance(h, str) else getattr(h, "__name__", str(h))
        if name not in _HELPERS:
            raise ValueError(f"brew.arg_scope: '{name}' is not a brew helper (known: {sorted(_HELPERS)})")
        new.setdefault(name, {}).update(kwargs)
    _SCOPES.append(new)
    try:
        yield
    finally:
        _SCOPES.pop()


def Register(helper: Callable[..., Any]) -> Callable[..., Any]:
    """Add a custom helper ``f(model, ...)``; it gets the same scope handling. A name already taken
    raises AttributeError (Caffe2)."""
    if helper.__name__ in _HELPERS:
        raise AttributeError(f"Helper {helper.__name__} already exists. Please change your helper name.")
    wrapped = _helper(helper)
    globals()[helper.__name__] = wrapped
    return wrapped


def has_helper(helper_or_name: Any) -> bool:
    """Whether a helper of that name (or of that function's name) is registered."""
    name = helper_or_name if isinstance(helper_or_name, str) else getattr(helper_or_name, "__name__", None)
    return name in _HELPERS


def _helper(fn: Callable[..., Any]) -> Callable[..., Any]:
    params = inspect.signature(fn).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        model = args[0] if args else kwargs.get("model")
        if not isinstance(model, ModelHelper):
            raise TypeError(f"brew.{fn.__name__}: the first argument must be a ModelHelper, got {type(model).__name__}")
        merged = dict(model.arg_scope)
        if not takes_kwargs:
            merged = {k: v for k, v in merged.items() if k in params}
        merged.update(_SCOPES[-1].get(fn.__name__, {}))
        merged.update(kwargs)
        return fn(*args, **merged)

    _HELPERS[fn.__name__] = wrapper
    return wrapper


def _op(net: Any, op_type: str, inputs: Any, outputs: Any, **kwargs: Any) -> Any:
    """``net.<op_type>(inputs, outputs, **kwargs)`` minus scope keys the op does not declare."""
    from framework.ops import get_schema

    declared = get_schema(op_type).args
    kw = {k: v for k, v in kwargs.items() if not (k in _SCOPE_KEYS and k not in declared)}
    return getattr(net, op_type)(inputs, outputs, **kw)


def _next_name(model: ModelHelper, prefix: str) -> str:
    nn = getattr(model.net, "NextName", None)
    return str(nn(prefix)) if nn is not None else prefix


def _weight_and_bias(
    model: ModelHelper,
    blob_out: Any,
    weight: tuple,
    bias: tuple,
    tags: tuple = (ParameterTags.WEIGHT, ParameterTags.BIAS),
) -> tuple[Any, Any]:
    """The two parameters of a layer, ``weight`` and ``bias`` each ``(suffix, shape, initializer)``:
    ``<out><suffix>`` created in the init net with the tags (default: weight, bias)."""
    return tuple(
        model.create_param(f"{blob_out}{suffix}", list(shape), init, tag)
        for (suffix, shape, init), tag in zip((weight, bias), tags)
    )


def _conv_inputs(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    kernels: list,
    inits: tuple,
    group: int,
    transform_inputs: Callable | None,
    order: str,
    kwargs: dict,
) -> list:
    """Caffe2's ``_ConvBase``: [X, <out>_w, <out>_b (unless no_bias)] for a convolution with ``kernels``
    (weight ``[dim_out, dim_in / group, *kernels]`` NCHW, ``[dim_out, *kernels, dim_in / group]`` NHWC);
    ``inits`` = (WeightInitializer, weight_init, BiasInitializer, bias_init). Sets ``group`` in kwargs."""
    w_cls, w_init, b_cls, b_init = inits
    per_group = int(dim_in / group)
    shape = [dim_out, per_group, *kernels] if order == "NCHW" else [dim_out, *kernels, per_group]
    w_init = update_initializer(w_cls, w_init, ("XavierFill", {}))
    inputs = [blob_in, model.create_param(f"{blob_out}_w", shape, w_init, ParameterTags.WEIGHT)]
    if not kwargs.pop("no_bias", False):
        b_init = update_initializer(b_cls, b_init, ("ConstantFill", {}))
        inputs.append(model.create_param(f"{blob_out}_b", [dim_out], b_init, ParameterTags.BIAS))
    if transform_inputs is not None:
        transform_inputs(model, blob_out, inputs)
    if group != 1:
        kwargs["group"] = group
    return inputs


def _const(value: float) -> tuple[str, dict]:
    return ("ConstantFill", {"value": value})


# -- layers with parameters -------------------------------------------------------------


@_helper
def fc(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    weight_init: Any = None,
    bias_init: Any = None,
    WeightInitializer: Any = None,
    BiasInitializer: Any = None,
    **kwargs: Any,
) -> Any:
    """Fully connected: ``Y = X W^T + b`` with ``<out>_w`` [dim_out, dim_in] and ``<out>_b`` [dim_out]
    (``freeze_bias=True``: the bias is not a trained parameter)."""
    blob_out = blob_out or _next_name(model, "fc")
    # freeze_bias (Caffe2): the bias is created but not trained (not in model.params)
    b_tags = (
        [ParameterTags.BIAS, ParameterTags.COMPUTED_PARAM] if kwargs.pop("freeze_bias", False) else ParameterTags.BIAS
    )
    w, b = _weight_and_bias(
        model,
        blob_out,
        ("_w", [dim_out, dim_in], update_initializer(WeightInitializer, weight_init, ("XavierFill", {}))),
        ("_b", [dim_out], update_initializer(BiasInitializer, bias_init, ("ConstantFill", {}))),
        (ParameterTags.WEIGHT, b_tags),
    )
    return _op(model.net, "FC", [blob_in, w, b], blob_out, **kwargs)


@_helper
def conv(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    dim_out: int,
    kernel: Any,
    weight_init: Any = None,
    bias_init: Any = None,
    WeightInitializer: Any = None,
    BiasInitializer: Any = None,
    group: int = 1,
    transform_inputs: Callable | None = None,
    order: str = "NCHW",
    **kwargs: Any,
) -> Any:
    """2-D convolution with ``<out>_w`` (XavierFill) and ``<out>_b`` (ConstantFill, unless ``no_bias``).

    ``kernel`` is an int or ``[kernel_h, kernel_w]``; the weight is
    ``[dim_out, dim_in / group, kh, kw]`` for NCHW and ``[dim_out, kh, kw, dim_in / group]`` for NHWC.
    """
    _cudnn_engine(kwargs)
    kernels = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel, kernel]
    blob_out = blob_out or _next_name(model, "conv")
    inits = (WeightInitializer, weight_init, BiasInitializer, bias_init)
    inputs = _conv_inputs(
        model, blob_in, blob_out, dim_in, dim_out, kernels, inits, group, transform_inputs, order, kwargs
    )
    if isinstance(kernel, (list, tuple)):
        kwargs.update(kernel_h=kernels[0], kernel_w=kernels[1])
    else:
        kwargs["kernel"] = kernel
    return _op(model.net, "Conv", inputs, blob_out, order=order, **kwargs)


def _cudnn_engine(kwargs: dict[str, Any]) -> None:
    """Record ``use_cudnn`` (the model's arg_scope default is True) as Caffe2's conv helper does:
    ``engine="CUDNN"`` with ``exhaustive_search`` (and ``ws_nbytes_limit`` when set); an explicit
    ``engine`` that contradicts ``use_cudnn`` is a ValueError. The op still runs on the CPU."""
    use_cudnn = kwargs.pop("use_cudnn", False)
    exhaustive = kwargs.pop("cudnn_exhaustive_search", False)
    limit = kwargs.pop("ws_nbytes_limit", None)
    engine = kwargs.get("engine")
    if engine is not None and use_cudnn and engine != "CUDNN":
        raise ValueError(f'brew.conv: with use_cudnn=True the only engine allowed is "CUDNN", got {engine!r}')
    if engine is not None and not use_cudnn and engine == "CUDNN":
        raise ValueError('brew.conv: with use_cudnn=False the only engine allowed is "", got "CUDNN"')
    if use_cudnn:
        kwargs["engine"] = "CUDNN"
        kwargs["exhaustive_search"] = exhaustive
        if limit:
            kwargs["ws_nbytes_limit"] = limit


@_helper
def spatial_bn(
    model: ModelHelper,
    blob_in: Any,
    blob_out: Any,
    dim_in: int,
    init_scale: float = 1.0,
    init_bias: float = 0.0,
    order: str = "NCHW",
    **kwargs: Any,
) -> Any:
    """Spatial batch norm with ``<out>_s`` (scale), ``<out>_b`` (bias) and running statistics
    ``<out>_rm`` / ``<out>_riv`` (computed params); training mode unless ``is_test``."""
    blob_out = blob_out or _next_name(model, "spatialbn")
    s, b = _weight_and_bias(model, blob_out, ("_s", [dim_in], _const(init_scale)), ("_b", [dim_in], _const(init_bias)))
    rm, riv = _weight_and_bias(
        model,
        blob_out,
        ("_rm", [dim_in], _const(0.0)),
        ("_riv", [dim_in], _const(1.0)),
        (ParameterTags.COMPUTED_PARAM, ParameterTags.COMPUTED_PARAM),
    )
    ins = [blob_in, s, b, rm, riv]
    if kwargs.get("is_test"):
        return _op(model.net, "SpatialBN", ins, [blob_out], order=order, **kwargs)
    outs = [blob_out, rm, riv, f"{blob_out}_sm", f"{blob_out}_siv"]
    return _op(model.net, "SpatialBN", ins, outs, order=order, **kwargs)[0]


# -- layers without parameters -----------------------------------------------------------


@_helper
def relu(model: ModelHelper, blob_in: Any, blob_out: Any, **kwargs: Any) -> Any:
    return _op(model.net, "Relu", blob_in, blob_out, **kwargs)


@_helper
def leaky_relu(model: ModelHelper, blob_in: Any, blob_out: Any, alpha: float | None = None, **kwargs: Any) -> Any:
    if alpha is not None:
        kwargs["alpha"] = float(alpha)
    return _op(model.net, "LeakyRelu", blob_in, blob_out, **kwargs)


@_helper
def sigmoid(model: ModelHelper, blob_in: Any, blob_out: Any, **kwargs: Any) -> Any:
    return _op(model.net, "Sigmoid", blob_in, blob_out, **kwargs)


@_helper
def tanh(model: ModelHelper, blob_in: Any, blob_out: Any, **kwargs: Any) -> Any:
    return _op(model.net, "Tanh", blob_in, blob_out, **kwargs)


@_helper
def softmax(model: ModelHelper, blob_in: Any, blob_out: Any = None, **kwargs: Any) -> Any:
    return _op(model.net, "Softmax", blob_in, blob_out, **kwargs)


@_helper
def max_pool(model: ModelHelper, blob_in: Any, blob_out: Any, order: str = "NCHW", **kwargs: Any) -> Any:
    return _op(model.net, "MaxPool", blob_in, blob_out, order=order, **kwargs)


@_helper
def average_pool(model: ModelHelper, blob_in: Any, blob_out: Any, order: str = "NCHW", **kwargs: Any) -> Any:
    return _op(model.net, "AveragePool", blob_in, blob_out, order=order, **kwargs)


@_helper
def dropout(model: ModelHelper, blob_in: Any, blob_out: Any, **kwargs: Any) -> Any:
    """Dropout; Caffe2 requires ``is_test`` to be given explicitly."""
    if "is_test" not in kwargs:
        raise ValueError("brew.dropout: argument 'is_test' is required (0 for training, 1 for inference)")
    return _op(model.net, "Dropout", blob_in, [blob_out, "_" + str(blob_out) + "_mask"], **kwargs)[0]


@_helper
def lrn(model: ModelHelper, blob_in: Any, blob_out: Any, order: str = "NCHW", **kwargs: Any) -> Any:
    return _op(model.net, "LRN", blob_in, [blob_out, "_" + str(blob_out) + "_scale"], order=order, **kwargs)[0]


@_helper
def concat(model: ModelHelper, blobs_in: Sequence[Any], blob_out: Any, **kwargs: Any) -> Any:
    """Concatenate along the channel axis of ``order`` (or ``axis``). As Caffe2's helper, a truthy ``axis``
    wins over ``order`` (from the call or a scope): the Concat op itself rejects the two together."""
    if kwargs.get("order") and kwargs.get("axis"):
        kwargs.pop("order")
    return _op(model.net, "Concat", list(blobs_in), [blob_out, "_" + str(blob_out) + "_concat_dims"], **kwargs)[0]


@_helper
def sum(model: ModelHelper, blob_in: Sequence[Any], blob_out: Any, **kwargs: Any) -> Any:
    return _op(model.net, "Sum", list(blob_in), blob_out, **kwargs)


@_helper
def transpose(model: ModelHelper, blob_in: Any, blob_out: Any, axes: Sequence[int] | None = None, **kwargs: Any) -> Any:
    if axes is not None:
        kwargs["axes"] = list(axes)
    return _op(model.net, "Transpose", blob_in, blob_out, **kwargs)


@_helper
def accuracy(model: ModelHelper, blob_in: Sequence[Any], blob_out: Any, **kwargs: Any) -> Any:
    """Top-k accuracy of predictions ``blob_in[0]`` against labels ``blob_in[1]``."""
    return _op(model.net, "Accuracy", list(blob_in), blob_out, **kwargs)


@_helper
def iter(model: ModelHelper, blob_out: Any, **kwargs: Any) -> Any:
    """An int64 counter: created at 0 in the init net, incremented by ``Iter`` each run."""
    kwargs.pop("device_option", None)
    kwargs = {k: v for k, v in kwargs.items() if k not in _SCOPE_KEYS}
    model.param_init_net.ConstantFill([], blob_out, shape=[1], value=0, dtype=TensorProto.INT64)
    return model.net.Iter(blob_out, blob_out, **kwargs)


@_helper
def add_weight_decay(model: ModelHelper, weight_decay: float) -> None:
    """Add ``weight_decay * w`` to the gradient of every weight (not biases)."""
    from framework.caffe2.python import optimizer

    optimizer.add_weight_decay(model, weight_decay)


# Keep the builtins reachable for code in this module (``iter``/``sum`` are helpers here).
_builtin_iter, _builtin_sum = builtins.iter, builtins.sum

# The rest of Caffe2's helpers live in brew_helpers (registered here as brew.instance_norm ...).
from framework.caffe2.python import brew_helpers as _more  # noqa: E402

for _name in _more.HELPERS:
    globals()[_name] = getattr(_more, _name)
__all__ += list(_more.HELPERS)
