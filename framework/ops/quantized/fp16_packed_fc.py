"""FC on float16-packed weights (Caffe2's ``quantization/server/fbgemm_fp16_pack_op`` and
``fb_fc_packed_op``): FbGemmPack / FbGemmPackTranspose round an FC weight matrix to float16 once
(in an init net), FbFCPacked multiplies by it with float32 accumulation.

Caffe2 packs into an ``fbgemm::PackedGemmMatrixFP16``: the matrix B of the product Y = X B, K rows
by N columns, in fbgemm's blocked layout. There is no fbgemm here: the blob holds a
``PackedFP16Weights``, the same B (K, N) as a plain row-major float16 array (the layout numpy's
GEMM wants), plus, made once on first use, its exact float32 widening, the operand fbgemm's kernel
also works on (it widens each float16 to float32 and accumulates in float32). Results therefore
equal Caffe2's up to the summation order. Memory: the kept float32 widening costs 4 bytes per weight
on top of the float16 2 (Caffe2: 2), traded for numpy's float32 GEMM speed.

Rounding is fbgemm's ``TypeConverter<float16>``: clamp to [-65504, 65504] (``max(-MAX, min(x, MAX))``,
which turns NaN into -65504 as it does), then round to nearest even.

The packed blob is not a tensor: Caffe2 registers no serializer for it (only a tensor-info function
reporting it as a float16 (N, K) tensor), so it cannot be saved or loaded there either; here
serializing it is a SerializationError. Shape inference, which Caffe2 gives as that float16 (N, K)
tensor, leaves it unknown (an object, as every object blob); FbFCPacked infers its output from X
and the bias. None of the three ops has a gradient (Caffe2 registers none).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import allocate_array
from framework.ops.gradient import should_not_do_gradient
from framework.ops.nn.axes import canonical_axis, coerce_2d
from framework.ops.object_blobs import held
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, Cost, TensorSpec

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
FP16_MAX = np.float32(65504.0)


def to_fp16_like_fbgemm(x: np.ndarray) -> np.ndarray:
    """fbgemm's TypeConverter<float16>: std::max(-MAX, std::min(x, MAX)) then round to nearest even."""
    hi = np.where(FP16_MAX < x, FP16_MAX, x)  # std::min(x, MAX) keeps x unless MAX < x (NaN stays)
    lo = np.where(-FP16_MAX < hi, hi, -FP16_MAX)  # std::max(-MAX, v) is v only if -MAX < v (NaN -> -MAX)
    return lo.astype(F16)


class PackedFP16Weights:
    """The blob object of FbGemmPack: B = W^T as a (K, N) float16 array (``half``), K = ``num_rows``
    (the FC's input width), N = ``num_cols`` (its output width). ``weights()`` gives W in FC's
    (N, K) layout; ``dims`` is what Caffe2's tensor-info function reports, (N, K)."""

    __slots__ = ("half", "_wide")

    def __init__(self, half: np.ndarray) -> None:
        self.half = half
        self._wide: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return int(self.half.shape[0])

    @property
    def num_cols(self) -> int:
        return int(self.half.shape[1])

    @property
    def dims(self) -> tuple[int, int]:
        return (self.num_cols, self.num_rows)

    @property
    def nbytes(self) -> int:
        return int(self.half.nbytes)

    def weights(self) -> np.ndarray:
        """W (N, K) float16, the layout FC takes (a transposed view)."""
        return self.half.T

    def widened(self) -> np.ndarray:
        """B as float32 (exact), C-contiguous; made on first use and kept (from the allocator)."""
        if self._wide is None:
            wide = allocate_array(self.half.shape, F32)
            wide[...] = self.half
            self._wide = wide
        return self._wide

    def __repr__(self) -> str:
        return f"PackedFP16Weights(K={self.num_rows}, N={self.num_cols})"


def _pack_doc(transposed: bool) -> str:
    if transposed:
        return """Pack FC weights given transposed, as B (K, N): X flattened to 2D at ``axis_w`` is
    B itself, rounded to float16 (fbgemm's NoTranspose packing). ``no_packing`` is accepted (Caffe2:
    keep the unblocked layout, for tests; it changes no result and there is no blocked layout here)."""
    return """Pack FC weights W for FbFCPacked: X flattened to 2D at ``axis_w`` is W (N, K), FC's
    layout; the blob gets B = W^T (K, N) rounded to float16 (fbgemm's Transpose packing), a
    PackedFP16Weights object. ``no_packing`` is accepted (Caffe2: keep the unblocked layout, for
    tests; it changes no result and there is no blocked layout here)."""


