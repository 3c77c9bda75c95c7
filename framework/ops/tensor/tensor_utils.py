"""Small tensor utilities from Caffe2's operator catalogue: NumpyTile, PrependDim/MergeDim, IsEmpty,
ReplaceNaN, RowMul/ReduceTailSum, ScaleBlobs, AliasWithName, GetAllBlobNames, LengthsRangeFill,
CopyRowsToTensor, DataCouple and CopyOnDeviceLike."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.tensor import Tensor
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, Arg, TensorSpec, same_as_input

_BOOL = np.dtype(np.bool_)
_I32 = np.dtype(np.int32)


def _shape_of(ins, i=0):
    return ins[i].shape if ins and i < len(ins) else None


@register_op(
    "NumpyTile",
    inputs=2,
    input_docs=[("data", "tensor"), ("repeats", "1-D int64: repetitions per axis (one per dimension of data)")],
    output_docs=[("tiled_data", "np.tile(data, repeats)")],
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype if ins else None)],
    category="shape",
)
class NumpyTile(Operator):
    """Repeat the tensor along every axis, as ``numpy.tile`` with one repetition count per dimension."""

    def run(self) -> None:
        x, r = self.input(0), self.input(1)
        if r.dtype != np.int64 or r.ndim != 1 or r.size != x.ndim:
            raise ShapeError(
                f"{self.describe()}: repeats '{self.input_names[1]}' must be a 1-D int64 tensor with one value per "
                f"dimension of the data ({x.ndim}), got {r.dtype} {list(r.shape)}"
            )
        if (r < 0).any():
            raise ShapeError(f"{self.describe()}: repeats must be >= 0, got {r.tolist()}")
        shape = tuple(int(a) * int(b) for a, b in zip(x.shape, r))
        np.copyto(self.output(0, shape, x.dtype), np.tile(x, r.tolist()) if x.ndim else x)


def _prepend_infer(args, ins):
    s = _shape_of(ins)
    if s is None or not s or s[0] is None:
        return [TensorSpec(None, ins[0].dtype if ins else None)]
    return [TensorSpec((args.dim_size, s[0] // args.dim_size, *s[1:]), ins[0].dtype)]


@register_op(
    "PrependDim",
    args=[Arg("dim_size", INT, 0, "size of the new leading dimension (> 0, divides dim 0)")],
    input_docs=[("data", "tensor of at least one dimension")],
    output_docs=[("reshaped", "[dim_size, d0 / dim_size, d1, ...]")],
    allow_inplace={(0, 0)},
    infer=_prepend_infer,
    category="shape",
)
class PrependDim(Operator):
    """Reshape ``[d0, d1, ...]`` to ``[dim_size, d0 / dim_size, d1, ...]``."""

    def setup(self) -> None:
        if self.args.dim_size <= 0:
            raise self.arg_error(f"dim_size must be > 0, got {self.args.dim_size}")

    def run(self) -> None:
        x, k = self.input(0), self.args.dim_size
        if x.ndim == 0 or x.shape[0] % k:
            raise ShapeError(f"{self.describe()}: dim 0 of {list(x.shape)} must be divisible by dim_size {k}")
        _reshape_into(self, x, (k, x.shape[0] // k, *x.shape[1:]))


def _reshape_into(op: Operator, x: np.ndarray, shape: tuple) -> None:
    if op.inputs[0] is op.outputs[0]:
        op.input_tensor(0).reshape(shape)
        return
    np.copyto(op.output(0, shape, x.dtype), x.reshape(shape))


@register_op(
    "MergeDim",
    input_docs=[("data", "tensor of at least two dimensions")],
    output_docs=[("reshaped", "[d0 * d1, d2, ...]")],
    allow_inplace={(0, 0)},
    infer=lambda args, ins: [
        TensorSpec(
            None
            if not _shape_of(ins) or len(_shape_of(ins)) < 2 or None in _shape_of(ins)[:2]
            else (_shape_of(ins)[0] * _shape_of(ins)[1], *_shape_of(ins)[2:]),
            ins[0].dtype if ins else None,
        )
    ],
    category="shape",
)
class MergeDim(Operator):
    """Merge the first two dimensions into one of size ``d0 * d1``."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim < 2:
            raise ShapeError(f"{self.describe()}: needs at least 2 dimensions, got {list(x.shape)}")
        _reshape_into(self, x, (x.shape[0] * x.shape[1], *x.shape[2:]))


