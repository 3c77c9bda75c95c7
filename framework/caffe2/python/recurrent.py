"""Caffe2's ``recurrent`` module: ``recurrent_net`` builds a RecurrentNetwork op from a step net.

As ``caffe2.python.recurrent``: the backward step net is the backward pass of
the cell net (``core.GradientRegistry.GetBackwardPass``) seeded with
``<output>_grad`` for its external outputs; recurrent states are
``<scope>/<cell input>_states`` (T + 1 steps) with links at offsets 0 (the
state read at t) and 1 (the state written at t); outputs are
``<cell output>_all`` (alias from step 1) and ``<cell output>_last`` (the last
step) per recurrent state, then the step workspaces.
"""

from __future__ import annotations

from typing import Any

from framework import core

__all__ = ["recurrent_net", "retrieve_step_blobs", "set_rnn_executor_config"]


def _versions(ops: Any) -> tuple[dict[str, int], set[str]]:
    """(times each blob is written, blobs read before any write)."""
    written: dict[str, int] = {}
    undefined: set[str] = set()
    for op in ops:
        for b in op.input:
            if b not in written:
                undefined.add(b)
        for b in op.output:
            written[b] = written.get(b, 0) + 1
    return written, undefined


def _triples(x: list) -> tuple[list, list, list]:
    if not x:
        return [], [], []
    a, b, c = zip(*x)
    return list(a), list(b), list(c)


