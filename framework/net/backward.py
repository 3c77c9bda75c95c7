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
  ``StopGradient(data, data)`` idiom, or data from a reader) is dead: the
  gradient op drops that output when its schema allows (FCGradient without
  dX), and the returned map does not list it. A gradient op all of whose
  outputs are dead is dropped whole only behind ``StopGradient``; behind any
  other no-gradient op (a fill) it stays and its gradient is returned, as
  Caffe2 returns it. (Caffe2 trims nothing: the trimming saves the work.)

The versions come from ``framework.net.ssa``; the sums from ``framework.net.accumulation``.

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
from typing import Any, Callable, Iterable, Sequence

from framework.errors import FrameworkError, GradientError, SchemaError
from framework.net.accumulation import IS_AUTO_GEN_SUM_OPS_TAG, DenseGrad, Generators, SparseGrad, accumulate  # noqa: F401
from framework.net.dataflow import DataFlow
from framework.net.ssa import ForwardVersions
from framework.ops.gradient import GradientSlice, get_gradient_for_op
from framework.ops.operator import describe_op
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef, OperatorDef

__all__ = [
    "AUTOGEN_GRAD_SUFFIX",
    "GradientRegistry",
    "GradientSlice",
    "add_gradient_operators",
    "get_backward_pass",
]

AUTOGEN_GRAD_SUFFIX = "_autogen_grad"

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
                what = "the op does not match its schema: " if isinstance(e, SchemaError) else ""
                raise GradientError(f"cannot make the gradient of {describe_op(op)}: {what}{e}") from e
            ops, g_input = maker(op, g_output)
            if ops is None:
                ops = []
            elif isinstance(ops, OperatorDef):
                ops = [ops]
            ops = list(ops)
            # Ops of Python makers are returned as the maker built them (not flagged is_gradient_op), as in Caffe2.
            g_input = [_as_grad(g) for g in g_input]
        return ops, g_input

    @classmethod
    def GetBackwardPass(  # noqa: N802
        cls, operators: Iterable[OperatorDef], ys: Any, ys_generate_gradient: bool = False
    ) -> tuple[list[OperatorDef], dict[str, Grad]]:
        """Caffe2's IR backward pass exactly: dead gradient ops (feeding only stopped blobs) are kept."""
        return get_backward_pass(operators, ys, prune_dead=False)


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


def get_backward_pass(
    operators: Iterable[OperatorDef], ys: Any, prune_dead: bool = True
) -> tuple[list[OperatorDef], dict[str, Grad]]:
    """Gradient ops for the forward ``operators`` and the map blob -> gradient.

    ``ys``: a list of blobs (seeded with 1.0 by an added ConstantFill) or a dict
    ``{blob: gradient name, GradientSlice or None}``. Nothing is modified.
    ``prune_dead``: drop gradient outputs (or whole gradient ops) that only feed blob versions
    written by a no-gradient op (see the module doc); Caffe2's ``GetBackwardPass`` keeps them.
    Raises GradientError for missing makers, version conflicts and illegal accumulations.
    """
    return _BackwardPass(list(operators)).run(ys, prune_dead)


def add_gradient_operators(net_def: NetDef, ys: Any, skip: int = 0) -> dict[str, Grad]:
    """Append the backward pass of ``net_def.op[skip:]`` to ``net_def`` (in place).

    Returns ``{blob: gradient blob name or GradientSlice}`` for every blob that
    received a gradient (the seeds included).
    """
    ops, grads = get_backward_pass(list(net_def.op)[skip:], ys)
    net_def.op.extend(ops)
    return grads


# -- the pass ---------------------------------------------------------------------------


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


