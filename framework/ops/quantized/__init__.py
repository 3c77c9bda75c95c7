"""Quantized ops: Caffe2's int8 (QNNPACK-era) ops over Int8TensorCPU blobs (int8_*), the DNNLOWP server ops over
the same blobs with fbgemm's arithmetic (dnnlowp_*: Quantize, Dequantize, Int8SpatialBN(Relu), Int8GroupNorm,
Int8BatchPermutation, Int8FCRelu, the weight packers and the quant-scheme/params blobs), row-wise quantized embedding
tables (8-bit and n-bit fused layouts, bit-exact with Caffe2) and the lookups over them, float16 conversions,
codebook and byte-coded weights (QuantDecode, ByteWeightDequant, GivenTensorByteStringToUInt8Fill), Quantile,
FC on float16-packed weights (FbGemmPack, FbFCPacked), and Caffe2's float ops with a fused Relu (ConvRelu,
SpatialBNRelu, SumRelu, registered by Caffe2 beside its quantized ones). Each import below registers its
module's ops; keep one line per module."""

from framework.ops.quantized import (  # noqa: F401
    byte_weights,
    dnnlowp_batch_norm,
    dnnlowp_fc,
    dnnlowp_group_norm,
    dnnlowp_pack,
    dnnlowp_quant_scheme,
    dnnlowp_quantize,
    embedding_lookup,
    embedding_quantization,
    fp16_packed_fc,
    fused_relu,
    half_float,
    int8_conv,
    int8_elementwise,
    int8_pool,
    int8_quantize,
    int8_roi_align,
    int8_shape,
    quant_decode,
    quantile,
    random_quantization,
)
