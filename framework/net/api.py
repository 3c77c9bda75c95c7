"""Workspace-level entry points for running ops, nets and plans.

``framework.workspace`` (Caffe2 names) and the ``Workspace`` methods delegate
here. Everything takes the Workspace explicitly.
"""

from __future__ import annotations

import time
from typing import Any

from framework.errors import BlobNotFoundError, FrameworkError, NetError, OperatorError, error_like
from framework.memory.workspace import Workspace, suggest
from framework.ops import create_operator
from framework.ops.operator import Operator, describe_op


def _as_op_def(op: Any) -> Any:
    if hasattr(op, "Proto") and callable(op.Proto):
        return op.Proto()
    return op


def run_operator_once(ws: Workspace, op_def: Any) -> None:
    """Build ``op_def`` against ``ws``, run it once, and discard it.

    Inputs must exist in the workspace; errors name the op and the blob. If
    the op fails, output blobs it created are removed again and the ones that
    existed are rolled back (see ``framework.ops.operator``): a failed op leaves no trace.
    """
    op_def = _as_op_def(op_def)
    for name in op_def.input:
        if not ws.has_blob(name):
            raise BlobNotFoundError(
                f"{describe_op(op_def)}: input blob '{name}' does not exist in the workspace."
                f"{suggest(name, ws.blobs())}"
            )
    new_outputs = [n for n in dict.fromkeys(op_def.output) if not ws.has_blob(n)]
    try:
        run_op(create_operator(op_def, ws))
    except BaseException:
        for name in new_outputs:
            ws.remove_blob(name)
        raise


def run_op(op: Operator) -> None:
    """Run one operator, wrapping any error with the op's context."""
    try:
        op.run()
    except Exception as e:
        raise wrap_op_error(op, e) from e


def wrap_op_error(op: Operator, e: BaseException, net_name: str | None = None) -> OperatorError:
    """An OperatorError naming the op (and net), its blobs and shapes, and where it was created."""
    where = f" in net '{net_name}'" if net_name else ""
    # First line: which op failed and why (what the CLI shows); then the blobs and their shapes.
    msg = f"error running {op.describe()}{where}: {type(e).__name__}: {e}"
    details = op.context().split("\n", 1)
    if len(details) > 1:
        msg += "\n" + details[1]
    if op.debug_info:
        msg += f"\nthe op was created at:\n{op.debug_info}"
    if net_name:
        msg += (
            f"\nnote: as in Caffe2, the ops of net '{net_name}' that already ran stay run (their outputs "
            "are updated); the failed op changed none of its outputs (docs/reliability.md)"
        )
    user = getattr(e, "user_error_type", None)  # a Python op's own exception type stays catchable
    err = OperatorError(msg) if user is None else error_like(user, OperatorError, msg)
    err.op_index = op.index
    err.op_type = op.type
    err.net_name = net_name
    err.cause_is_user_error = isinstance(e, FrameworkError)
    return err


# -- nets ----------------------------------------------------------------------
def create_net(ws: Workspace, net: Any, overwrite: bool = False, optimize: bool = False, outputs: Any = None) -> Any:
    """Validate and instantiate ``net`` (NetDef, core.Net, file path or text) in ``ws``.

    Refuses an existing name unless ``overwrite``. On any error the workspace
    is unchanged (no blobs created, no net registered). Returns the net object.
    ``optimize=True`` opts in to the inference optimization pass (framework.net.optimize): only the
    net's external outputs (or ``outputs``) keep their values; intermediate blobs may be fused away.
    """
    from framework.net.base import instantiate
    from framework.net.graph import load_net_def

    net_def = load_net_def(net)
    if optimize:
        from framework.net.optimize import optimize_inference

        net_def = optimize_inference(net_def, ws, outputs=outputs)
    if not net_def.HasField("name"):  # an empty name set explicitly is a name, as in Caffe2's CreateNet
        raise NetError("create_net: the NetDef has no name; a created net needs one (set NetDef.name)")
    if net_def.name in ws._nets and not overwrite:
        raise NetError(
            f"net '{net_def.name}' already exists in the workspace: refusing to overwrite it "
            "(pass overwrite=True to replace it)"
        )
    compiled = instantiate(net_def, ws)
    ws._nets[net_def.name] = compiled
    return compiled


def run_net_once(ws: Workspace, net: Any) -> None:
    """Build a temporary net from ``net``, run it once and discard it (init nets)."""
    from framework.net.base import instantiate

    instantiate(net, ws).run()


def run_plan(ws: Workspace, plan: Any) -> None:
    """Run a PlanDef, core.Plan, ExecutionStep or core.ExecutionStep on ``ws``."""
    from framework.net.plan import run_plan as _run_plan

    _run_plan(ws, plan)


def infer_shapes_and_types(
    ws: Workspace,
    nets: Any,
    blob_dimensions: dict[str, Any] | None = None,
    blob_types: dict[str, Any] | None = None,
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Static shapes and TensorProto data types of every blob of ``nets``.

    Known inputs come from ``blob_dimensions``/``blob_types`` if given, else
    from the tensors in ``ws``. Returns ``(shapes, types)``: blob -> list of
    dims, blob -> TensorProto.DataType, for the blobs whose shape is known.
    """
    from framework.net.inference import infer_nets, specs_from_workspace, to_caffe2_maps

    if not isinstance(nets, (list, tuple)):
        nets = [nets]
    known = specs_from_workspace(ws) if blob_dimensions is None else {}
    specs = infer_nets(nets, known, blob_dimensions, blob_types)
    return to_caffe2_maps(specs)


def benchmark_net(ws: Workspace, name: str, warmup: int, main: int, run_individual: bool) -> list[float]:
    """Time a created net: ``[ms per iteration, then per-op ms if run_individual]``.

    Per-op times are for each op in execution order, run one by one (after
    the same warm-up), as Caffe2's TEST_Benchmark for simple nets.
    """
    net = ws.get_net(name)
    for _ in range(warmup):
        net.run()
    main = max(int(main), 1)
    t0 = time.perf_counter()
    for _ in range(main):
        net.run()
    results = [(time.perf_counter() - t0) * 1e3 / main]
    if run_individual:
        per_op = [0.0] * len(net.ops)
        for _ in range(main):
            for k, op in enumerate(net.ops):
                t = time.perf_counter()
                try:
                    op.run()
                except Exception as e:
                    raise wrap_op_error(op, e, net_name=name) from e
                per_op[k] += time.perf_counter() - t
        results += [t * 1e3 / main for t in per_op]
    return results
