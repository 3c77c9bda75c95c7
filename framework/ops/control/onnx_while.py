"""ONNXWhile: ONNX's Loop as Caffe2 ran it (caffe2/operators/onnx_while_op.h).

Operator inputs: max trip count (int64), first condition (bool/int32/int64),
N initial loop-carried dependencies. Outputs: N final loop-carried
dependencies, then K scan outputs (per-iteration values concatenated along
their first dimension, as Caffe2: iteration 0's value copied, each later one
appended by Extend; a body that wants ONNX's stacking gives rows of one, as
the ONNX importer's Loop and Scan do). The ``body`` net's external inputs are (iteration number,
condition, N dependencies) and its external outputs (condition, N
dependencies, K scan outputs). Loop-carried values that are not tensors (the
ONNX backend's sequences and optionals: immutable objects) pass by reference.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_allocation
from framework.memory.workspace import Workspace
from framework.ops.control.scope import WorkspaceStack
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, NET, UNKNOWN, Arg
from framework.ops.subnet import build, nesting, net_arg
from framework.runtime import cancel


def _assign(ws: Workspace, name: str, value: np.ndarray) -> None:
    """Write ``value`` into the blob's array when shape and dtype match (the body net keeps its
    bound arrays and compiled fast path), else feed it."""
    from framework.memory.tensor import Tensor

    if not isinstance(value, np.ndarray):  # a non-tensor loop-carried value (an immutable object): by reference
        ws.create_blob(name).reset(value)
        return
    obj = ws.get_blob(name).held if ws.has_blob(name) else None
    arr = obj.array if type(obj) is Tensor else None
    if arr is not None and arr.shape == value.shape and arr.dtype == value.dtype:
        np.copyto(arr, value)
        obj.version += 1
    else:
        ws.feed_blob(name, value)


def _carried(obj, read, key):
    """A loop-carried value: a copy of a tensor; other blob objects (the ONNX backend's immutable
    sequences and optionals, framework/ops/onnx/values.py) by reference."""
    from framework.memory.tensor import Tensor

    if obj is not None and not isinstance(obj, (Tensor, str, bytes)):
        return obj
    return np.array(read(key), copy=True)


@register_op(
    "ONNXWhile",
    inputs=(2, float("inf")),
    outputs=(0, float("inf")),
    input_docs=[
        ("max_trip_count", "Number of iterations to go out to. Used if the flag has_trip_count is True."),
        ("first_iter_condition", "Dynamic condition value for the first iteration (used if has_cond is True)"),
        ("initial", "Initial values of the loop-carried dependencies (the remaining inputs)"),
    ],
    output_docs=[("outputs", "Final loop-carried dependencies, then the scan outputs (concatenated along dim 0)")],
    args=[
        Arg("body", NET, None, "Net executed on each iteration"),
        Arg("has_trip_count", INT, 0, "Whether to use the trip count input"),
        Arg("has_cond", INT, 0, "Whether to use the condition input"),
        Arg("save_scopes", INT, 0, "Whether to save the scopes across iterations, as in for backprop"),
        Arg(
            "disable_scopes",
            INT,
            0,
            "Do not create new scopes. Use this only if you're certain there will be no "
            "name collision, for example if you're converting from a fully-SSA IR",
        ),
        Arg("num_loop_carried_deps", INT, -1, "Number of loop-carried dependencies (-1: inputs after the first two)"),
    ],
    infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
    category="control",
)
class ONNXWhile(Operator):
    """*** EXPERIMENTAL. This operator is a work-in-progress. No assumption should be made about
    the stability or correctness of this op. *** Generic Looping construct confirming to the ONNX
    Loop operator spec. This loop has multiple termination conditions: 1. Trip count: iteration
    count specified at runtime; set by specifying the input M (has_trip_count). 2. Loop
    termination condition: an input to the op that determines whether to run the first
    iteration and also a loop-carried dependency for the body graph (has_cond). Scan outputs
    concatenate the per-iteration values along their first dimension (each iteration's value must
    keep its shape; a 0-d value cannot be extended past one iteration, as Caffe2's Extend refuses
    it); with zero iterations they are empty int32 tensors, as in Caffe2. The body runs in a child
    workspace that sees none of the outer blobs (a new one per iteration with save_scopes), or in
    the op's own workspace with disable_scopes.

    Departure: Caffe2 writes iteration k at element offset k * size(value) of a tensor grown by one
    row per iteration, which is this concatenation when each value has one row and overruns its
    buffer otherwise; here it is the concatenation in every case."""

    def setup(self) -> None:
        self.body_def = net_arg(self, "body")
        a = self.args
        if a.disable_scopes and a.save_scopes:
            raise self.arg_error("Cannot save scopes when disable_scopes=True")
        n = a.num_loop_carried_deps
        self.n_lcd = len(self.inputs) - 2 if n == -1 else n
        if not 0 <= self.n_lcd <= len(self.inputs) - 2:
            raise self.arg_error(f"num_loop_carried_deps={n} but the op has {len(self.inputs) - 2} initial values")
        ext_in, ext_out = list(self.body_def.external_input), list(self.body_def.external_output)
        if len(ext_in) < 2 + self.n_lcd:
            raise self.arg_error(
                f"body must have {2 + self.n_lcd} external inputs (iteration, condition, "
                f"{self.n_lcd} loop-carried), has {len(ext_in)}"
            )
        self.n_scan = len(ext_out) - self.n_lcd - 1
        if self.n_scan < 0:
            raise self.arg_error(
                "Body graph must have N+K outputs, where N is the number of loop-carried dependencies and "
                f"K is the number of scan outputs (external outputs: {ext_out}, N={self.n_lcd})"
            )
        if len(self.outputs) != self.n_lcd + self.n_scan:
            raise self.arg_error(
                f"expected {self.n_lcd + self.n_scan} outputs ({self.n_lcd} loop-carried, {self.n_scan} scan), "
                f"got {len(self.outputs)}"
            )
        self.ext_in, self.ext_out = ext_in, ext_out
        self.stack = WorkspaceStack()
        self._nets: dict[Workspace, object] = {}  # the workspaces are self.stack's

    def _scope(self, ws: Workspace):
        net = self._nets.get(ws)
        if net is None:
            for name in (*self.ext_in[: 2 + self.n_lcd], self.ext_out[0]):
                if not ws.has_blob(name):
                    ws.create_blob(name)
            net = self._nets[ws] = build(self, self.body_def, ws, "body")
        return net

    def run(self) -> None:
        a = self.args
        trip = self.input(0)
        cond_in = self.input(1)
        if trip.dtype != np.int64 or trip.size != 1:
            raise TypeMismatchError(
                f"{self.describe()}: max_trip_count '{self.input_names[0]}' must be a one-element int64 tensor, "
                f"found {trip.dtype} {list(trip.shape)}"
            )
        if cond_in.dtype not in (np.bool_, np.int32, np.int64) or cond_in.size != 1:
            raise TypeMismatchError(
                f"{self.describe()}: condition '{self.input_names[1]}' must be a one-element bool/int32/int64 "
                f"tensor, found {cond_in.dtype} {list(cond_in.shape)}"
            )
        lcds = [_carried(self.inputs[2 + i].held, self.input, 2 + i) for i in range(self.n_lcd)]
        cond_dtype = cond_in.dtype
        max_trip = int(trip.reshape(-1)[0])
        first_cond = bool(cond_in.reshape(-1)[0])
        self.stack.clear()
        ws = self.workspace if a.disable_scopes else self.stack.push_forward(self.workspace, {})
        scans: list[list[np.ndarray]] = [[] for _ in range(self.n_scan)]
        scan_bytes = 0  # the stacked scan outputs together stay within the allocation limit
        itr, cond = 0, first_cond
        while (not a.has_trip_count or itr < max_trip) and (not a.has_cond or cond):
            cancel.check()  # on a dag worker, Ctrl-C reaches this loop only through the run's token
            net = self._scope(ws)
            _assign(ws, self.ext_in[0], np.array(itr, dtype=np.int64))
            _assign(ws, self.ext_in[1], np.array([cond], dtype=cond_dtype))
            for name, v in zip(self.ext_in[2:], lcds):
                _assign(ws, name, v)
            with nesting(self, "body"):
                net.run()
            cond = bool(np.asarray(ws.fetch_blob(self.ext_out[0])).reshape(-1)[0])
            lcds = [_carried(ws.get_blob(n).held, ws.fetch_blob, n) for n in self.ext_out[1 : 1 + self.n_lcd]]
            for k, name in enumerate(self.ext_out[1 + self.n_lcd :]):
                v = np.array(ws.fetch_blob(name), copy=True)
                if scans[k] and v.shape != scans[k][0].shape:
                    raise ShapeError(
                        f"{self.describe()}: Size of scan output '{name}' changed across iterations: "
                        f"{list(scans[k][0].shape)} then {list(v.shape)}"
                    )
                if scans[k] and v.ndim == 0:
                    raise ShapeError(
                        f"{self.describe()}: scan output '{name}' is 0-d: it cannot be extended along dim 0 "
                        "past the first iteration"
                    )
                scans[k].append(v)
                scan_bytes += v.nbytes
                check_allocation(scan_bytes, f"{self.describe()}: scan outputs after {itr + 1} iterations")
            if a.save_scopes:
                ws = self.stack.push_forward(self.workspace, {})
            itr += 1
        for i, v in enumerate(lcds):
            if not isinstance(v, np.ndarray):
                self.outputs[i].reset(v)
                continue
            out = self.output(i, v.shape, v.dtype)
            np.copyto(out, v)
        for k, vals in enumerate(scans):
            if vals:
                joined = vals[0] if vals[0].ndim == 0 else np.concatenate(vals, axis=0)
                np.copyto(self.output(self.n_lcd + k, joined.shape, joined.dtype), joined)
            else:
                self.output(self.n_lcd + k, (0,), np.int32)


no_gradient("ONNXWhile")