def recurrent_net(
    net: Any,
    cell_net: Any,
    inputs: Any,
    initial_cell_inputs: Any,
    links: dict,
    timestep: Any = None,
    scope: Any = None,
    outputs_with_grads: Any = (0,),
    recompute_blobs_on_backward: Any = None,
    forward_only: bool = False,
) -> list:
    """Add a RecurrentNetwork op running ``cell_net`` over ``inputs`` to ``net``; its outputs but the last.

    inputs: [(cell input name, T x N x D sequence blob)] (one); initial_cell_inputs:
    [(cell state input, initial value blob)]; links: {cell state input: cell state output}.
    """
    if len(inputs) != 1:
        raise ValueError("Only one input blob is supported so far")
    input_blobs = [str(i[0]) for i in inputs]
    initial_input_blobs = [str(x[1]) for x in initial_cell_inputs]
    op_name = net.NextName("recurrent")

    def s(name: str) -> str:
        return f"{op_name if scope is None else scope}/{name}"

    known = set(input_blobs + initial_input_blobs + [str(x[0]) for x in initial_cell_inputs])
    if timestep is not None:
        known.add(str(timestep))
    proto = cell_net.Proto()
    references = [core.BlobReference(b) for b in proto.external_input if b not in known]
    inner_outputs = list(proto.external_output)

    backward = None
    backward_mapping: dict[str, Any] = {}
    if not forward_only:
        ops, mapping = core.GradientRegistry.GetBackwardPass(proto.op, {o: o + "_grad" for o in inner_outputs})
        backward_mapping = {str(k): v for k, v in mapping.items()}
        backward = core.Net("RecurrentBackwardStep")
        bproto = backward.Proto()
        if recompute_blobs_on_backward is not None:
            recompute_blobs_on_backward = {str(b) for b in recompute_blobs_on_backward}
            for op in proto.op:
                if not recompute_blobs_on_backward.isdisjoint(set(op.output)):
                    if not set(op.output) <= recompute_blobs_on_backward:
                        raise ValueError(f"op {op.type} recomputed on backward writes more than the listed blobs")
                    bproto.op.extend([op])
        bproto.op.extend(ops)
        backward_versions, undefined = _versions(bproto.op)
        fwd_versions, _ = _versions(proto.op)
        scratches = [b for b, v in fwd_versions.items() if v > 0 and b in undefined and b not in inner_outputs]
        bproto.external_input.extend(scratches)
        bproto.type = "simple"

    all_inputs = [i[1] for i in inputs] + [x[1] for x in initial_cell_inputs] + references
    all_outputs: list[str] = []
    proto.type = "simple"
    forward_links, backward_links, aliases, recurrent_states = [], [], [], []
    for cell_input, _ in initial_cell_inputs:
        cell_input = str(cell_input)
        state = s(cell_input + "_states")
        states_grad = state + "_grad"
        cell_output = links[cell_input] if cell_input in links else links[core.BlobReference(cell_input)]
        cell_output = str(cell_output)
        forward_links += [(cell_input, state, 0), (cell_output, state, 1)]
        aliases += [(state, cell_output + "_all", 1), (state, cell_output + "_last", -1)]
        all_outputs += [cell_output + "_all", cell_output + "_last"]
        recurrent_states.append(state)
        if backward is not None:
            backward_links.append((cell_output + "_grad", states_grad, 1))
            backward.Proto().external_input.append(cell_output + "_grad")
            rec_grad = cell_input + "_grad"
            if not backward_versions.get(rec_grad, 0):
                backward_links.append((str(backward_mapping[cell_input]), states_grad, 0))
            else:
                backward_links.append((rec_grad, states_grad, 0))
    for input_t, input_blob in inputs:
        forward_links.append((str(input_t), str(input_blob), 0))

    if backward is not None:
        bproto = backward.Proto()
        for input_t, input_blob in inputs:
            backward_links.append((str(backward_mapping[str(input_t)]), str(input_blob) + "_grad", 0))
        bproto.external_input.extend(proto.external_input)
        bproto.external_input.extend(proto.external_output)
        # A blob receiving gradient both from outside (an external input) and from an op of the
        # backward step net must sum the two instead of overwriting.
        ops = list(bproto.op)
        del bproto.op[:]
        for op in ops:
            bproto.op.extend([op])
            for j, out in enumerate(op.output):
                if out in bproto.external_input and out not in op.input:
                    accum = out + "_accum"
                    bproto.op[-1].output[j] = accum
                    # references: the names are final, a current NameScope must not be added again
                    backward.Sum([core.BlobReference(out), core.BlobReference(accum)], [core.BlobReference(out)])

    link_internal, link_external, link_offset = _triples(forward_links)
    alias_src, alias_dst, alias_offset = _triples(aliases)
    recurrent_inputs = [str(x[1]) for x in initial_cell_inputs]
    names = [str(b) for b in all_inputs]
    kwargs: dict[str, Any] = {}
    if backward is not None:
        keys = set(backward_mapping)
        params = [str(x) for x in references if str(x) in keys]
        bl_internal, bl_external, bl_offset = _triples(backward_links)
        kwargs = {
            "param": [names.index(p) for p in params],
            "backward_link_internal": [str(x) for x in bl_internal],
            "backward_link_external": [str(x) for x in bl_external],
            "backward_link_offset": list(bl_offset),
            "outputs_with_grads": list(outputs_with_grads),
            "recompute_blobs_on_backward": sorted(recompute_blobs_on_backward or ()),
            "param_grads": [str(backward_mapping[p]) for p in params],
        }
        if len(backward.Proto().op):
            kwargs["backward_step_net"] = backward.Proto()
    # the output names are final (alias_dst names them): references, so a name scope is not added twice
    results = net.RecurrentNetwork(
        all_inputs,
        [core.BlobReference(str(b)) for b in all_outputs + [s("step_workspaces")]],
        alias_src=alias_src,
        alias_dst=[str(a) for a in alias_dst],
        alias_offset=list(alias_offset),
        recurrent_states=recurrent_states,
        initial_recurrent_state_ids=[names.index(i) for i in recurrent_inputs],
        link_internal=[str(x) for x in link_internal],
        link_external=[str(x) for x in link_external],
        link_offset=list(link_offset),
        enable_rnn_executor=1,
        step_net=proto,
        timestep="timestep" if timestep is None else str(timestep),
        **kwargs,
    )
    proto.type = "simple"
    return list(results[:-1])


def set_rnn_executor_config(rnn_op: Any, num_threads: int | None = None, max_cuda_streams: int | None = None) -> None:
    """Accepted for compatibility: records Caffe2's rnn_executor arguments (steps run in order here)."""
    from framework.proto.args import make_argument

    if rnn_op.type not in ("RecurrentNetwork", "RecurrentNetworkGradient"):
        raise ValueError(f"expected a RecurrentNetwork op, got {rnn_op.type}")
    for k, v in (("num_threads", num_threads), ("max_cuda_streams", max_cuda_streams)):
        if v is not None:
            rnn_op.arg.extend([make_argument("rnn_executor." + k, v)])


def retrieve_step_blobs(net: Any, prefix: str = "rnn") -> list:
    """Copy every step workspace's blobs into the current workspace (RecurrentNetworkBlobFetcher); the
    names of the copies, as the fetched string tensor holds them (bytes, as Caffe2's)."""
    from framework import workspace

    out, count = [], 1
    for op in net.Proto().op:
        if op.type == "RecurrentNetwork":
            name = f"{prefix}_{count}"
            count += 1
            workspace.RunOperatorOnce(
                core.CreateOperator("RecurrentNetworkBlobFetcher", [op.output[-1]], [name], prefix=prefix)
            )
            out += workspace.FetchBlob(name).tolist()
    return out
