"""Caffe2's ``dnnlowp_pybind11`` functions on the current workspace (``workspace.CurrentWorkspace()``):
``CreateInt8QuantSchemeBlob`` and ``ObserveInt8QuantParamsBlob`` over the quant-scheme blobs of
``framework.ops.quantized.dnnlowp_quant_scheme`` (which take the workspace as an argument)."""

from __future__ import annotations

from framework.caffe2.python import workspace
from framework.ops.quantized.dnnlowp_quant_scheme import create_int8_quant_scheme_blob, observe_int8_quant_params_blob

__all__ = ["CreateInt8QuantSchemeBlob", "ObserveInt8QuantParamsBlob"]


def CreateInt8QuantSchemeBlob(name: str, quantization_kind: str, preserve_sparsity: bool) -> None:
    """Put an Int8QuantSchemeBlob (``quantization_kind``, ``preserve_sparsity``) into blob ``name``."""
    create_int8_quant_scheme_blob(name, quantization_kind, preserve_sparsity, workspace.current())


def ObserveInt8QuantParamsBlob(name: str) -> tuple[float, int]:
    """(scale, zero_point) of the Int8QuantParamsBlob in blob ``name``."""
    return observe_int8_quant_params_blob(name, workspace.current())