@gradient("PrependDim", copy_arguments=False)
def _prepend_dim_grad(g):
    return [g.op("MergeDim", [g.GO(0)], [g.GI(0)])]


@register_op(
    "IsEmpty",
    input_docs=[("tensor", "any tensor")],
    output_docs=[("is_empty", "bool scalar: numel == 0")],
    infer=lambda args, ins: [TensorSpec((), _BOOL)],
    category="shape",
)
class IsEmpty(Operator):
    """True if and only if the tensor has no elements."""

    def run(self) -> None:
        self.output(0, (), _BOOL)[...] = self.input(0).size == 0


@register_op(
    "ReplaceNaN",
    args=[Arg("value", FLOAT, 0.0, "replacement for NaN elements")],
    input_docs=[("input", "float tensor")],
    output_docs=[("output", "input with NaNs replaced")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    category="math",
)
class ReplaceNaN(Operator):
    """Replace every NaN element with ``value``."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            raise TypeMismatchError(f"{self.describe()}: input must be float or double, got {x.dtype}")
        out = self.output(0, x.shape, x.dtype)
        np.copyto(out, np.where(np.isnan(x), x.dtype.type(self.args.value), x))


def _check_rows(op: Operator, mat: np.ndarray, w: np.ndarray) -> None:
    if mat.ndim == 0 or w.size != mat.shape[0]:
        raise ShapeError(
            f"{op.describe()}: w '{op.input_names[1]}' must hold one value per row of '{op.input_names[0]}' "
            f"{list(mat.shape)}, got {list(w.shape)}"
        )


@register_op(
    "RowMul",
    inputs=2,
    input_docs=[("mat", "float [N, ...]"), ("w", "float [N]")],
    output_docs=[("output", "mat[i] * w[i]")],
    infer=same_as_input(0),
    category="math",
    input_types="numeric",
    same_type=[(0, 1)],
)
class RowMul(Operator):
    """Multiply row ``i`` of ``mat`` by ``w[i]``."""

    def run(self) -> None:
        mat, w = self.input(0), self.input(1)
        _check_rows(self, mat, w)
        shape = (mat.shape[0],) + (1,) * (mat.ndim - 1)
        np.multiply(mat, w.reshape(shape), out=self.output(0, mat.shape, mat.dtype))


@gradient("RowMul")
def _row_mul_grad(g):
    tmp = f"{g.GI(1)}before_aggregate"
    return [
        g.op("RowMul", [g.GO(0), g.I(1)], [g.GI(0)]),
        g.op("Mul", [g.GO(0), g.I(0)], [tmp]),
        g.op("ReduceTailSum", [tmp], [g.GI(1)]),
    ]


@register_op(
    "ReduceTailSum",
    input_docs=[("mat", "[N, ...]")],
    output_docs=[("output", "[N]: the sum over all but the first dimension")],
    infer=lambda args, ins: [TensorSpec(_shape_of(ins)[:1] if _shape_of(ins) else None, ins[0].dtype if ins else None)],
    category="math",
)
class ReduceTailSum(Operator):
    """Sum every row over its trailing dimensions: ``[N, ...] -> [N]``."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim == 0:
            raise ShapeError(f"{self.describe()}: needs at least one dimension")
        np.sum(
            x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))),
            axis=1,
            out=self.output(0, (x.shape[0],), x.dtype),
        )


