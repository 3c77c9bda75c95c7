"""Gradients of If, Do and While as Caffe2 generates them (caffe2/python/control_ops_grad.py).

- If: the backward pass of each branch, with the If's output gradients as
  the initial gradients, becomes the ``then_net``/``else_net`` of a gradient
  If on the same condition; a gradient one branch computes and the other
  does not is zero-filled (or copied from the initial gradient) in the other.
- Do: the backward pass of the inner net runs in a gradient Do that pops the
  forward Do's workspace from the scope, so inner forward values are there;
  inner gradients of inputs are copied to ``<outer input>_grad``.
- While: needs a loop body that is a single Do (with a scope): the gradient
  While runs the gradient Do once per saved forward workspace (HasScope).

Deduplication: one gradient blob given for several outputs is copied so every
output has its own (Do requires a bijection between inner and outer names).
"""

from __future__ import annotations

from typing import Any

from framework.errors import GradientError
from framework.ops.arg_reader import ArgReader
from framework.ops.gradient import gradient
from framework.ops.schema import INT, INTS, NET, STRINGS
from framework.ops.subnet import backward_pass
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef, OperatorDef


def _net(op: OperatorDef, name: str) -> NetDef | None:
    args = ArgReader(op)
    return args.single(name) if args.has_single(name, NET) else None


def _copy(src: str, dst: str) -> OperatorDef:
    return OperatorDef(type="Copy", input=[src], output=[dst])


def dedupe_g_output(op: OperatorDef, g_output: list[Any]) -> tuple[list[OperatorDef], list[Any]]:
    ops, out, seen = [], [], {}
    for name, g in zip(op.output, g_output):
        if not g:
            out.append(g)
        elif name in seen:
            out.append(seen[name])
        elif g not in seen.values():
            seen[name] = g
            out.append(g)
        else:
            dedup = f"{name}_{g}_DEDUP"
            ops.append(_copy(g, dedup))
            seen[name] = dedup
            out.append(dedup)
    return ops, out


def _touched(ops: Any) -> set[str]:
    return {b for o in ops for b in (*o.input, *o.output)}


def subnet_gradient(subnet: NetDef, init: dict[str, str]) -> tuple[NetDef, dict[str, str], set[str], set[str]]:
    """(gradient net, blob -> gradient map, blobs it reads from outside, blobs it writes)."""
    touched = _touched(subnet.op)
    seeds = {k: v for k, v in init.items() if k in touched}
    grad_ops: list[OperatorDef] = []
    grad_map: dict[str, str] = {}
    if seeds:
        grad_ops, gmap = backward_pass(list(subnet.op), seeds)
        grad_map = {k: str(v) for k, v in gmap.items() if isinstance(v, str)}
    outputs: set[str] = set()
    inputs: set[str] = set()
    for gop in grad_ops:
        inputs.update(b for b in gop.input if b not in outputs)
        outputs.update(gop.output)
    net = NetDef()
    net.CopyFrom(subnet)
    if net.name:
        net.name += "_grad"
    del net.op[:]
    net.op.extend(grad_ops)
    del net.external_input[:]
    del net.external_output[:]
    return net, grad_map, inputs, outputs


def _zero_init(init: dict[str, str], grad_map: dict[str, str], names: set[str]) -> list[OperatorDef]:
    ops = []
    for g in sorted(names):
        blob = next((b for b, gb in grad_map.items() if gb == g), None)
        if blob is None:
            raise GradientError(f"gradient of If: unknown gradient output '{g}'")
        if blob in init:
            if init[blob] != g:
                ops.append(_copy(init[blob], g))
        else:
            op = OperatorDef(type="ConstantFill", input=[blob], output=[g])
            op.arg.append(make_argument("value", 0.0))
            ops.append(op)
    return ops


