"""``Predictor``: an init net run once and a predict net run per call, in their own workspace.

As Caffe2's ``workspace.Predictor(init_net, predict_net)``: the nets may be
NetDefs, serialized bytes, text or file paths. The predictor's workspace is a
child of ``parent`` (the current workspace for ``workspace.Predictor``), so
parent blobs stay visible but are never written: whatever the init and predict
nets write, and every input fed to ``run``, lives in the predictor's own
workspace (a parameter the init net does not create is read from the parent). ``run(list)`` feeds the
arrays to ``external_input[0], [1], ...``; ``run(dict)`` feeds them by name;
both return the ``external_output`` arrays, in order.

Only the declared outputs are observable through a Predictor, so by default (``optimize=True``) the
predict net goes through the inference optimization pass (framework/net/optimize.py: BN folded into
convs, Relu/Sum fused, test-mode Dropout dropped, buffers shared by liveness); the net that runs is
``optimized_net``. Parameters the pass folded away are removed from the predictor's workspace.
With several intra-op threads, a batch is split over them, one copy of the net per thread.
"""

from __future__ import annotations

import logging
from typing import Any

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace

__all__ = ["Predictor"]

log = logging.getLogger("framework.predictor")


class Predictor:
    """See module doc."""

    def __init__(self, init_net: Any, predict_net: Any, parent: Workspace | None = None, optimize: bool = True) -> None:
        from framework.net.graph import load_net_def

        init = self._init = load_net_def(init_net)
        self.predict_net = load_net_def(predict_net)
        if not self.predict_net.name:
            self.predict_net.name = "predict"
        self.workspace = Workspace(parent=parent, name="predictor")
        # Everything the nets write is the predictor's own: a parent blob of the same name (the caller's
        # trained parameter, an activation) is never written. Parameters the init net does not create
        # are read from the parent.
        made = {o for op in init.op for o in op.output}
        for name in made | {o for op in self.predict_net.op for o in op.output}:
            self.workspace.create_local_blob(name)
        from framework.net.base import instantiate

        # ``init`` is our own parse or copy: handed over, not copied again (a zoo init net is 100+ MB)
        instantiate(init, self.workspace, owned=True).run()
        del init  # (the weights live in the workspace now)
        for name in self.predict_net.external_input:
            if name not in made and (parent is None or not parent.has_blob(name)):
                self.workspace.create_local_blob(name)
        net = self.predict_net
        if optimize:  # only the declared outputs are observable through a Predictor
            from framework.net.optimize import optimize_inference

            net = optimize_inference(net, self.workspace, outputs=self.predict_net.external_output)
            used = {b for op in net.op for b in (*op.input, *op.output)} | set(net.external_output)
            for name in made - used:  # parameters folded away: free the predictor's own copies
                self.workspace.remove_blob(name)
        self.optimized_net = net
        self.net = self.workspace.create_net(net)
        from framework.predictor.batch_split import BatchSplitRunner

        data = [b for b in self.predict_net.external_input if b not in made and b in self.workspace.local_blobs()]
        self._split = BatchSplitRunner(self.workspace, net, data, list(self.predict_net.external_output))
        self._first_run = True

    def _run_first(self) -> None:
        """The first run, reporting (one INFO line on the ``framework.predictor`` logger) the seconds it
        spent compiling or loading compiled kernels: tens of seconds without numba's cache, which
        ``framework warmup`` fills ahead of use."""
        from framework.kernels import window_jit

        before = window_jit.compile_seconds()
        self._split.run(self.net)
        self._first_run = False
        spent = window_jit.compile_seconds() - before
        if spent > 0:
            log.info(
                "Predictor '%s': the first run spent %.2f s compiling or loading kernels (`framework warmup` "
                "compiles them ahead of use)",
                self.predict_net.name,
                spent,
            )

    def run_net(self) -> None:
        """Run the predict net on the inputs already in the workspace; with several intra-op threads
        (framework.set_num_threads) a batch is split over them (framework/predictor/batch_split.py).
        An error of the optimized net is reported in terms of the predict net as written."""
        try:
            if self._first_run:
                self._run_first()
            else:
                self._split.run(self.net)
        except FrameworkError as e:
            if self.optimized_net is self.predict_net:
                raise
            from framework.net.optimize import explain_failure

            err = explain_failure(self.workspace, self.predict_net, e, init=self._init)
            raise err from err.__cause__

    @property
    def input_names(self) -> list[str]:
        return list(self.predict_net.external_input)

    @property
    def output_names(self) -> list[str]:
        return list(self.predict_net.external_output)

    def run(self, inputs: Any) -> list[Any]:
        """Feed ``inputs`` (list: positional over external_input; dict: by name), run, fetch outputs."""
        names = self.input_names
        if isinstance(inputs, dict):
            unknown = [k for k in inputs if k not in names]
            if unknown:
                raise FrameworkError(
                    f"Predictor: {unknown} are not inputs of net '{self.predict_net.name}' (inputs: {names})"
                )
            items = list(inputs.items())
        else:
            inputs = list(inputs)
            if len(inputs) > len(names):
                raise FrameworkError(
                    f"Predictor: {len(inputs)} inputs given, net '{self.predict_net.name}' has {len(names)}: {names}"
                )
            items = list(zip(names, inputs))
        local = set(self.workspace.local_blobs())
        if any(name not in local for name, _ in items):
            # A fed input the net had bound to a parent blob of that name: make it ours and bind again,
            # so the caller's blob is never written (once per new name).
            for name, _ in items:
                self.workspace.create_local_blob(name)
            self.net = self.workspace.create_net(self.optimized_net, overwrite=True)
        for name, value in items:
            self.workspace.feed_blob(name, value)
        self.run_net()
        return [self.workspace.fetch_blob(name) for name in self.output_names]
