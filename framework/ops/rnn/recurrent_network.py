"""RecurrentNetwork and RecurrentNetworkGradient (caffe2/operators/rnn/recurrent_network_op.h).

The forward op runs ``step_net`` once per time step ``t`` of input 0
(T x N x ...), each step in its own workspace (child of a shared scratch
workspace, child of the op's workspace), kept for the backward pass.
``rnn_internal_apply_link`` ops prepended to the step net make its linked
blobs views into the sequence blobs (``link_*``), ``recurrent_states`` are
initialized from the op's inputs (``initial_recurrent_state_ids``), and
after the loop the ``alias_*`` outputs become views of the states.

The step net is validated once per distinct definition (ops made anew from
the same NetDef, e.g. by RunNetOnce, share it) and bound once per step
workspace (its ops built against that workspace's blobs); later runs, and
later ops with the same step net, reuse the bound nets, so a step costs the
ops themselves. Departure: Caffe2
cycles two workspaces when there is no backward step net; here every time
step keeps its own (so every bound net keeps stable arrays and its compiled
fast path).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from framework.errors import ArgumentError, OperatorError, ShapeError, TypeMismatchError
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops.arg_reader import ArgReader
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.rnn.links import BoundSteps, ScratchWorkspaces, StepNet, set_timestep, share_view
from framework.ops.schema import BOOL, INTS, NET, STRING, STRINGS, UNKNOWN, Arg
from framework.ops.subnet import bind_net, compile_net
from framework.proto.framework_pb2 import NetDef, OperatorDef
from framework.runtime.state import RUNTIME

ARGS = [
    Arg("step_net", NET, None, "The step net (a NetDef, or its text format as a string)"),
    Arg("backward_step_net", NET, None, "The gradient step net (NetDef or text); absent: forward only"),
    Arg("timestep", STRING, "timestep", "Name of the int32 timestep blob in the step workspaces"),
    Arg("recurrent_states", STRINGS, (), "State blobs (T + 1) x N x D, in the op's workspace"),
    Arg("initial_recurrent_state_ids", INTS, (), "Input index of each state's initial value"),
    Arg("link_internal", STRINGS, (), "Step-net blob of each link"),
    Arg("link_external", STRINGS, (), "Sequence blob of each link"),
    Arg("link_offset", INTS, (), "Time offset of each link"),
    Arg("link_window", INTS, (), "Time steps seen through each link (default 1)"),
    Arg("backward_link_internal", STRINGS, (), "Links of the backward step net"),
    Arg("backward_link_external", STRINGS, (), "Sequence (gradient) blob of each backward link"),
    Arg("backward_link_offset", INTS, (), "Time offset of each backward link"),
    Arg("alias_src", STRINGS, (), "State blob exposed by each alias"),
    Arg("alias_dst", STRINGS, (), "Output blob of each alias"),
    Arg("alias_offset", INTS, (), "First time step of each alias (negative: from the end)"),
    Arg("param", INTS, (), "Input indices of the parameters (gradients computed)"),
    Arg("param_grads", STRINGS, (), "Names the backward step net gives the parameter gradients"),
    Arg("outputs_with_grads", INTS, (), "Outputs that receive external gradients"),
    Arg("recompute_blobs_on_backward", STRINGS, (), "Blobs shared between steps (recomputed on backward)"),
    Arg("enable_rnn_executor", BOOL, False, "Accepted; steps always run in order here"),
    Arg("forward_only", BOOL, False, "Accepted (set by builders); no backward_step_net means forward only"),
]


def step_net_arg(op: Operator, name: str, required: bool) -> NetDef | None:
    v = op.args.get(name)
    if isinstance(v, (bytes, str)) and not isinstance(v, NetDef):
        text = v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
        if not text.strip():
            v = None
        else:
            from framework.proto.io import parse_text

            try:
                v = parse_text(text, NetDef)
            except Exception as e:
                raise op.arg_error(f"argument '{name}' is not a valid NetDef text: {e}") from None
    if v is None or (isinstance(v, list) and not v):
        if required:
            raise op.arg_error(f"argument '{name}' (the step NetDef) is required")
        return None
    if not isinstance(v, NetDef):
        raise ArgumentError(f"{op.describe()}: argument '{name}' must be a NetDef, got {type(v).__name__}")
    out = NetDef()
    out.CopyFrom(v)
    return out


def links_of(op: Operator, prefix: str, with_window: bool = True) -> list[tuple[str, str, int, int]]:
    a = op.args
    internal, external = a.get(prefix + "internal"), a.get(prefix + "external")
    offset = a.get(prefix + "offset")
    window = a.get(prefix + "window") if with_window else []
    window = window or [1] * len(offset)
    if not len(internal) == len(external) == len(offset) == len(window):
        raise op.arg_error(
            f"{prefix}internal/external/offset/window lengths differ: "
            f"{len(internal)}, {len(external)}, {len(offset)}, {len(window)}"
        )
    return list(zip(internal, external, offset, window))


def add_apply_link_ops(net: NetDef, links: list, timestep: str, device: Any) -> None:
    ops = []
    for internal, external, offset, window in links:
        op = OperatorDef(type="rnn_internal_apply_link", input=[timestep, external], output=[internal, external])
        op.device_option.CopyFrom(device)
        a = op.arg.add()
        a.name, a.i = "offset", offset
        a = op.arg.add()
        a.name, a.i = "window", window
        for other in net.op:
            if internal in other.input:
                continue
            if internal in other.output:
                other.control_input.append(internal)
                break
        ops.append(op)
        net.external_input.extend([internal, external])
    rest = list(net.op)
    del net.op[:]
    net.op.extend(ops + rest)


def scratch_of(op: Operator, blob: Any, create: bool) -> ScratchWorkspaces:
    obj = blob.held
    if obj is None and create:
        obj = ScratchWorkspaces()
        blob.reset(obj)
    if type(obj) is not ScratchWorkspaces:
        found = "an empty blob" if obj is None else type(obj).__qualname__
        raise TypeMismatchError(
            f"{op.describe()}: the step-workspaces blob must hold ScratchWorkspaces (RecurrentNetwork's last "
            f"output), found {found}"
        )
    return obj


def run_steps(op: Operator, scratch: ScratchWorkspaces, step: StepNet, times: Any, timestep: str, local: list) -> None:
    """Run the compiled step net in the step workspace of every t in ``times`` (bound once per step)."""
    entry = scratch.nets.get(step.key)
    if entry is None:
        entry = scratch.nets[step.key] = BoundSteps()
    if not entry.used_by(op):
        entry.take(op, scratch.step_workspaces)
    bound = entry.nets
    op.nested_ops_run = 0  # step-net ops run by this call (what a RunCountObserver of the outer net counts)
    for t in times:
        ws = scratch.step(t)
        set_timestep(ws, timestep, t)
        net = bound.get(t)
        if net is None:
            for name in local:  # linked blobs are views private to each step
                if name not in ws._blobs:
                    ws.create_local_blob(name)
            # a step net runs once per outer run and is rebound-in-place whenever the sequence length changes
            # (the states are reallocated): compiling its fast path pays only once its arrays stay put
            net = bound[t] = bind_net(step.compiled, ws, compile_when_stable=True)
        try:
            net.run()
        except Exception as e:
            raise OperatorError(f"{op.describe()}: step net failed at timestep {t}: {e}") from e
        op.nested_ops_run += len(getattr(net, "ops", ()))


# NetDef digest -> compiled step net (recently used last)
_COMPILED: OrderedDict[bytes, Any] = RUNTIME.held("ops.rnn.step_nets", OrderedDict)
_COMPILED_MAX = 64
_COMPILED_LOCK = threading.Lock()


def compile_step_net(net_def: NetDef) -> StepNet:
    """The step net compiled once per distinct definition (validation and graph building are the costly
    part of making the op, and nets run by RunNetOnce make it on every run); keyed by the NetDef's digest."""
    key = hashlib.sha256(net_def.SerializeToString(deterministic=True)).digest()
    with _COMPILED_LOCK:
        compiled = _COMPILED.get(key)
        if compiled is not None:
            _COMPILED.move_to_end(key)
    if compiled is None:
        compiled = compile_net(net_def)
        with _COMPILED_LOCK:
            _COMPILED[key] = compiled
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
    return StepNet(compiled, key)


