"""Summing the gradients of a blob version read by several forward ops, as Caffe2's ``core.IR``.

The backward walk records, per (blob, version), every producer of a gradient
contribution (``DenseGrad`` or ``SparseGrad``). Once the walk has passed the
first reader of that version, ``accumulate`` adds the ops that sum them:

- dense: the first producer keeps its name (``<x>_grad``), the others are
  renamed ``_<x>_grad_autosplit_<k>``, and a ``Sum`` writes ``<x>_grad``;
- sparse (GradientSlice): two ``Concat(axis=0)`` ops write
  ``<x>_grad_indices_concat`` and ``<x>_grad_values_concat`` (no dedup).

The added ops carry ``is_auto_gen_sum_ops:1`` in their device option's extra_info.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framework.errors import GradientError
from framework.net.ssa import ForwardVersions
from framework.ops.gradient import GradientSlice
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import DeviceOption, OperatorDef

__all__ = [
    "IS_AUTO_GEN_SUM_OPS_TAG",
    "ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG",
    "DenseGrad",
    "Generators",
    "SparseGrad",
    "accumulate",
    "rename_grad_output",
]

IS_AUTO_GEN_SUM_OPS_TAG = "is_auto_gen_sum_ops"
ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG = "only_keep_is_auto_gen_sum_ops_tag"
_ONLY_KEEP_TAG = f"{ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG}:1"


@dataclass
class DenseGrad:
    """One producer of a dense gradient: ``op.output[index]`` (op None: passed through)."""

    op: OperatorDef | None
    index: int
    grad: str
    device: DeviceOption | None


@dataclass
class SparseGrad:
    """One producer of a sparse gradient: ops writing the indices and the values parts."""

    op_i: OperatorDef | None
    idx_i: int
    op_v: OperatorDef | None
    idx_v: int
    grad: GradientSlice
    device: DeviceOption | None


Generators = dict[str, dict[int, list[Any]]]  # blob -> version -> [DenseGrad | SparseGrad]


def accumulate(fwd: ForwardVersions, generators: Generators, fwd_idx: int) -> tuple[list[OperatorDef], dict[str, Any]]:
    """The sum ops for the inputs of forward op ``fwd_idx`` whose readers have all been walked.

    Returns (ops, {blob: summed gradient name or GradientSlice}). Renames the
    outputs of the producing gradient ops in place. Raises GradientError for a
    mix of sparse and dense gradients, or producers on different devices.
    """
    s = fwd.ssa[fwd_idx]
    sum_ops: list[OperatorDef] = []
    grad_map: dict[str, Any] = {}
    seen: set[str] = set()
    for x in s.op.input:
        if x in seen:
            continue
        seen.add(x)
        v = s.in_versions[x]
        usage = fwd.input_usages[x][v]
        if len(usage) <= 1 or usage[0] != fwd_idx:
            continue  # a single consumer, or earlier consumers still to come
        gens = generators[x][v]
        if len({type(g) for g in gens}) > 1:
            raise GradientError(
                f"gradients of '{x}' (version {v}, read by {fwd.consumers(usage)}): automatic "
                "aggregation of a mix of sparse and dense gradients is not supported yet"
            )
        if len(gens) < 2:
            continue
        devices = [g.device for g in gens]
        if not all(_same_device(d, devices[0]) for d in devices[1:]):
            raise GradientError(
                f"gradients of '{x}' (version {v}, read by {fwd.consumers(usage)}): "
                "not all gradient ops have the same device option"
            )
        base = _sum_output_name(gens, x)
        summed: str | GradientSlice
        if isinstance(gens[0], DenseGrad):
            ops, summed = _dense_sum(gens, base)
        else:
            ops, summed = _sparse_sum(gens, base)
        # as Caffe2: a producer tagged only_keep_is_auto_gen_sum_ops_tag:1 asks for a sum on the default
        # device carrying only the auto-gen tag; otherwise the sum runs on the producers' device option
        keep_only_tag = any(g.device is not None and _ONLY_KEEP_TAG in g.device.extra_info for g in gens)
        for op in ops:
            if gens[0].device is not None and not keep_only_tag:
                op.device_option.CopyFrom(gens[0].device)
            op.device_option.extra_info.append(f"{IS_AUTO_GEN_SUM_OPS_TAG}:1")
        sum_ops.extend(ops)
        grad_map[x] = summed
    return sum_ops, grad_map


def _same_device(a: DeviceOption | None, b: DeviceOption | None) -> bool:
    a = a or DeviceOption()
    b = b or DeviceOption()
    return a.device_type == b.device_type and a.device_id == b.device_id


def _sum_output_name(gens: list[Any], x: str) -> str:
    for g in gens:
        if isinstance(g, DenseGrad):
            if g.op is not None:
                return g.op.output[g.index]
        else:
            if g.op_i is not None:
                return _strip(g.op_i.output[g.idx_i], "_indices")
            if g.op_v is not None:
                return _strip(g.op_v.output[g.idx_v], "_values")
    return x + "_grad"


def _rename(op: OperatorDef, idx: int, k: int) -> str:
    rename_grad_output(op, idx, f"_{op.output[idx]}_autosplit_{k}")
    return op.output[idx]


def rename_grad_output(op: OperatorDef, idx: int, new_name: str) -> None:
    """Rename output ``idx`` of gradient op ``op`` to ``new_name``; for an ``If`` also every output of the
    ops of its ``then_net`` / ``else_net`` that wrote the old name (they produce it), as Caffe2."""
    old = op.output[idx]
    if op.type == "If":
        for arg in op.arg:
            if arg.name in ("then_net", "else_net") and arg.HasField("n"):
                for inner in arg.n.op:
                    for i, out in enumerate(inner.output):
                        if out == old:
                            inner.output[i] = new_name
    op.output[idx] = new_name


def _dense_sum(gens: list[DenseGrad], base: str) -> tuple[list[OperatorDef], str]:
    inputs: list[str] = []
    k = 0
    first = True
    for g in gens:
        if g.op is not None:
            if first:
                first = False
                inputs.append(g.op.output[g.index])
            else:
                inputs.append(_rename(g.op, g.index, k))
                k += 1
        else:
            _check_conflict(base, g.grad)
            inputs.append(g.grad)
    if base in inputs:  # Sum works in place only with its first input
        j = inputs.index(base)
        inputs[0], inputs[j] = inputs[j], inputs[0]
    return [OperatorDef(type="Sum", input=inputs, output=[base])], base


def _sparse_sum(gens: list[SparseGrad], base: str) -> tuple[list[OperatorDef], GradientSlice]:
    idx_in = _part_inputs([(g.op_i, g.idx_i, g.grad.indices) for g in gens], base)
    val_in = _part_inputs([(g.op_v, g.idx_v, g.grad.values) for g in gens], base)
    out = GradientSlice(base + "_indices_concat", base + "_values_concat")
    ops = [
        OperatorDef(type="Concat", input=idx_in, output=[out.indices, base + "_indices_concat_split"]),
        OperatorDef(type="Concat", input=val_in, output=[out.values, base + "_values_concat_split"]),
    ]
    for op in ops:
        op.arg.append(make_argument("axis", 0))
    return ops, out


def _part_inputs(parts: list[tuple[OperatorDef | None, int, str]], base: str) -> list[str]:
    """The names to concatenate for one part (indices or values) of sparse gradients: each
    producing op's output renamed ``_<name>_autosplit_<k>``, or the name passed through."""
    names: list[str] = []
    k = 0
    for op, idx, passed in parts:
        if op is not None:
            names.append(_rename(op, idx, k))
            k += 1
        else:
            _check_conflict(base, passed)
            names.append(passed)
    return names


def _strip(s: str, suffix: str) -> str:
    return s[: -len(suffix)] if s.endswith(suffix) else s


def _check_conflict(base: str, g: str) -> None:
    if base == g:
        raise GradientError(
            f"cannot accumulate gradients into '{base}': a gradient passed through without an op already has that name"
        )