def _register_pack(op_type: str, transposed: bool) -> None:
    class _Pack(Operator):
        def run(self) -> None:
            x = self.input(0)
            rows, cols = coerce_2d(x.shape, self.args.axis_w, f"{self.describe()}: X '{self.input_names[0]}'")
            flat = x.reshape(rows, cols)
            b = flat if transposed else flat.T  # B is (K, N)
            half = allocate_array(b.shape, F16)
            half[...] = to_fp16_like_fbgemm(b)
            self.outputs[0].reset(PackedFP16Weights(half))  # the last step: nothing can fail after it

    _Pack.__doc__ = _pack_doc(transposed)
    _Pack.__name__ = _Pack.__qualname__ = op_type
    register_op(
        op_type,
        args=[
            Arg("axis_w", INT, 1, "X is flattened to 2D at this axis"),
            Arg("no_packing", INT, 0, "accepted, no effect (Caffe2: unblocked layout for tests)"),
        ],
        input_docs=[
            ("X", "float32 weights: " + ("(K, N), the transpose of FC's W" if transposed else "W (N, K), FC's layout"))
        ],
        output_docs=[("Y", "a PackedFP16Weights object (B = W^T (K, N) in float16)")],
        allow_inplace={(0, 0)},
        input_types=(F32,),
        axes={"axis_w": 0},
        infer=lambda args, ins: [UNKNOWN],
        category="quantized",
    )(_Pack)
    globals()[op_type] = _Pack


_register_pack("FbGemmPack", transposed=False)
_register_pack("FbGemmPackTranspose", transposed=True)


def _fc_shape(args, x: TensorSpec, b: TensorSpec) -> tuple | None:
    if not (x.known and b.known):
        return None
    ax = canonical_axis(args.axis, len(x.shape), "FbFCPacked: X")
    return tuple(x.shape[:ax]) + (math.prod(b.shape),)


def _infer(args, ins):
    x, b = ins[0], ins[2] if len(ins) > 2 else UNKNOWN
    return [TensorSpec(_fc_shape(args, x, b), F32)]


def _cost(args, ins, outs):
    x, b = ins[0], ins[2]
    shape = _fc_shape(args, x, b)
    if shape is None:
        return Cost()
    ax = canonical_axis(args.axis, len(x.shape), "FbFCPacked: X")
    m, k, n = math.prod(x.shape[:ax]), math.prod(x.shape[ax:]), shape[-1]
    return Cost(
        flops=2.0 * m * k * n + m * n,
        bytes_moved=4.0 * (m * k + m * n + n) + 2.0 * k * n,
        params_bytes=2.0 * k * n + 4.0 * n,
    )


@register_op(
    "FbFCPacked",
    inputs=3,
    args=[
        Arg("axis", INT, 1, "X is flattened to 2D (M, K) at this axis"),
        Arg("axis_w", INT, 1, "read but unused, as in Caffe2 (the packed weights are 2D)"),
    ],
    input_docs=[
        ("X", "float32 input, flattened to (M, K) at `axis`"),
        ("W", "PackedFP16Weights made by FbGemmPack / FbGemmPackTranspose: B (K, N)"),
        ("b", "float32 1-D bias of N values"),
    ],
    output_docs=[("Y", "float32, X's dims before `axis` then N: X B + b")],
    input_types={0: (F32,), 2: (F32,)},
    ranks={2: 1},
    axes={"axis": 0},
    infer=_infer,
    cost=_cost,
    category="quantized",
)
class FbFCPacked(Operator):
    """FC with float16-packed weights: ``Y = X W^T + b`` where W was rounded to float16 by FbGemmPack,
    X and the accumulation stay float32 (fbgemm's fp16 GEMM), and the bias is added in float32.

    Departure: with K = 0 (X has no columns) Caffe2 divides by zero in its size check; here Y = b
    on every row. An empty batch gives an empty Y as in Caffe2."""

    def run(self) -> None:
        x, b = self.input(0), self.input(2)
        packed = held(self, 1, PackedFP16Weights, "FbGemmPack or FbGemmPackTranspose")
        k, n = packed.num_rows, packed.num_cols
        m, xk = coerce_2d(x.shape, self.args.axis, f"{self.describe()}: X '{self.input_names[0]}'")
        if xk != k or b.size != n:
            raise ShapeError(
                f"{self.describe()}: dimension mismatch: X '{self.input_names[0]}' {list(x.shape)} flattened at "
                f"axis {self.args.axis} is ({m}, {xk}), the packed weights '{self.input_names[1]}' are "
                f"B (K={k}, N={n}), "
                f"the bias '{self.input_names[2]}' has {b.size} values: expected K = {k} and N = {n}"
            )
        ax = canonical_axis(self.args.axis, x.ndim, "X")
        y = self.output(0, tuple(x.shape[:ax]) + (n,), F32).reshape(m, n)
        if m and n:  # K = 0 gives zeros, then the bias
            np.matmul(x.reshape(m, k), packed.widened(), out=y)
            y += b


should_not_do_gradient("FbGemmPack", "FbGemmPackTranspose", "FbFCPacked")
