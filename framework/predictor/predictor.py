"""``Predictor``: an init net run once and a predict net run per call, in their own workspace.

As Caffe2's ``workspace.Predictor(init_net, predict_net)``: the nets may be
NetDefs, serialized bytes, text or file paths. The predictor's workspace is a
child of ``parent`` (the current workspace for ``workspace.Predictor``), so
parent blobs stay visible but are never written: every external input of the
predict net lives in the predictor's own workspace. ``run(list)`` feeds the
arrays to ``external_input[0], [1], ...``; ``run(dict)`` feeds them by name;
both return the ``external_output`` arrays, in order.
"""

from __future__ import annotations

from typing import Any

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace

__all__ = ["Predictor"]


class Predictor:
    """See module doc."""

    def __init__(self, init_net: Any, predict_net: Any, parent: Workspace | None = None) -> None:
        from framework.net.graph import load_net_def

        init = load_net_def(init_net)
        self.predict_net = load_net_def(predict_net)
        if not self.predict_net.name:
            self.predict_net.name = "predict"
        self.workspace = Workspace(parent=parent, name="predictor")
        self.workspace.run_net_once(init)
        for name in self.predict_net.external_input:
            if name not in self.workspace.local_blobs():
                self.workspace.create_local_blob(name)
        self.net = self.workspace.create_net(self.predict_net)

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
        for name, value in items:
            self.workspace.create_local_blob(name)
            self.workspace.feed_blob(name, value)
        self.net.run()
        return [self.workspace.fetch_blob(name) for name in self.output_names]