@gradient("If", copy_arguments=False)
def _if_gradient(g):
    op = g.def_
    pre, g_output = dedupe_g_output(op, g.g_output)
    init = {o: gr for o, gr in zip(op.output, g_output) if gr}
    if not init:
        raise GradientError("gradient of If: no output gradient given")
    then_def = _net(op, "then_net")
    if then_def is None:
        raise GradientError("gradient of If: the op has no then_net")
    then_net, then_map, then_in, then_out = subnet_gradient(then_def, init)
    grad_map = dict(then_map)
    else_def = _net(op, "else_net")
    else_net, else_map, else_in, else_out = None, {}, set(), set()
    if else_def is not None:
        else_net, else_map, else_in, else_out = subnet_gradient(else_def, init)
        for blob, eg in else_map.items():
            tg = then_map.get(blob)
            if tg is None or tg == eg:
                grad_map[blob] = eg
            elif tg == init.get(blob):
                grad_map[blob] = eg
            elif eg != init.get(blob):
                raise GradientError(f"gradient of If: branches disagree on the gradient of '{blob}' ({tg}, {eg})")
    only_then = {o for o in then_out - else_out if o in then_map.values()}
    zero_then = _zero_init(init, then_map, only_then)
    if else_net is not None:
        else_net.op.extend(zero_then)
    elif zero_then:
        else_net = NetDef()
        else_net.CopyFrom(then_net)
        else_net.name = (then_net.name + "_auto_else_zero_blobs_") if then_net.name else ""
        del else_net.op[:]
        else_net.op.extend(zero_then)
    only_else = {o for o in else_out - then_out if o in else_map.values()}
    then_net.op.extend(_zero_init(init, else_map, only_else))
    cond = op.input[0]
    inputs = [cond] + sorted((then_in | else_in) - {cond})
    outputs = sorted(then_out | else_out)
    gop = OperatorDef(type="If", input=inputs, output=outputs, name=(op.name + "_grad") if op.name else "")
    if op.HasField("device_option"):
        gop.device_option.CopyFrom(op.device_option)
    gop.arg.append(make_argument("then_net", then_net))
    if else_net is not None:
        gop.arg.append(make_argument("else_net", else_net))
    for k, name in enumerate(op.input):
        if name in grad_map:
            g.set_dense(k, grad_map[name])
    return pre + [gop]


def do_bindings(op: OperatorDef) -> tuple[NetDef, dict[str, str], dict[str, str], str]:
    """(net, outer -> inner, inner -> outer, scope blob) of a Do op."""
    net = _net(op, "net")
    if net is None:
        raise GradientError("gradient of Do: the op has no net argument")
    args = ArgReader(op)
    inner = args.repeated("inner_blobs", kind=STRINGS)
    idx = args.repeated("outer_blobs_idx", kind=INTS)
    if len(inner) != len(idx):
        raise GradientError("gradient of Do: inner_blobs and outer_blobs_idx differ in length")
    outer_names = list(op.input[:-1]) + list(op.output[:-1])
    o2i, i2o = {}, {}
    for name, k in zip(inner, idx):
        if not 0 <= k < len(outer_names):
            raise GradientError(f"gradient of Do: outer blob index {k} out of bounds")
        o2i[outer_names[k]] = name
        i2o[name] = outer_names[k]
    return net, o2i, i2o, op.output[-1]