def _rnn_infer(args, ins):
    return [UNKNOWN] * args.num_outputs


@register_op(
    "RecurrentNetwork",
    inputs=(1, float("inf")),
    outputs=(2, float("inf")),
    input_docs=[("inputs", "The sequence (T x N x ...), initial recurrent states, then the step net's parameters")],
    output_docs=[("outputs", "The aliased state sequences (e.g. hidden_all, hidden_last); last: the step workspaces")],
    args=ARGS,
    infer=_rnn_infer,
    category="rnn",
)
class RecurrentNetwork(Operator):
    """Run the input network in a recurrent fashion. This can be used to implement fairly
    general recurrent neural networks (RNNs). The operator proceeds as follows. First,
    initialize the states from the input recurrent states. For each timestep T, apply the links
    (that map offsets from input/output tensors into the inputs/outputs for the `step` network).
    Finally, alias the recurrent states to the specified output blobs. Input 0 is the sequence
    (T x N x ...); the last output holds the step workspaces the gradient needs. The step net
    is validated once and bound once per step workspace; every time step keeps its workspace
    (Caffe2 cycles two when there is no backward step net)."""

    def setup(self) -> None:
        a = self.args
        self.step_def = step_net_arg(self, "step_net", required=True)
        self.timestep = a.timestep
        states, ids = a.recurrent_states, a.initial_recurrent_state_ids
        if len(states) != len(ids):
            raise self.arg_error(f"states/inputs mismatch: {len(states)} recurrent_states, {len(ids)} initial ids")
        for i in ids:
            if not 0 <= i < len(self.inputs):
                raise self.arg_error(f"initial_recurrent_state_ids: {i} is not an input index")
        self.recurrent = [(s, i) for s, i in zip(states, ids)]
        if not len(a.alias_src) == len(a.alias_dst) == len(a.alias_offset):
            raise self.arg_error("alias_src/alias_dst/alias_offset lengths differ")
        for dst in a.alias_dst:
            if dst not in self.output_names:
                raise self.arg_error(f"alias_dst '{dst}' is not an output of the op")
        self.aliases = list(zip(a.alias_src, a.alias_dst, a.alias_offset))
        self.links = links_of(self, "link_")
        self.step_def.external_input.append(self.timestep)
        add_apply_link_ops(self.step_def, self.links, self.timestep, self.op_def.device_option)
        self.has_backward = step_net_arg(self, "backward_step_net", required=False) is not None
        self.compiled = compile_step_net(self.step_def)
        self.local = [link[0] for link in self.links]
        self._alias_shapes: dict[str, tuple] = {}  # shape of the view each alias output got last run

    def _init_states(self, seq_len: int, batch: int) -> list[tuple[Any, np.ndarray]]:
        plans = []
        for state, i in self.recurrent:
            x = self.input(i)
            name = self.input_names[i]
            if x.dtype.kind != "f" or not 1 <= x.ndim <= 3:
                raise ShapeError(
                    f"{self.describe()}: initial state '{name}' must be a float tensor of 1 to 3 dims, "
                    f"found {x.dtype} {list(x.shape)}"
                )
            if x.ndim >= 2 and x.shape[-2] != batch:
                raise ShapeError(
                    f"{self.describe()}: initial state '{name}' has batch {x.shape[-2]}, the input has {batch}"
                )
            init_len = x.shape[0] if x.ndim == 3 else 1
            plans.append((state, x, init_len))
        out = []
        for state, x, init_len in plans:
            t = self.workspace.create_blob(state).get_mutable(Tensor)
            shape = (seq_len + init_len, batch, x.shape[-1])
            if t.array is None or t.array.shape != shape or t.array.dtype != x.dtype:
                t.resize(shape)
                t.mutable_data(x.dtype)
            arr = t.data()
            rows = x.shape[-2] if x.ndim >= 2 else 1  # a 1-D state is every batch entry's (broadcast)
            arr[:init_len] = x.reshape(init_len if x.ndim == 3 else 1, rows, x.shape[-1])
            out.append((state, arr))
        return out

    def run(self) -> None:
        x = self.input(0)
        if x.ndim < 2:
            raise ShapeError(
                f"{self.describe()}: input '{self.input_names[0]}' must be T x N x ..., found {list(x.shape)}"
            )
        seq_len, batch = x.shape[0], x.shape[1]
        scratch = scratch_of(self, self.outputs[-1], create=True)
        self._init_states(seq_len, batch)
        if scratch.shared_ws is None:
            scratch.shared_ws = Workspace(self.workspace.root_folder, parent=self.workspace, name="rnn_shared")
        for b in self.args.recompute_blobs_on_backward:
            if b not in scratch.shared_ws._blobs:
                scratch.shared_ws.create_local_blob(b)
        run_steps(self, scratch, self.compiled, range(seq_len), self.timestep, self.local)
        for src, dst, offset in self.aliases:
            states = self.workspace.get_blob(src).get_tensor().data()
            start = offset if offset >= 0 else states.shape[0] + offset
            if start > states.shape[0] or start < 0:
                raise ShapeError(f"{self.describe()}: Invalid number of timesteps for alias '{dst}' (offset {offset})")
            view = states[start:]
            share_view(self.outputs[self.output_names.index(dst)], view, self._alias_shapes.get(dst))
            self._alias_shapes[dst] = view.shape


