"""The backward pass: gradient operators for a net, as ordinary ops.

One generic loop (STYLE point 4). The forward ops are replayed once to give
every blob write a version number (a light SSA form); the ops are then walked
in reverse, each op's gradient maker is asked for its gradient ops, every
input those ops read is checked against the versions (so an in-place op that
destroyed a value a gradient needs is an error, not a wrong number), and the
gradients of a blob version consumed by several ops are summed, exactly as
Caffe2's ``core.IR`` does:

- seeds: ``ys`` is a list (each ``y`` gets ``ConstantFill([y], ["<y>_autogen_grad"],
  value=1.0)``) or a dict ``{y: gradient blob, GradientSlice or None}``;
- dense accumulation: the first generator keeps its name (``<x>_grad``), the
  others are renamed ``_<x>_grad_autosplit_<k>`` and a ``Sum`` writes ``<x>_grad``;
- sparse accumulation (GradientSlice): two ``Concat(axis=0)`` ops write
  ``<x>_grad_indices_concat`` and ``<x>_grad_values_concat`` (no dedup);
- ``StopGradient`` has no gradient, so the walk stops there. A gradient that
  would only flow into a blob version written by a no-gradient op (Caffe2's
  ``StopGradient(data, data)`` idiom) is dead: the gradient op drops that
  output when its schema allows (FCGradient without dX), or is dropped whole,
  and the returned map does not list it.

>>> from framework.core import CreateOperator
>>> from framework.proto.framework_pb2 import NetDef
>>> net = NetDef(name="n")
>>> net.op.extend([CreateOperator("Relu", ["X"], ["Y"])])
>>> grads = add_gradient_operators(net, ["Y"])
>>> [op.type for op in net.op], grads["X"]
(['Relu', 'ConstantFill', 'ReluGradient'], 'X_grad')
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from framework.errors import FrameworkError, GradientError
from framework.ops.gradient import GradientSlice, get_gradient_for_op
from framework.ops.operator import describe_op
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import DeviceOption, NetDef, OperatorDef

__all__ = [
    "AUTOGEN_GRAD_SUFFIX",
    "GradientRegistry",
    "GradientSlice",
    "add_gradient_operators",
    "get_backward_pass",
]

AUTOGEN_GRAD_SUFFIX = "_autogen_grad"
IS_AUTO_GEN_SUM_OPS_TAG = "is_auto_gen_sum_ops"

Grad = Any  # str | GradientSlice | None


# -- the registry API of caffe2.python.core ----------------------------------------


class GradientRegistry:
    """Caffe2's ``core.GradientRegistry``: one op's gradient, plus Python-side makers.

    Makers registered on an op's schema (``framework.ops.gradient``) come first;
    ``RegisterGradient`` adds a Python maker ``f(op_def, g_output) -> (ops, g_input)``
    used for op types whose schema has none (Caffe2 asks C++ first, then Python).

    >>> from framework.core import CreateOperator
    >>> ops, g_in = GradientRegistry.GetGradientForOp(CreateOperator("Relu", ["X"], ["Y"]), ["Y_grad"])
    >>> [o.type for o in ops], g_in
    (['ReluGradient'], ['X_grad'])
    """

    gradient_registry_: dict[str, Callable[..., Any]] = {}

    @classmethod
    def RegisterGradient(cls, op_type: str) -> Callable[[Callable], Callable]:  # noqa: N802
        def wrapper(func: Callable) -> Callable:
            cls.gradient_registry_[op_type] = func
            return func

        return wrapper

    @classmethod
    def GetGradientForOp(cls, op: OperatorDef, g_output: Sequence[Grad]) -> tuple[list[OperatorDef], list[Grad]]:  # noqa: N802
        g_output = [_as_grad(g) for g in g_output]
        try:
            ops, g_input = get_gradient_for_op(op, g_output)
        except FrameworkError as e:
            maker = cls.gradient_registry_.get(op.type)
            if maker is None:
                raise GradientError(f"cannot make the gradient of {describe_op(op)}: {e}") from e
            ops, g_input = maker(op, g_output)
            if ops is None:
                ops = []
            elif isinstance(ops, OperatorDef):
                ops = [ops]
            ops = list(ops)
            g_input = [_as_grad(g) for g in g_input]
            for o in ops:
                o.is_gradient_op = True
        return ops, g_input

    @classmethod
    def GetBackwardPass(  # noqa: N802
        cls, operators: Iterable[OperatorDef], ys: Any, ys_generate_gradient: bool = False
    ) -> tuple[list[OperatorDef], dict[str, Grad]]:
        return get_backward_pass(operators, ys)


def _as_grad(g: Any) -> Grad:
    """None, a name (str/BlobReference/bytes) or a GradientSlice of names."""
    if g is None:
        return None
    if isinstance(g, GradientSlice):
        return GradientSlice(str(g.indices), str(g.values))
    if isinstance(g, bytes):
        return g.decode()
    if isinstance(g, tuple) and len(g) == 2:
        return GradientSlice(str(g[0]), str(g[1]))
    return str(g)


# -- public entry points ------------------------------------------------------------


def get_backward_pass(operators: Iterable[OperatorDef], ys: Any) -> tuple[list[OperatorDef], dict[str, Grad]]:
    """Gradient ops for the forward ``operators`` and the map blob -> gradient.

    ``ys``: a list of blobs (seeded with 1.0 by an added ConstantFill) or a dict
    ``{blob: gradient name, GradientSlice or None}``. Nothing is modified.
    Raises GradientError for missing makers, version conflicts and illegal
    accumulations.
    """
    return _BackwardPass(list(operators)).run(ys)


def add_gradient_operators(net_def: NetDef, ys: Any, skip: int = 0) -> dict[str, Grad]:
    """Append the backward pass of ``net_def.op[skip:]`` to ``net_def`` (in place).

    Returns ``{blob: gradient blob name or GradientSlice}`` for every blob that
    received a gradient (the seeds included).
    """
    ops, grads = get_backward_pass(list(net_def.op)[skip:], ys)
    net_def.op.extend(ops)
    return grads


# -- the pass ---------------------------------------------------------------------------


@dataclass
class _OpSSA:
    op: OperatorDef
    in_versions: dict[str, int]
    out_versions: dict[str, int]


@dataclass
class _Dense:
    """One producer of a dense gradient: ``op.output[index]`` (op None: passed through)."""

    op: OperatorDef | None
    index: int
    grad: str
    device: DeviceOption | None


@dataclass
class _Sparse:
    """One producer of a sparse gradient: ops writing the indices and the values parts."""

    op_i: OperatorDef | None
    idx_i: int
    op_v: OperatorDef | None
    idx_v: int
    grad: GradientSlice
    device: DeviceOption | None


def _index_in(g_list: Sequence[Grad], name: str) -> int | None:
    for i, g in enumerate(g_list):
        if g is None:
            continue
        if isinstance(g, GradientSlice):
            if name in (g.indices, g.values):
                return i
        elif g == name:
            return i
    return None


def _same_device(a: DeviceOption | None, b: DeviceOption | None) -> bool:
    a = a or DeviceOption()
    b = b or DeviceOption()
    return a.device_type == b.device_type and a.device_id == b.device_id


class _BackwardPass:
    """Caffe2's IR: versions of the forward pass, then the backward walk."""

    def __init__(self, operators: list[OperatorDef]) -> None:
        self.ssa: list[_OpSSA] = []
        self.frontier: dict[str, int] = {}
        self.input_usages: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        self.gradient_frontier: dict[str, int] = {}
        self.generators: dict[str, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
        self.out_history: dict[str, list[tuple[int, OperatorDef, int]]] = defaultdict(list)
        self.in_history: dict[str, list[tuple[int, OperatorDef, int]]] = defaultdict(list)
        self.stopped: set[tuple[str, int]] = set()  # blob versions written by no-gradient ops
        self.dead: list[tuple[OperatorDef, int]] = []  # gradient-op outputs that feed only those
        for op in operators:
            self._play(op)
        self._check_stop_gradients()

    # -- forward replay ------------------------------------------------------------
    def _play(self, op: OperatorDef) -> None:
        idx = len(self.ssa)
        ins: dict[str, int] = {}
        for s in op.input:
            v = self.frontier.setdefault(s, 0)
            ins[s] = v
            self.input_usages[s][v].append(idx)
            self.in_history[s].append((idx, op, v))
        outs: dict[str, int] = {}
        for s in op.output:
            if s in self.frontier:
                self.frontier[s] += 1
            else:
                self.frontier[s] = 0
            outs[s] = self.frontier[s]
            self.out_history[s].append((idx, op, self.frontier[s]))
        if _has_no_gradient(op.type):
            self.stopped.update(outs.items())
        self.ssa.append(_OpSSA(op, ins, outs))

    def _check_stop_gradients(self) -> None:
        for k, s in enumerate(self.ssa):
            if s.op.type == "StopGradient" and s.op.output[0] not in self.input_usages:
                raise GradientError(
                    f"{describe_op(s.op, k)}: StopGradient's output '{s.op.output[0]}' is orphan: "
                    "no later op reads it, so it stops nothing. You typically want the same blob "
                    "as input and output (StopGradient(X) -> X)"
                )

    def _history(self, name: str, which: str) -> str:
        hist = self.out_history[name] if which == "out" else self.in_history[name]
        lines = [f"version history of blob '{name}' ({'written' if which == 'out' else 'read'} by):"]
        for idx, op, v in hist:
            lines.append(f"  version {v} {'<-' if which == 'out' else '->'} {describe_op(op, idx)}")
        return "\n".join(lines)

    # -- legality of a gradient op's input ------------------------------------------
    def _check_input(self, name: str, g_output: Sequence[Grad], fwd_idx: int, local: set[str], grad_op) -> None:
        s = self.ssa[fwd_idx]
        where = describe_op(s.op, fwd_idx)
        k = _index_in(g_output, name)
        if k is not None:
            out = s.op.output[k]
            if s.out_versions[out] != self.gradient_frontier.get(out):
                raise GradientError(
                    f"gradient of {where}: gradient blob '{name}' should be the gradient of version "
                    f"{s.out_versions[out]} of '{out}', but the gradient computed so far is of version "
                    f"{self.gradient_frontier.get(out)}. Maybe the same output blob is written by two ops?\n"
                    + self._history(out, "out")
                )
        elif name in s.out_versions:
            if self.frontier[name] != s.out_versions[name]:
                raise GradientError(
                    f"gradient of {where}: {grad_op.type} needs output '{name}' at version "
                    f"{s.out_versions[name]}, but a later op overwrote it (the net leaves version "
                    f"{self.frontier[name]}). Do not overwrite it in place, or copy it first.\n"
                    + self._history(name, "out")
                )
        elif name in s.in_versions:
            if self.frontier[name] != s.in_versions[name]:
                raise GradientError(
                    f"gradient of {where}: {grad_op.type} needs input '{name}' at version "
                    f"{s.in_versions[name]}, but a later op overwrote it (the net leaves version "
                    f"{self.frontier[name]}). Maybe the blob was overwritten by an in-place op?\n"
                    + self._history(name, "out")
                )
        elif name not in local:
            raise GradientError(
                f"gradient of {where}: {grad_op.type} reads blob '{name}', which is neither an input, "
                "output or output gradient of the forward op nor produced by its other gradient ops"
            )

    def _record_generators(self, fwd_idx: int, grad_ops: list[OperatorDef], g_output, g_input) -> None:
        s = self.ssa[fwd_idx]
        local: set[str] = set()
        sparse_parts: dict[tuple[str, int], list[_Sparse]] = defaultdict(list)
        for gop in grad_ops:
            for name in gop.input:
                self._check_input(name, g_output, fwd_idx, local, gop)
            local.update(gop.output)
            for i, out in enumerate(gop.output):
                k = _index_in(g_input, out)
                if k is None:
                    continue
                x = s.op.input[k]
                v = s.in_versions[x]
                g = g_input[k]
                if (x, v) in self.stopped:
                    self.dead.append((gop, i))
                if isinstance(g, GradientSlice):
                    part = (
                        _Sparse(gop, i, None, 0, g, gop.device_option)
                        if g.indices == out
                        else _Sparse(None, 0, gop, i, g, gop.device_option)
                    )
                    sparse_parts[(x, v)].append(part)
                else:
                    self.generators[x][v].append(_Dense(gop, i, g, gop.device_option))
        for (x, v), parts in sparse_parts.items():
            merged = parts[0]
            for p in parts[1:]:
                merged = _Sparse(
                    merged.op_i or p.op_i,
                    merged.idx_i + p.idx_i,
                    merged.op_v or p.op_v,
                    merged.idx_v + p.idx_v,
                    merged.grad,
                    merged.device,
                )
            self.generators[x][v].append(merged)
        # Gradients passed straight through (SetDense/SetSparse) have no producing op.
        for k, g in enumerate(g_input):
            if g is None:
                continue
            x = s.op.input[k]
            v = s.in_versions[x]
            if isinstance(g, GradientSlice):
                if g.indices not in local and g.values not in local:
                    self.generators[x][v].append(_Sparse(None, 0, None, 0, g, s.op.device_option))
            elif g not in local:
                self.generators[x][v].append(_Dense(None, 0, g, s.op.device_option))
        for k, g in enumerate(g_input):
            if g is not None:
                x = s.op.input[k]
                self.gradient_frontier[x] = s.in_versions[x]

    # -- accumulation ---------------------------------------------------------------------
    def _accumulate(self, fwd_idx: int) -> tuple[list[OperatorDef], dict[str, Grad]]:
        s = self.ssa[fwd_idx]
        sum_ops: list[OperatorDef] = []
        grad_map: dict[str, Grad] = {}
        seen: set[str] = set()
        for x in s.op.input:
            if x in seen:
                continue
            seen.add(x)
            v = s.in_versions[x]
            usage = self.input_usages[x][v]
            if len(usage) <= 1 or usage[0] != fwd_idx:
                continue  # a single consumer, or earlier consumers still to come
            gens = self.generators[x][v]
            if len({type(g) for g in gens}) > 1:
                raise GradientError(
                    f"gradients of '{x}' (version {v}, read by {self._consumers(usage)}): automatic "
                    "aggregation of a mix of sparse and dense gradients is not supported yet"
                )
            if len(gens) < 2:
                continue
            devices = [g.device for g in gens]
            if not all(_same_device(d, devices[0]) for d in devices[1:]):
                raise GradientError(
                    f"gradients of '{x}' (version {v}, read by {self._consumers(usage)}): "
                    "not all gradient ops have the same device option"
                )
            base = self._sum_output_name(gens, x)
            if isinstance(gens[0], _Dense):
                ops, g = self._dense_sum(gens, base)
            else:
                ops, g = self._sparse_sum(gens, base)
            for op in ops:
                if gens[0].device is not None:
                    op.device_option.CopyFrom(gens[0].device)
                op.device_option.extra_info.append(f"{IS_AUTO_GEN_SUM_OPS_TAG}:1")
            sum_ops.extend(ops)
            grad_map[x] = g
        return sum_ops, grad_map

    def _consumers(self, usage: list[int]) -> str:
        names = [describe_op(self.ssa[i].op, i) if i < len(self.ssa) else "the seed" for i in usage]
        return ", ".join(names)

    @staticmethod
    def _sum_output_name(gens: list[Any], x: str) -> str:
        for g in gens:
            if isinstance(g, _Dense):
                if g.op is not None:
                    return g.op.output[g.index]
            else:
                if g.op_i is not None:
                    return _strip(g.op_i.output[g.idx_i], "_indices")
                if g.op_v is not None:
                    return _strip(g.op_v.output[g.idx_v], "_values")
        return x + "_grad"

    @staticmethod
    def _rename(op: OperatorDef, idx: int, k: int) -> str:
        op.output[idx] = f"_{op.output[idx]}_autosplit_{k}"
        return op.output[idx]

    def _dense_sum(self, gens: list[_Dense], base: str) -> tuple[list[OperatorDef], str]:
        inputs: list[str] = []
        k = 0
        first = True
        for g in gens:
            if g.op is not None:
                if first:
                    first = False
                    inputs.append(g.op.output[g.index])
                else:
                    inputs.append(self._rename(g.op, g.index, k))
                    k += 1
            else:
                _check_conflict(base, g.grad)
                inputs.append(g.grad)
        if base in inputs:  # Sum works in place only with its first input
            j = inputs.index(base)
            inputs[0], inputs[j] = inputs[j], inputs[0]
        return [OperatorDef(type="Sum", input=inputs, output=[base])], base

    def _sparse_sum(self, gens: list[_Sparse], base: str) -> tuple[list[OperatorDef], GradientSlice]:
        idx_in: list[str] = []
        val_in: list[str] = []
        ki = kv = 0
        for g in gens:
            if g.op_i is not None:
                idx_in.append(self._rename(g.op_i, g.idx_i, ki))
                ki += 1
            else:
                _check_conflict(base, g.grad.indices)
                idx_in.append(g.grad.indices)
            if g.op_v is not None:
                val_in.append(self._rename(g.op_v, g.idx_v, kv))
                kv += 1
            else:
                _check_conflict(base, g.grad.values)
                val_in.append(g.grad.values)
        out = GradientSlice(base + "_indices_concat", base + "_values_concat")
        ops = [
            OperatorDef(type="Concat", input=idx_in, output=[out.indices, base + "_indices_concat_split"]),
            OperatorDef(type="Concat", input=val_in, output=[out.values, base + "_values_concat_split"]),
        ]
        for op in ops:
            op.arg.append(make_argument("axis", 0))
        return ops, out

    # -- the walk ------------------------------------------------------------------------
    def _seeds(self, ys: dict[str, Grad]) -> tuple[dict[str, Grad], list[OperatorDef]]:
        to_grad: dict[str, Grad] = {}
        ops: list[OperatorDef] = []
        for y, g in ys.items():
            seed = None
            if g is None:
                seed = OperatorDef(type="ConstantFill", input=[y], output=[y + AUTOGEN_GRAD_SUFFIX])
                seed.arg.append(make_argument("value", 1.0))
                ops.append(seed)
                g = seed.output[0]
            to_grad[y] = g
            if seed is not None:
                self.generators[y][self.frontier.get(y, 0)].append(_Dense(seed, 0, g, seed.device_option))
        return to_grad, ops

    def run(self, ys: Any) -> tuple[list[OperatorDef], dict[str, Grad]]:
        if isinstance(ys, dict):
            ys = {str(k): _as_grad(v) for k, v in ys.items()}
        elif isinstance(ys, (list, tuple)):
            ys = {str(y): None for y in ys}
        elif isinstance(ys, (str, bytes)) or hasattr(ys, "Net"):
            ys = {str(ys if not isinstance(ys, bytes) else ys.decode()): None}
        else:
            raise TypeError(f"ys should be a list or a dict of blobs, got {type(ys).__name__}")
        for y in ys:
            if y not in self.frontier:
                raise GradientError(f"cannot take the gradient of '{y}': no op of the net reads or writes it")
            self.gradient_frontier[y] = self.frontier[y]
            self.input_usages[y][self.frontier[y]].append(len(self.ssa))

        all_to_grad, all_ops = self._seeds(ys)
        for idx in reversed(range(len(self.ssa))):
            new, ops = self._grads_for_op(idx, all_to_grad)
            all_to_grad.update(new)
            all_ops.extend(ops)
            sums, grad_map = self._accumulate(idx)
            all_to_grad.update(grad_map)
            all_ops.extend(sums)
        all_ops, removed = self._prune_dead(all_ops)
        return all_ops, {k: v for k, v in all_to_grad.items() if v is not None and v not in removed}

    def _prune_dead(self, ops: list[OperatorDef]) -> tuple[list[OperatorDef], set[str]]:
        """Drop dead gradient outputs nobody reads: trailing ones if the schema allows, or the whole op."""
        if not self.dead:
            return ops, set()
        from framework.ops.registry import get_schema, has_op

        read = {b for op in ops for b in op.input}
        dead_names: dict[int, set[str]] = defaultdict(set)
        for gop, i in self.dead:
            if gop.output[i] not in read:
                dead_names[id(gop)].add(gop.output[i])
        removed: set[str] = set()
        kept = []
        for op in ops:
            names = dead_names.get(id(op))
            if names and set(op.output) <= names:
                removed.update(op.output)
                continue
            if names and has_op(op.type):
                schema = get_schema(op.type)
                while len(op.output) > 1 and op.output[-1] in names and schema.output_count_ok(len(op.output) - 1):
                    removed.add(op.output[-1])
                    del op.output[-1]
            kept.append(op)
        return kept, removed

    def _grads_for_op(self, idx: int, to_grad: dict[str, Grad]) -> tuple[dict[str, Grad], list[OperatorDef]]:
        op = self.ssa[idx].op
        g_output = [to_grad.get(name) for name in op.output]
        if all(g is None for g in g_output) and op.type != "ZeroGradient":
            return {}, []
        try:
            grad_ops, g_input = GradientRegistry.GetGradientForOp(op, g_output)
        except GradientError as e:
            raise GradientError(f"while adding the gradient of {describe_op(op, idx)}: {e}") from e
        if op.debug_info:  # run errors of a gradient op point at the forward op's creation site
            for gop in grad_ops:
                if not gop.debug_info:
                    gop.debug_info = (
                        f"{op.debug_info}\n  (gradient of that {op.type} op, added by AddGradientOperators)"
                    )
        self._record_generators(idx, grad_ops, g_output, g_input)
        new: dict[str, Grad] = {}
        outs = set(op.output)
        for name, g in zip(op.input, g_input):
            # Keep an existing gradient unless this op also rewrote the blob.
            if g is not None or name not in to_grad or name in outs:
                new[name] = g
        return new, grad_ops


def _has_no_gradient(op_type: str) -> bool:
    from framework.ops.gradient import NO_GRADIENT
    from framework.ops.registry import get_schema, has_op

    return has_op(op_type) and get_schema(op_type).gradient is NO_GRADIENT


def _strip(s: str, suffix: str) -> str:
    return s[: -len(suffix)] if s.endswith(suffix) else s


def _check_conflict(base: str, g: str) -> None:
    if base == g:
        raise GradientError(
            f"cannot accumulate gradients into '{base}': a gradient passed through without an op already has that name"
        )
