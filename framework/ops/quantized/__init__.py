"""Quantized ops: row-wise quantized embedding tables (8-bit and n-bit fused layouts, bit-exact with Caffe2)
and the lookups over them, and float16 conversions.

Each import below registers its module's ops; keep one line per module.
"""

from framework.ops.quantized import (  # noqa: F401
    embedding_lookup,
    embedding_quantization,
    half_float,
    random_quantization,
)
