"""Every kernel strategy of this package, in one list: what ``framework warmup`` compiles and reports
and ``framework tune`` measures between; and (``OTHERS``) the compiled families no strategy calls, which
``framework warmup`` compiles and reports too.

A strategy (conv_strategies.py, pool_strategies.py) names the compiled kernel families it calls
(``kernel_support.NEEDS``' keys); a family's kernels compile together. ``SHARED`` are the families
no single strategy owns: the one-pass epilogue of the GEMM strategies and test-mode SpatialBN's
scale-and-shift.
"""

from __future__ import annotations

SHARED = ("epilogue", "scale_shift")
# The compiled families outside the conv and pool strategies: (family, what calls it, the module whose
# ``warm_up()`` compiles it and whose ``available()`` says whether it may run). Each has its numpy path.
OTHERS = (
    ("recurrent", "ONNX RNN/GRU/LSTM, InferenceLSTM, LSTMUnit and its gradient", "framework.kernels.recurrent"),
    ("activation", "Erf, Gelu, LayerNorm", "framework.kernels.activation_jit"),
    (
        "int8",
        "Int8Conv/Int8FC requantization, Int8 depthwise conv, Int8Add/Sum",
        "framework.ops.quantized.int8_kernels",
    ),
    (
        "int8_gemm",
        "the integer GEMM of Int8Conv/Int8FC and ONNX QLinearConv/ConvInteger/QLinearMatMul/MatMulInteger",
        "framework.kernels.int8_gemm_path",
    ),
    (
        "bn_train",
        "training-mode SpatialBN and SpatialBNGradient, ReluGradient, MaxPoolGradient, MomentumSGDUpdate",
        "framework.kernels.bn_train",
    ),
    ("conv_grad_filter", "ConvGradient's filter gradient (2-D NCHW, group 1)", "framework.kernels.conv_grad_filter"),
    (
        "range_search",
        "the GREEDY engine of the n-bit row-wise quantization ops",
        "framework.ops.quantized.range_search",
    ),
)


def strategies() -> list[tuple[str, object]]:
    """(op kind, strategy) for every strategy: the conv ones in their order of choice, then pooling's."""
    from framework.kernels import conv_strategies, pool_strategies

    return [("conv", s) for s in conv_strategies.STRATEGIES] + [("pool", s) for s in pool_strategies.STRATEGIES]


def families() -> list[str]:
    """The compiled families the strategies call (each once, in the strategies' order), then SHARED."""
    seen: dict[str, None] = {}
    for _, strategy in strategies():
        seen.update(dict.fromkeys(strategy.families))
    seen.update(dict.fromkeys(SHARED))
    return list(seen)


def status(strategy) -> str:
    """How ``strategy`` stands in this process: 'numpy' (no compiled kernel), 'ready' (its families are
    usable; compiled once called or warmed up), or why it is not: the features this CPU lacks, or the
    failed compile's message."""
    from framework.kernels import kernel_support, window_jit

    if not strategy.families:
        return "numpy"
    if not window_jit.available():
        return "unavailable: numba missing or FRAMEWORK_NO_JIT set"
    disabled = kernel_support.disabled()
    for family in strategy.families:
        lacks = kernel_support.missing(family)
        if lacks:
            return f"not for this CPU (lacks {', '.join(lacks)})"
        if family in disabled:
            return f"failed to compile ({disabled[family]})"
    return "ready"


def other_status(family: str, module) -> str:
    """How the ``OTHERS`` family ``family`` (its module imported) stands in this process: 'ready',
    'failed to compile (...)', or 'unavailable' with why."""
    from framework.kernels import kernel_support

    disabled = kernel_support.disabled()
    if family in disabled:
        return f"failed to compile ({disabled[family]})"
    if module.available():
        return "ready"
    lacks = kernel_support.missing(family)
    if lacks:
        return f"not for this CPU (lacks {', '.join(lacks)})"
    if family == "recurrent":
        return "unavailable: numba or scipy missing, or FRAMEWORK_NO_JIT set"
    return "unavailable: numba missing or FRAMEWORK_NO_JIT set"