@gradient("RecurrentNetwork")
def _rnn_gradient(g):
    """Caffe2's GetRecurrentNetworkGradient. Departure: an output listed in outputs_with_grads that
    receives no gradient gets a zero one (ConstantFill like the output) instead of an error."""
    d = g.def_
    args = ArgReader(d)
    ids = args.repeated("outputs_with_grads", kind=INTS)
    if not ids:
        raise ArgumentError("gradient of RecurrentNetwork: outputs_with_grads must name at least one output")
    params = args.repeated("param", kind=INTS)
    rec = args.repeated("initial_recurrent_state_ids", kind=INTS)
    pre, go = [], []
    for i in ids:
        if g.has_go(i):
            go.append(g.GO(i))
            continue
        zero = f"{d.output[i]}_zero_grad"
        fill = OperatorDef(type="ConstantFill", input=[d.output[i]], output=[zero])
        fill.arg.add(name="value", f=0.0)
        pre.append(fill)
        go.append(zero)
    ins = go + list(d.input) + list(d.output)
    outs = [g.GI(0)] + [g.GI(i) for i in params] + [g.GI(i) for i in rec]
    return pre + [g.op("RecurrentNetworkGradient", ins, outs)]


from framework.ops.rnn import recurrent_gradient  # noqa: E402,F401  (registers RecurrentNetworkGradient)
