"""RecurrentNetworkGradient: the backward step net run from T - 1 down to 0 in the forward step workspaces.

As Caffe2: each step's backward net reads the forward values its step
workspace kept; gradients of the recurrent states flow through the
``<state>_grad`` blobs (views per step via the backward links), external
gradients of the ``*_all`` outputs are added step by step
(``rnn_internal_accumulate_gradient_input``) and that of ``*_last`` once at
the end; parameter gradients are summed over the steps (a ``Sum`` appended to
the backward step net, the step's own gradient renamed ``<grad>_tmpstep``); the weight and bias gradients
of the step's FCs are computed after the steps instead, one GEMM over all of them
(``batched_weight_grads``).
Gradient op inputs: output gradients (``outputs_with_grads``), forward inputs,
forward outputs (the last one holds the step workspaces). Outputs: gradient of
input 0, of each ``param``, of each initial recurrent state.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.tensor import Tensor
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.rnn.batched_weight_grads import defer_fc_weight_grads
from framework.ops.rnn.recurrent_network import (
    ARGS,
    _rnn_infer,
    add_apply_link_ops,
    compile_step_net,
    links_of,
    run_steps,
    scratch_of,
    step_net_arg,
)
from framework.proto.framework_pb2 import OperatorDef


def _rename(net, old: str, new: str) -> None:
    for op in net.op:
        for i, b in enumerate(op.input):
            if b == old:
                op.input[i] = new
        for i, b in enumerate(op.output):
            if b == old:
                op.output[i] = new


@register_op(
    "RecurrentNetworkGradient",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    input_docs=[("inputs", "Output gradients (outputs_with_grads), forward inputs, forward outputs")],
    output_docs=[("outputs", "Gradients of input 0, of each param, of each initial recurrent state")],
    args=ARGS,
    infer=_rnn_infer,
    category="rnn",
    private=True,
)
class RecurrentNetworkGradient(Operator):
    """Gradient of RecurrentNetwork (see the module doc)."""

    def setup(self) -> None:
        a = self.args
        self.k = len(a.outputs_with_grads)
        if self.k == 0:
            raise self.arg_error("outputs_with_grads must name at least one output")
        if len(self.inputs) <= self.k + 1:  # the output gradients, the forward input, ..., the step workspaces
            raise self.arg_error(
                f"takes the {self.k} output gradients (outputs_with_grads), then the forward op's inputs and "
                f"outputs; got {len(self.inputs)} inputs"
            )
        net = step_net_arg(self, "backward_step_net", required=True)
        self.timestep = a.timestep
        links = links_of(self, "link_") + links_of(self, "backward_link_", with_window=False)
        n_fwd_in = len(self.inputs) - self.k
        self.params = []
        if a.param_grads and len(a.param_grads) != len(a.param):
            raise self.arg_error(f"{len(a.param)} params but {len(a.param_grads)} param_grads")
        for i, pid in enumerate(a.param):
            if not 0 <= pid < n_fwd_in or i + 1 >= len(self.outputs):
                raise self.arg_error(f"param index {pid} does not match the op's inputs/outputs")
            grad = self.output_names[i + 1]
            inner = a.param_grads[i] if a.param_grads else grad
            cell = inner + "_tmpstep"
            _rename(net, inner, cell)
            self.params.append((self.input_names[pid + self.k], i + 1, cell))
        self.rec = []
        for s in a.recurrent_states:
            ext = last = None
            for j, (src, off) in enumerate(zip(a.alias_src, a.alias_offset)):
                if src != s or j not in a.outputs_with_grads:
                    continue
                idx = list(a.outputs_with_grads).index(j)
                if off == 1:
                    ext = self.input_names[idx]
                elif off == -1:
                    last = self.input_names[idx]
                else:
                    raise self.arg_error(f"alias offset of '{s}' with a gradient must be 1 or -1, got {off}")
            self.rec.append((s, s + "_grad", ext, last))
        ids = a.initial_recurrent_state_ids
        if len(ids) != len(self.rec):
            raise self.arg_error("initial_recurrent_state_ids and recurrent_states differ in length")
        self.rec_inputs = [(i + self.k, 1 + len(self.params) + j) for j, i in enumerate(ids)]
        net.external_input.append(self.timestep)
        acc = []
        for _, grad, ext, _ in self.rec:
            if ext is None:
                continue
            op = OperatorDef(
                type="rnn_internal_accumulate_gradient_input", input=[self.timestep, ext, grad], output=[grad]
            )
            op.device_option.CopyFrom(self.op_def.device_option)
            arg = op.arg.add()
            arg.name, arg.i = "offset", 1
            acc.append(op)
            net.external_input.extend([ext, grad])
        rest = list(net.op)
        del net.op[:]
        net.op.extend(acc + rest)
        add_apply_link_ops(net, links, self.timestep, self.op_def.device_option)
        for _, out_idx, cell in self.params:
            grad = self.output_names[out_idx]
            op = OperatorDef(type="Sum", input=[grad, cell], output=[grad])
            op.device_option.CopyFrom(self.op_def.device_option)
            net.op.append(op)
            net.external_input.append(grad)
        cells = {cell: out_idx for _, out_idx, cell in self.params}
        tag = self.output_names[0]
        self.batched, more = defer_fc_weight_grads(net, cells, links, tag) if cells else ([], [])
        add_apply_link_ops(net, more, self.timestep, self.op_def.device_option)
        self.net_def = net
        self.compiled = compile_step_net(net)
        self.local = [link[0] for link in links + more]

    def run(self) -> None:
        k = self.k
        x = self.input(k)
        seq_len = x.shape[0]
        scratch = scratch_of(self, self.inputs[-1], create=False)
        if len(scratch.step_workspaces) < seq_len or scratch.shared_ws is None:
            raise ShapeError(
                f"{self.describe()}: the forward RecurrentNetwork kept {len(scratch.step_workspaces)} step "
                f"workspaces, {seq_len} needed: run the forward op first"
            )
        ws = self.workspace
        for pname, out_idx, _ in self.params:
            p = ws.get_blob(pname).get_tensor().data()
            self.output(out_idx, p.shape, p.dtype)[...] = 0
        grads = []
        for s, grad, _, last in self.rec:
            states = ws.get_blob(s).get_tensor().data()
            gt = ws.create_blob(grad).get_mutable(Tensor)
            if gt.array is None or gt.array.shape != states.shape or gt.array.dtype != states.dtype:
                gt.resize(states.shape)
                gt.mutable_data(states.dtype)
            g = gt.data()
            g[-1] = 0
            if last is not None:
                og = ws.get_blob(last).get_tensor().data()
                if og.size != g[-1].size:
                    raise ShapeError(f"{self.describe()}: '{last}' has {list(og.shape)}, expected {list(g[-1].shape)}")
                g[-1] += og.reshape(g[-1].shape)
            grads.append(g)
        self.output(0, x.shape, x.dtype)[...] = 0
        step0 = scratch.step_workspaces[0]
        local = set(self.local)
        for op in self.net_def.op:
            for b in op.output:
                if b not in local and not step0.has_blob(b):
                    scratch.shared_ws.create_blob(b)
        for b in self.batched:
            b.prepare(self, scratch.shared_ws, seq_len)
        run_steps(self, scratch, self.compiled, range(seq_len - 1, -1, -1), self.timestep, self.local)
        for b in self.batched:
            b.run(self, scratch.shared_ws, seq_len)
        for (in_idx, out_idx), g in zip(self.rec_inputs, grads):
            if out_idx >= len(self.outputs):  # a trailing initial-state gradient nobody reads was pruned
                continue
            init = self.input(in_idx)
            out = self.output(out_idx, init.shape, init.dtype)
            if init.ndim >= 2:
                n = init.shape[0] if init.ndim == 3 else 1
                out[...] = g[:n].reshape(init.shape)
            else:
                np.sum(g[0], axis=0, out=out)
