"""Shared checks that make operator tests short.

Every op proves itself three ways:

- ``assert_reference_checks``: run the op through the registry and compare
  with an independent numpy reference; also check that the schema's shape
  inference equals the real output shapes and dtypes, and that a second run
  with unchanged shapes allocates nothing.
- ``assert_gradient_checks``: float64 central differences of the loss
  0.5 * sum(Y**2) against the op's gradient ops (dY = Y), as Caffe2's
  GradientChecker.
- hypothesis strategies for shapes and tensors (``dims``, ``arrays``).

>>> import numpy as np
>>> from framework.core import CreateOperator
>>> op = CreateOperator("Relu", ["X"], ["Y"])
>>> _ = assert_reference_checks(op, [np.array([-1.0, 2.0])], lambda x: [np.maximum(x, 0)])
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from framework.memory.allocator import memory_reporter
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.gradient import GradientSlice
from framework.ops.inference import infer_op
from framework.ops.schema import TensorSpec
from framework.proto.framework_pb2 import OperatorDef

__all__ = [
    "arrays",
    "assert_gradient_checks",
    "assert_inferred_shapes",
    "assert_reference_checks",
    "dims",
    "feed_inputs",
    "run_op_on",
    "spec_of",
]


def spec_of(value: Any) -> TensorSpec:
    arr = np.asarray(value)
    return TensorSpec(tuple(arr.shape), arr.dtype)


def feed_inputs(ws: Workspace, op_def: OperatorDef, inputs: Sequence[Any]) -> None:
    if len(inputs) != len(op_def.input):
        raise ValueError(f"{op_def.type}: {len(op_def.input)} input names but {len(inputs)} input values")
    for name, value in zip(op_def.input, inputs):
        if isinstance(value, Tensor) or value is None:
            continue
        ws.feed_blob(name, value)


def _fetch(ws: Workspace, name: str) -> Any:
    obj = ws.get_blob(name).held
    return obj.numpy() if isinstance(obj, Tensor) else obj


def run_op_on(op_def: OperatorDef, inputs: Sequence[Any], ws: Workspace | None = None) -> list[Any]:
    """Feed ``inputs``, run ``op_def`` once, return copies of its outputs."""
    ws = ws if ws is not None else Workspace()
    feed_inputs(ws, op_def, inputs)
    op = create_operator(op_def, ws)
    op.run()
    return [_fetch(ws, n) for n in op_def.output]


def assert_inferred_shapes(
    op_def: OperatorDef,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    require_known: bool = True,
    params: dict[str, Any] | None = None,
) -> None:
    """The schema's inference, from the inputs' specs, must equal the real outputs' shapes and dtypes.

    With ``require_known=False`` an output or a dim inferred as unknown passes (Caffe2's
    default in its test utilities: sizes that depend on the data cannot be inferred); a known
    but wrong rank, dim or dtype still fails.
    """
    in_specs = [spec_of(x) for x in inputs]
    inferred = infer_op(op_def, in_specs, strict=True)
    for k, (spec, real) in enumerate(zip(inferred, outputs)):
        if real is None or not isinstance(real, np.ndarray):
            continue
        name = op_def.output[k]
        spec = _gradient_of_param(op_def, name, spec, params or {})
        if not require_known and spec.shape is None:
            continue
        assert spec.shape is not None, f"{op_def.type}: shape inference left output {k} ('{name}') unknown"
        if require_known:
            assert all(d is not None for d in spec.shape), (
                f"{op_def.type}: shape inference left a dim of output {k} ('{name}') unknown: {tuple(spec.shape)}"
            )
        # a dim inferred as unknown (it depends on the data) matches any size; a known one must be right
        fits = len(spec.shape) == real.ndim and all(d is None or d == r for d, r in zip(spec.shape, real.shape))
        assert fits, (
            f"{op_def.type}: inferred shape {tuple(spec.shape)} != real shape {real.shape} for output {k} ('{name}')"
        )
        if spec.dtype is not None:
            assert np.dtype(spec.dtype) == real.dtype, (
                f"{op_def.type}: inferred dtype {spec.dtype} != real dtype {real.dtype} for output {k} ('{name}')"
            )
        elif require_known:
            raise AssertionError(f"{op_def.type}: shape inference left the dtype of output {k} ('{name}') unknown")


def _gradient_of_param(op_def: OperatorDef, name: str, spec: TensorSpec, params: dict[str, Any]) -> TensorSpec:
    """Caffe2's rule for gradient ops: an output ``<X>_grad`` left unknown is shaped as X (when X is
    known, here from ``params``: name -> value)."""
    if not op_def.is_gradient_op or not name.endswith("_grad") or name[: -len("_grad")] not in params:
        return spec
    if spec.shape is not None and all(d is not None for d in spec.shape):
        return spec
    param = spec_of(params[name[: -len("_grad")]])
    return TensorSpec(param.shape, spec.dtype if spec.dtype is not None else param.dtype)


def assert_reference_checks(
    op_def: OperatorDef,
    inputs: Sequence[Any],
    reference: Callable[..., Any],
    threshold: float = 1e-4,
    atol: float | None = None,
    outputs_to_check: Sequence[int] | None = None,
    check_inference: bool = True,
    check_no_realloc: bool = True,
    ws: Workspace | None = None,
    scalar_matches_any_shape: bool = False,
) -> list[Any]:
    """Run ``op_def`` on ``inputs`` and compare with ``reference(*inputs)``.

    ``reference`` returns one array or a sequence (one per output, or per
    ``outputs_to_check``). Returns the op's outputs. Shapes must be equal, except that with
    ``scalar_matches_any_shape`` a 0-d reference is compared with every element (what Caffe2's
    ``assertReferenceChecks`` does through numpy's ``assert_allclose``).
    """
    ws = ws if ws is not None else Workspace()
    inputs = [np.asarray(x) if not isinstance(x, (bytes, str)) else x for x in inputs]
    originals = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
    feed_inputs(ws, op_def, inputs)
    op = create_operator(op_def, ws)
    op.run()
    outputs = [_fetch(ws, n) for n in op_def.output]

    expected = reference(*[x.copy() if isinstance(x, np.ndarray) else x for x in originals])
    if isinstance(expected, np.ndarray) or not isinstance(expected, (list, tuple)):
        expected = [expected]
    idx = list(outputs_to_check) if outputs_to_check is not None else list(range(len(expected)))
    for k, exp in zip(idx, expected):
        got = outputs[k]
        name = op_def.output[k]
        if isinstance(exp, (bytes, str)) or (isinstance(exp, np.ndarray) and exp.dtype == object):
            np.testing.assert_array_equal(got, exp, err_msg=f"{op_def.type} output {k} ('{name}')")
            continue
        exp = np.asarray(exp)
        assert got.shape == exp.shape or (scalar_matches_any_shape and exp.ndim == 0), (
            f"{op_def.type} output {k} ('{name}'): shape {got.shape} != reference {exp.shape}"
        )
        if exp.dtype.kind in "biu" or got.dtype.kind in "biu":
            np.testing.assert_array_equal(got, exp, err_msg=f"{op_def.type} output {k} ('{name}')")
        else:
            np.testing.assert_allclose(
                got,
                exp,
                rtol=threshold,
                atol=threshold if atol is None else atol,
                err_msg=f"{op_def.type} output {k} ('{name}')",
            )

    if check_inference:
        assert_inferred_shapes(op_def, originals, outputs)
    if check_no_realloc:
        feed_inputs(ws, op_def, originals)  # in-place ops consumed their inputs
        before = memory_reporter().allocations
        op.run()
        after = memory_reporter().allocations
        assert after == before, f"{op_def.type}: a second run with unchanged shapes allocated {after - before} buffers"
    return outputs


def _loss_and_grads(
    ws: Workspace, op_def: OperatorDef, outputs_with_grads: Sequence[int]
) -> tuple[float, dict[str, np.ndarray]]:
    loss = 0.0
    grads = {}
    for k in outputs_with_grads:
        y = np.asarray(_fetch(ws, op_def.output[k]), dtype=np.float64)
        loss += 0.5 * float(np.sum(y * y))
        grads[op_def.output[k]] = y
    return loss, grads


def assert_gradient_checks(
    op_def: OperatorDef,
    inputs: Sequence[Any],
    input_to_check: int,
    outputs_with_grads: Sequence[int] = (0,),
    stepsize: float = 1e-4,
    threshold: float = 1e-4,
    grad_ops: Sequence[OperatorDef] | None = None,
    float64: bool = True,
    check_inference: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Compare the op's analytic gradient of input ``input_to_check`` with central differences.

    Float inputs are promoted to float64 (``float64=True``) so differences are
    accurate. Returns (analytic, numeric).
    """
    analytic, numeric = gradient_pair(
        op_def, inputs, input_to_check, outputs_with_grads, stepsize, grad_ops, float64, check_inference
    )
    np.testing.assert_allclose(
        analytic,
        numeric,
        rtol=threshold,
        atol=threshold,
        err_msg=f"{op_def.type}: analytic vs numeric gradient of input {input_to_check} "
        f"('{op_def.input[input_to_check]}')",
    )
    return analytic, numeric


def gradient_pair(
    op_def: OperatorDef,
    inputs: Sequence[Any],
    input_to_check: int,
    outputs_with_grads: Sequence[int] = (0,),
    stepsize: float = 1e-4,
    grad_ops: Sequence[OperatorDef] | None = None,
    float64: bool = True,
    check_inference: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(analytic, numeric) gradient of input ``input_to_check`` for the loss 0.5 * sum of squares
    of the outputs ``outputs_with_grads``, without comparing them."""
    inputs = [np.asarray(x) for x in inputs]
    if float64:
        inputs = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs]
    ws = Workspace()
    feed_inputs(ws, op_def, inputs)
    fwd = create_operator(op_def, ws)
    fwd.run()
    _, dys = _loss_and_grads(ws, op_def, outputs_with_grads)

    g_output = [f"{n}_grad" if k in outputs_with_grads else None for k, n in enumerate(op_def.output)]
    if grad_ops is None:
        grad_ops, g_input = get_gradient_for_op(op_def, g_output)
    else:
        g_input = [f"{n}_grad" for n in op_def.input]
    target = g_input[input_to_check]
    assert target is not None, (
        f"{op_def.type}: no gradient produced for input {input_to_check} ('{op_def.input[input_to_check]}')"
    )
    for k, name in enumerate(g_output):
        if name is not None:
            ws.feed_blob(name, dys[op_def.output[k]])
    for gop in grad_ops:
        g = create_operator(gop, ws)
        in_vals = [_fetch(ws, n) for n in gop.input]
        g.run()
        if check_inference:
            params = dict(zip(op_def.input, inputs))
            assert_inferred_shapes(gop, in_vals, [_fetch(ws, n) for n in gop.output], params=params)
    x = inputs[input_to_check]
    if isinstance(target, GradientSlice):
        analytic = np.zeros_like(x, dtype=np.float64)
        idx = np.asarray(_fetch(ws, target.indices)).astype(np.int64)
        np.add.at(analytic, idx, np.asarray(_fetch(ws, target.values), dtype=np.float64))
    else:
        analytic = np.asarray(_fetch(ws, target), dtype=np.float64)
    assert analytic.shape == x.shape, (
        f"{op_def.type}: gradient of input {input_to_check} has shape {analytic.shape}, input has {x.shape}"
    )

    numeric = np.zeros(x.shape, dtype=np.float64)
    flat = numeric.reshape(-1)
    for j in range(x.size):
        losses = []
        for sign in (1.0, -1.0):
            probe = [v.copy() for v in inputs]
            probe[input_to_check].reshape(-1)[j] += sign * stepsize
            feed_inputs(ws, op_def, probe)
            fwd.run()
            losses.append(_loss_and_grads(ws, op_def, outputs_with_grads)[0])
        flat[j] = (losses[0] - losses[1]) / (2 * stepsize)
    return analytic, numeric


# -- hypothesis strategies ---------------------------------------------------------
def dims(min_value: int = 1, max_value: int = 5) -> Any:
    from hypothesis import strategies as st

    return st.integers(min_value=min_value, max_value=max_value)


def arrays(shape: Sequence[int], dtype: Any = np.float32, elements: Any = None) -> Any:
    """Arrays of ``shape``: finite floats in [-1, 1] by default, small integers for int dtypes."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    dt = np.dtype(dtype)
    if elements is None:
        if dt.kind == "f":
            elements = st.floats(-1.0, 1.0, width=min(dt.itemsize * 8, 64), allow_nan=False, allow_infinity=False)
        elif dt.kind == "b":
            elements = st.booleans()
        elif dt.kind in "iu":
            lo = 0 if dt.kind == "u" else -10
            elements = st.integers(lo, 10)
    return hnp.arrays(dt, tuple(shape), elements=elements)


def shapes(min_dims: int = 1, max_dims: int = 4, min_side: int = 1, max_side: int = 5) -> Any:
    from hypothesis.extra import numpy as hnp

    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
