"""SimpleNet: every op in execution order on the caller's thread."""

from __future__ import annotations

from operator import length_hint

from framework.net.base import NetBase, register_net_type


@register_net_type("simple", "async_simple", "singlethread_async")
class SimpleNet(NetBase):
    """One thread, a flat loop over bound callables (compiled closures where ops offer them)."""

    def _run(self) -> None:
        program = self.program
        fns = program.callables()
        it = iter(fns)
        try:
            for f in it:
                f()
        except Exception as e:
            # The iterator knows how far it got: no per-op bookkeeping in the loop.
            raise self._fail(len(fns) - length_hint(it) - 1, e) from e
        if fns is program.slow:
            program.compile()
