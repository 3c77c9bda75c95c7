"""Caffe2's quant-scheme and quant-params blobs (``quantization/server/int8_gen_quant_params.h``,
``int8_quant_scheme_blob_fill.h``): Int8QuantSchemeBlobFill makes an ``Int8QuantSchemeBlob`` (a
quantization kind and a symmetry flag), Int8GenQuantParams chooses the parameters of a float tensor
under that scheme into an ``Int8QuantParamsBlob`` (scale, zero point).

Both blob types are small Python objects here, as in Caffe2 (``unique_ptr`` blobs with no serializer:
saving one is a SerializationError, shape inference leaves them unknown where Caffe2's reports a
float (1,) tensor). ``create_int8_quant_scheme_blob`` / ``observe_int8_quant_params_blob`` mirror
``dnnlowp_pybind11.CreateInt8QuantSchemeBlob`` / ``ObserveInt8QuantParamsBlob`` on a given workspace;
``framework.caffe2.python.dnnlowp_pybind11`` has Caffe2's names, on the current workspace.

Kinds (dnnlowp::StringToKind: ``min_max``, ``p99``, ... in any case, or the enum names
``MIN_MAX_QUANTIZATION``, ``P99_QUANTIZATION``...): min_max, p99 and l2_approx (not symmetric) are
ported (``dnnlowp_histogram``); the brute-force searches (l1, l2, kl, and l2_approx with
``preserve_sparsity``, which Caffe2 turns into l2) are not, and Int8GenQuantParams refuses them (an
OperatorError naming the kind). An unknown kind is an error here (Caffe2's release build quietly
uses min_max).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from framework.errors import OperatorError, ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.object_blobs import held
from framework.ops.operator import Operator
from framework.ops.quantized.dnnlowp_histogram import l2_approx_qparams, p99_qparams
from framework.ops.quantized.dnnlowp_qparams import choose_qparams, kind_of
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, STRING, UNKNOWN, Arg

__all__ = [
    "Int8QuantParamsBlob",
    "Int8QuantSchemeBlob",
    "create_int8_quant_scheme_blob",
    "observe_int8_quant_params_blob",
    "p99_qparams",
]

F32 = np.dtype(np.float32)
f32 = np.float32


class Int8QuantSchemeBlob(NamedTuple):
    """Caffe2's Int8QuantSchemeBlob: ``quantization_kind`` (the string as given) and ``preserve_sparsity``."""

    quantization_kind: str
    preserve_sparsity: bool


class Int8QuantParamsBlob(NamedTuple):
    """Caffe2's Int8QuantParamsBlob: the chosen ``scale`` (a float32 value) and ``zero_point``."""

    scale: float
    zero_point: int


@register_op(
    "Int8QuantSchemeBlobFill",
    inputs=0,
    args=[
        Arg("quantization_kind", STRING, "MIN_MAX_QUANTIZATION", "the kind of quant scheme used to generate qparams"),
        Arg("preserve_sparsity", BOOL, False, "symmetric quantization (0 maps to the middle code)"),
    ],
    output_docs=[("quant_scheme", "an Int8QuantSchemeBlob (quantization kind, preserve_sparsity)")],
    infer=lambda args, ins: [UNKNOWN],
    category="quantized",
)
class Int8QuantSchemeBlobFill(Operator):
    """Make an Int8QuantSchemeBlob holding ``quantization_kind`` (kept as given, as Caffe2 does: it is
    parsed when Int8GenQuantParams uses it) and ``preserve_sparsity``. No gradient."""

    def run(self) -> None:
        self.outputs[0].reset(Int8QuantSchemeBlob(self.args.quantization_kind, bool(self.args.preserve_sparsity)))


@register_op(
    "Int8GenQuantParams",
    inputs=2,
    input_docs=[
        ("X", "float32 tensor of at least one dimension: the data (e.g. the last N samples of an activation)"),
        ("quant_scheme", "Int8QuantSchemeBlob from Int8QuantSchemeBlobFill"),
    ],
    output_docs=[("quant_param", "an Int8QuantParamsBlob (scale, zero_point)")],
    input_types={0: (F32,)},
    ranks={0: (1, None)},
    infer=lambda args, ins: [UNKNOWN],
    category="quantized",
)
class Int8GenQuantParams(Operator):
    """Choose 8-bit quantization parameters of X under the scheme: min_max gives fbgemm's
    ChooseQuantizationParams of X's min and max (symmetric with ``preserve_sparsity``); p99 builds
    Caffe2's 2048-bin histogram and quantizes the narrowest band around 0 holding 99% of the values
    (see ``p99_qparams``; Caffe2 ignores ``preserve_sparsity`` there, asserting it in debug builds);
    l2_approx trims the histogram's ends while the L2 quantization error decreases (``l2_approx_qparams``).
    An empty X gives the parameters of [0, 0] (scale 0.1, zero point 0) for every kind.

    Departures: the brute-force kinds l1, l2, kl (and l2_approx with ``preserve_sparsity``, which Caffe2
    runs as l2) are not ported (an OperatorError); an unknown kind and NaN/infinite X are errors. No
    gradient."""

    def run(self) -> None:
        x = self.input(0)
        scheme = held(self, 1, Int8QuantSchemeBlob, "Int8QuantSchemeBlobFill")
        kind = kind_of(scheme.quantization_kind)
        if kind is None:
            raise OperatorError(
                f"{self.describe()}: unknown quantization_kind {scheme.quantization_kind!r} in "
                f"'{self.input_names[1]}' (min_max, l1, l2, l2_approx, kl, p99 or their enum names)"
            )
        if kind not in ("min_max", "p99", "l2_approx") or (kind == "l2_approx" and scheme.preserve_sparsity):
            raise OperatorError(
                f"{self.describe()}: quantization_kind {scheme.quantization_kind!r} (brute-force histogram {kind} "
                f"error minimization{', symmetric' if scheme.preserve_sparsity else ''}) is not ported; min_max, "
                f"p99 and l2_approx (not symmetric) are"
            )
        if x.size and not np.all(np.isfinite(x)):
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') holds NaN or infinite values")
        if x.size == 0:
            qp = choose_qparams(0.0, 0.0, 8, scheme.preserve_sparsity)
        elif kind == "min_max":
            qp = choose_qparams(float(x.min()), float(x.max()), 8, scheme.preserve_sparsity)
        elif kind == "p99":
            qp = p99_qparams(x.reshape(-1))
        else:
            qp = l2_approx_qparams(x.reshape(-1))
        self.outputs[0].reset(Int8QuantParamsBlob(qp.scale, qp.zero_point))


def create_int8_quant_scheme_blob(name: str, quantization_kind: str, preserve_sparsity: bool, ws: Any) -> None:
    """dnnlowp_pybind11.CreateInt8QuantSchemeBlob: put a scheme into blob ``name`` of ``ws`` (the Caffe2
    API's ``dnnlowp_pybind11`` module passes the current workspace)."""
    ws.create_blob(name).reset(Int8QuantSchemeBlob(str(quantization_kind), bool(preserve_sparsity)))


def observe_int8_quant_params_blob(name: str, ws: Any) -> tuple[float, int]:
    """dnnlowp_pybind11.ObserveInt8QuantParamsBlob: (scale, zero_point) of blob ``name`` of ``ws``."""
    obj = ws.get_blob(name).held
    if not isinstance(obj, Int8QuantParamsBlob):
        raise ShapeError(f"blob '{name}' holds {type(obj).__name__}, not an Int8QuantParamsBlob")
    return obj.scale, obj.zero_point


should_not_do_gradient("Int8QuantSchemeBlobFill", "Int8GenQuantParams")