@register_op(
    "ScaleBlobs",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    args=[Arg("scale", FLOAT, 1.0, "the factor")],
    allow_inplace=lambda i, o: True,
    input_docs=[("inputs", "tensors")],
    output_docs=[("outputs", "each input times scale")],
    infer=lambda args, ins: list(ins[: args.num_outputs]),
    category="math",
)
class ScaleBlobs(Operator):
    """Scale each input tensor by ``scale`` into the matching output."""

    def setup(self) -> None:
        if len(self.inputs) != len(self.outputs):
            raise self.arg_error(f"needs as many outputs as inputs, got {len(self.inputs)} and {len(self.outputs)}")

    def run(self) -> None:
        xs = [self.input(i) for i in range(len(self.inputs))]
        for i, x in enumerate(xs):
            if x.dtype.kind != "f":
                raise TypeMismatchError(f"{self.describe()}: input {i} ('{self.input_names[i]}') must be float")
        for i, x in enumerate(xs):
            np.multiply(x, x.dtype.type(self.args.scale), out=self.output(i, x.shape, x.dtype))


@register_op(
    "AliasWithName",
    args=[Arg("name", STRING, "", "name of the aliasing"), Arg("is_backward", BOOL, False, "alias of a gradient")],
    input_docs=[("input", "tensor")],
    output_docs=[("output", "the same tensor (shares storage)")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    category="shape",
)
class AliasWithName(Operator):
    """Alias with a name kept as an argument: the output shares the input's storage (usually in place)."""

    def run(self) -> None:
        if self.inputs[0] is self.outputs[0]:
            self.input_tensor(0)
            return
        src = self.input_tensor(0)
        self.input(0)
        self.output_tensor(0).share_data(src)


@gradient("AliasWithName", copy_arguments=False)
def _alias_with_name_grad(g):
    return [g.op("AliasWithName", [g.GO(0)], [g.GI(0)], name=g.arg("name") or "", is_backward=True)]


@register_op(
    "GetAllBlobNames",
    inputs=0,
    args=[Arg("include_shared", BOOL, True, "also list blobs visible from parent workspaces")],
    output_docs=[("blob_names", "1-D string tensor")],
    infer=lambda args, ins: [TensorSpec((None,), np.dtype(object))],
    category="shape",
)
class GetAllBlobNames(Operator):
    """The names of the workspace's blobs (sorted), with those of parent workspaces unless ``include_shared`` is 0."""

    def run(self) -> None:
        ws = self.workspace
        names = sorted(ws.blobs() if self.args.include_shared else ws.local_blobs())
        out = self.output(0, (len(names),), np.dtype(object))
        out[:] = [n.encode("utf-8") for n in names]


@register_op(
    "LengthsRangeFill",
    input_docs=[("lengths", "1-D int32")],
    output_docs=[("range_sequence", "int32: 0..lengths[i]-1 for each i, concatenated")],
    infer=lambda args, ins: [TensorSpec((None,), _I32)],
    category="fill",
)
class LengthsRangeFill(Operator):
    """Concatenate ``range(lengths[i])`` for every length."""

    def run(self) -> None:
        lengths = self.input(0)
        if lengths.dtype != _I32 or lengths.ndim != 1:
            raise TypeMismatchError(f"{self.describe()}: lengths must be a 1-D int32 tensor, got {lengths.dtype}")
        if (lengths < 0).any():
            raise ShapeError(f"{self.describe()}: lengths must be >= 0, got {lengths.tolist()}")
        total = int(lengths.sum(dtype=np.int64))
        out = self.output(0, (total,), _I32)
        starts = np.repeat(np.cumsum(lengths, dtype=np.int64) - lengths, lengths)
        np.subtract(np.arange(total, dtype=np.int64), starts, out=out, casting="unsafe")


@register_op(
    "CopyRowsToTensor",
    inputs=3,
    enforce_inplace={(0, 0)},
    input_docs=[("input_tensor", "[N, D]"), ("indices", "int32/int64 rows"), ("row", "[D]")],
    output_docs=[("output_tensor", "input_tensor with the indexed rows replaced by row")],
    infer=same_as_input(0),
    category="shape",
)
class CopyRowsToTensor(Operator):
    """Replace the rows ``indices`` of the 2-D tensor by ``row``, in place."""

    def run(self) -> None:
        x, idx, row = self.input(0), self.input(1), self.input(2)
        if x.ndim != 2 or row.ndim != 1:
            raise ShapeError(
                f"{self.describe()}: needs a 2-D tensor and a 1-D row, got {list(x.shape)} and {list(row.shape)}"
            )
        if row.shape[0] != x.shape[1]:  # Caffe2's enforce message
            raise ShapeError(
                f"{self.describe()}: width of input tensor should match lengths of row: {x.shape[1]} vs {row.shape[0]}"
            )
        if idx.dtype.kind not in "iu" or (idx.size and (idx.min() < 0 or idx.max() >= x.shape[0])):
            raise ShapeError(f"{self.describe()}: indices must be integers in [0, {x.shape[0]}), got {idx.tolist()}")
        x[idx.reshape(-1)] = row
        self.output_tensor(0).version += 1


@register_op(
    "CopyRowsToTensorGradient",
    allow_inplace={(0, 0)},
    input_docs=[("output_grad", "gradient of output_tensor")],
    output_docs=[("input_grad", "the same values: gradient of input_tensor")],
    infer=same_as_input(0),
    private=True,
    category="shape",
)
class CopyRowsToTensorGradient(Operator):
    """Caffe2's gradient of CopyRowsToTensor: the output gradient passed through unchanged."""

    def run(self) -> None:
        g = self.input(0)
        out = self.output(0, g.shape, g.dtype)
        if out is not g:
            np.copyto(out, g)


@gradient("CopyRowsToTensor")
def _copy_rows_grad(g):
    return [g.op("CopyRowsToTensorGradient", [g.GO(0)], [g.GI(0)])]


@register_op(
    "DataCouple",
    inputs=(0, float("inf")),
    outputs=(0, float("inf")),
    enforce_inplace=lambda i, o: i == o,
    input_docs=[("blobs", "any blobs")],
    output_docs=[("blobs", "the same blobs, untouched")],
    infer=lambda args, ins: list(ins[: args.num_outputs]),
    category="shape",
)
class DataCouple(Operator):
    """Do nothing with blobs that are each their own output: makes them look written and ties them together.
    Input i is output i for the first min(inputs, outputs) of them (Caffe2's one-to-one in-place rule); extra
    inputs are only dependencies, extra outputs are refused (nothing would write them)."""

    def setup(self) -> None:
        if len(self.outputs) > len(self.inputs):
            raise self.arg_error(f"has {len(self.outputs)} outputs but only {len(self.inputs)} inputs to pass through")

    def run(self) -> None:
        for t in self.outputs:
            if isinstance(t.held, Tensor):
                t.held.version += 1


@register_op(
    "CopyOnDeviceLike",
    inputs=2,
    input_docs=[("input", "tensor to copy"), ("dst", "a tensor on the target device (ignored: CPU only)")],
    output_docs=[("output", "a copy of input")],
    infer=same_as_input(0),
    category="shape",
)
class CopyOnDeviceLike(Operator):
    """Copy input 0 to the device of input 1; every tensor is on the CPU here, so a plain copy."""

    def run(self) -> None:
        x = self.input(0)
        self.input(1)
        np.copyto(self.output(0, x.shape, x.dtype), x)


@gradient("CopyOnDeviceLike")
def _copy_on_device_like_grad(g):
    return [g.op("CopyOnDeviceLike", [g.GO(0), g.I(0)], [g.GI(0)])]


should_not_do_gradient("NumpyTile", "MergeDim", "IsEmpty", "ReplaceNaN", "ScaleBlobs", "GetAllBlobNames")
should_not_do_gradient("LengthsRangeFill", "ReduceTailSum", "DataCouple")