class _BackwardPass:
    """Caffe2's IR: versions of the forward pass, then the backward walk."""

    def __init__(self, operators: list[OperatorDef]) -> None:
        self.fwd = ForwardVersions(operators)
        self.gradient_frontier: dict[str, int] = {}
        self.generators: Generators = defaultdict(lambda: defaultdict(list))
        self.dead: list[tuple[OperatorDef, int]] = []  # gradient-op outputs that feed only stopped versions
        self.droppable: list[OperatorDef] = []  # gradient ops with an output that feeds only StopGradient

    # -- legality of a gradient op's input ------------------------------------------
    def _check_input(self, name: str, g_output: Sequence[Grad], fwd_idx: int, local: set[str], grad_op) -> None:
        s = self.fwd.ssa[fwd_idx]
        where = describe_op(s.op, fwd_idx)
        k = _index_in(g_output, name)
        if k is not None:
            out = s.op.output[k]
            if s.out_versions[out] != self.gradient_frontier.get(out):
                raise GradientError(
                    f"gradient of {where}: gradient blob '{name}' should be the gradient of version "
                    f"{s.out_versions[out]} of '{out}', but the gradient computed so far is of version "
                    f"{self.gradient_frontier.get(out)}. Maybe the same output blob is written by two ops?\n"
                    + self.fwd.history(out, "out")
                )
        elif name in s.out_versions or name in s.in_versions:
            role, hint = ("output", "Do not overwrite it in place, or copy it first.")
            if name not in s.out_versions:
                role, hint = ("input", "Maybe the blob was overwritten by an in-place op?")
            want = s.out_versions[name] if role == "output" else s.in_versions[name]
            if self.fwd.frontier[name] != want:
                raise GradientError(
                    f"gradient of {where}: {grad_op.type} needs {role} '{name}' at version {want}, but a later "
                    f"op overwrote it (the net leaves version {self.fwd.frontier[name]}). {hint}\n"
                    + self.fwd.history(name, "out")
                )
        elif name not in local:
            raise GradientError(
                f"gradient of {where}: {grad_op.type} reads blob '{name}', which is neither an input, "
                "output or output gradient of the forward op nor produced by its other gradient ops"
            )

    def _record_generators(self, fwd_idx: int, grad_ops: list[OperatorDef], g_output, g_input) -> None:
        s = self.fwd.ssa[fwd_idx]
        local: set[str] = set()
        sparse_parts: dict[tuple[str, int], list[SparseGrad]] = defaultdict(list)
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
                if (x, v) in self.fwd.stopped:
                    self.dead.append((gop, i))
                if (x, v) in self.fwd.stop_gradient:
                    self.droppable.append(gop)
                if isinstance(g, GradientSlice):
                    part = (
                        SparseGrad(gop, i, None, 0, g, gop.device_option)
                        if g.indices == out
                        else SparseGrad(None, 0, gop, i, g, gop.device_option)
                    )
                    sparse_parts[(x, v)].append(part)
                else:
                    self.generators[x][v].append(DenseGrad(gop, i, g, gop.device_option))
        for (x, v), parts in sparse_parts.items():
            merged = parts[0]
            for p in parts[1:]:
                merged = SparseGrad(
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
                    self.generators[x][v].append(SparseGrad(None, 0, None, 0, g, s.op.device_option))
            elif g not in local:
                self.generators[x][v].append(DenseGrad(None, 0, g, s.op.device_option))
        for k, g in enumerate(g_input):
            if g is not None:
                x = s.op.input[k]
                self.gradient_frontier[x] = s.in_versions[x]

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
                self.generators[y][self.fwd.frontier.get(y, 0)].append(DenseGrad(seed, 0, g, seed.device_option))
        return to_grad, ops

    def run(self, ys: Any, prune_dead: bool = True) -> tuple[list[OperatorDef], dict[str, Grad]]:
        if isinstance(ys, dict):
            ys = {str(k): _as_grad(v) for k, v in ys.items()}
        elif isinstance(ys, (list, tuple)):
            ys = {str(y): None for y in ys}
        elif isinstance(ys, (str, bytes)) or hasattr(ys, "Net"):
            ys = {str(ys if not isinstance(ys, bytes) else ys.decode()): None}
        else:
            raise TypeError(f"ys should be a list or a dict of blobs, got {type(ys).__name__}")
        for y in ys:
            if y not in self.fwd.frontier:
                raise GradientError(f"cannot take the gradient of '{y}': no op of the net reads or writes it")
            self.gradient_frontier[y] = self.fwd.frontier[y]
            self.fwd.input_usages[y][self.fwd.frontier[y]].append(len(self.fwd.ssa))

        all_to_grad, all_ops = self._seeds(ys)
        for idx in reversed(range(len(self.fwd.ssa))):
            new, ops = self._grads_for_op(idx, all_to_grad)
            all_to_grad.update(new)
            all_ops.extend(ops)
            sums, grad_map = accumulate(self.fwd, self.generators, idx)
            all_to_grad.update(grad_map)
            all_ops.extend(sums)
        all_ops, removed = self._prune_dead(all_ops) if prune_dead else (all_ops, set())
        return all_ops, {k: v for k, v in all_to_grad.items() if v is not None and v not in removed}

    def _prune_dead(self, ops: list[OperatorDef]) -> tuple[list[OperatorDef], set[str]]:
        """Drop dead gradient outputs nobody reads: trailing ones if the schema allows, or the whole op
        when all its outputs are dead and one feeds StopGradient."""
        if not self.dead:
            return ops, set()
        from framework.ops.registry import get_schema, has_op

        flow = DataFlow(ops)
        dead_names: dict[int, set[str]] = defaultdict(set)
        for gop, i in self.dead:
            if not flow.is_read(gop.output[i]):
                dead_names[id(gop)].add(gop.output[i])
        droppable = {id(gop) for gop in self.droppable}
        removed: set[str] = set()
        kept = []
        for op in ops:
            names = dead_names.get(id(op))
            if names and set(op.output) <= names and id(op) in droppable:
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
        op = self.fwd.ssa[idx].op
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