@gradient("Do", copy_arguments=False)
def _do_gradient(g):
    op = g.def_
    net, o2i, i2o, scope = do_bindings(op)
    pre, g_output = dedupe_g_output(op, g.g_output)
    seeds: dict[str, str] = {}
    init: dict[str, str] = {}  # inner gradient name -> outer gradient name
    for out, gr in zip(op.output[:-1], g_output[:-1]):
        if gr:
            inner_g = o2i[out] + "/_DO_OPERATOR_INNER_GRAD_"
            seeds[o2i[out]] = inner_g
            init[inner_g] = gr
    if not seeds:
        raise GradientError("gradient of Do: empty initial gradient map")
    touched = _touched(net.op)
    seeds = {k: v for k, v in seeds.items() if k in touched}
    if not seeds:
        return pre
    inner_ops, inner_map = backward_pass(list(net.op), seeds)
    inner_map = {k: v for k, v in inner_map.items() if isinstance(v, str)}
    if not inner_ops:
        return pre
    copies, new_outputs, bindings = [], [], {}
    for k, outer in enumerate(op.input[:-1]):
        inner = o2i[outer]
        if inner in inner_map:
            copy_name = inner + "/_DO_OPERATOR_INNER_GRAD_COPY_"
            copies.append(_copy(inner_map[inner], copy_name))
            outer_g = outer + "_grad"
            bindings[copy_name] = outer_g
            new_outputs.append(outer_g)
            g.set_dense(k, outer_g)
    new_inputs: list[str] = []
    overwritten: set[str] = set()
    saved: set[str] = set()
    for gop in inner_ops:
        for b in gop.input:
            if b in overwritten:
                continue
            outer = i2o.get(b) or init.get(b)
            if outer:
                if outer not in new_inputs:
                    new_inputs.append(outer)
                bindings[b] = outer
            else:
                saved.add(b)
        overwritten.update(gop.output)
    grad_net = NetDef()
    grad_net.CopyFrom(net)
    if grad_net.name:
        grad_net.name += "_grad"
    del grad_net.op[:]
    grad_net.op.extend(list(inner_ops) + copies)
    del grad_net.external_input[:]
    del grad_net.external_output[:]
    ordered = new_inputs + new_outputs
    gop = OperatorDef(
        type="Do", input=new_inputs + [scope], output=new_outputs + [scope], name=(op.name + "_grad") if op.name else ""
    )
    if op.HasField("device_option"):
        gop.device_option.CopyFrom(op.device_option)
    gop.arg.append(make_argument("net", grad_net))
    gop.arg.append(make_argument("inner_blobs", list(bindings)))
    gop.arg.append(make_argument("outer_blobs_idx", [ordered.index(bindings[b]) for b in bindings]))
    gop.arg.append(make_argument("saved_fwd_blobs", sorted(saved)))
    gop.is_gradient_op = True
    return pre + [gop]


@gradient("While", copy_arguments=False)
def _while_gradient(g):
    op = g.def_
    pre, g_output = dedupe_g_output(op, g.g_output)
    init = {o: gr for o, gr in zip(op.output, g_output) if gr}
    if not init:
        raise GradientError("gradient of While: empty initial gradient map")
    loop = _net(op, "loop_net")
    if loop is None or len(loop.op) != 1 or loop.op[0].type != "Do":
        raise GradientError("gradient While op requires single Do op as a loop body")
    do_op = loop.op[0]
    do_args = ArgReader(do_op)
    if do_args.has_single("reuse_workspace", INT) and do_args.single("reuse_workspace", kind=INT):
        raise GradientError("gradient While op requires Do loop body op without reuse_workspace set")
    scope = do_op.output[-1]
    loop_grad, loop_map, loop_in, loop_out = subnet_gradient(loop, init)
    cond_name = (op.name or "while") + "_grad/cond"
    has = OperatorDef(type="HasScope", input=[scope], output=[cond_name])
    cond_init = [OperatorDef(type="HasScope", input=[scope], output=[cond_name])]
    cond_ops = [has]
    for blob, ig in init.items():
        lg = loop_map.get(blob)
        if lg is not None and lg != ig:
            cond_ops.append(_copy(lg, ig))
            cond_init.append(_copy(ig, lg))
    cond_net = NetDef(name="gradient_loop_cond_net")
    cond_net.op.extend(cond_ops)
    gop = OperatorDef(
        type="While",
        input=[cond_name] + sorted(loop_in),
        output=sorted(loop_out),
        name=(op.name + "_grad") if op.name else "",
    )
    gop.arg.append(make_argument("loop_net", loop_grad))
    gop.arg.append(make_argument("cond_net", cond_net))
    for k, name in enumerate(op.input):
        if name in loop_map:
            g.set_dense(k, loop_map[name])
    return pre + cond_init + [gop]
