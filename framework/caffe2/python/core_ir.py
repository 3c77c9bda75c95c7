"""``IR``: Caffe2's ``core.IR`` object, the SSA view of a list of forward ops plus its backward pass.

The work is done by the one backward pass of ``framework.net.backward`` (versions from
``framework.net.ssa``); this class exposes it under Caffe2's names for code that drives the IR itself:

- ``IR(operators)`` plays the ops: ``ssa[i]`` is ``(op, in_versions, out_versions)``, ``frontier`` the
  versions the ops leave, ``input_usages[blob][version]`` the indices of the ops reading a version;
- ``GetBackwardPass(ys)`` returns ``(gradient ops, {blob: gradient})`` exactly as Caffe2's IR does
  (dead gradient ops after a StopGradient are kept); afterwards ``gradient_frontier`` and
  ``gradient_generators`` hold its bookkeeping.
"""

from __future__ import annotations

from typing import Any, Iterable

from framework.net.accumulation import IS_AUTO_GEN_SUM_OPS_TAG, ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG
from framework.net.backward import AUTOGEN_GRAD_SUFFIX, _BackwardPass
from framework.proto.framework_pb2 import OperatorDef

__all__ = ["IR"]


class IR:
    """The SSA form of ``operators`` (see the module doc)."""

    AUTOGEN_GRAD_SUFFIX = AUTOGEN_GRAD_SUFFIX
    IS_AUTO_GEN_SUM_OPS_TAG = IS_AUTO_GEN_SUM_OPS_TAG
    ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG = ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG

    def __init__(self, operators: Iterable[OperatorDef]) -> None:
        self._ops = list(operators)
        self._pass = _BackwardPass(self._ops)

    @property
    def ssa(self) -> list[tuple[OperatorDef, dict[str, int], dict[str, int]]]:
        return [(s.op, s.in_versions, s.out_versions) for s in self._pass.fwd.ssa]

    @property
    def frontier(self) -> dict[str, int]:
        return self._pass.fwd.frontier

    @property
    def input_usages(self) -> Any:
        return self._pass.fwd.input_usages

    @property
    def gradient_frontier(self) -> dict[str, int]:
        return self._pass.gradient_frontier

    @property
    def gradient_generators(self) -> Any:
        return self._pass.generators

    def Play(self, op: OperatorDef) -> None:
        """Add one more forward op (its versions follow those already played)."""
        self._ops.append(op)
        self._pass = _BackwardPass(self._ops)

    def GetBackwardPass(self, ys: Any) -> tuple[list[OperatorDef], dict[Any, Any]]:
        """Gradient ops and ``{BlobReference: gradient}`` for ``ys`` (a list, or a dict blob -> gradient)."""
        from framework.caffe2.python.builder import BlobReference
        from framework.ops.gradient import GradientSlice

        ops, grads = self._pass.run(ys, prune_dead=False)
        out: dict[Any, Any] = {}
        for key, val in grads.items():
            if isinstance(val, GradientSlice):
                val = GradientSlice(BlobReference(val.indices), BlobReference(val.values))
            else:
                val = BlobReference(val)
            out[BlobReference(key)] = val
        return ops, out
