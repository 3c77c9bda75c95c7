"""``caffe2.python.onnx.workspace``: a private, named workspace driven through Caffe2's
``workspace`` functions.

``Workspace()`` creates a workspace of its own (a fresh uuid name); ``ws.FeedBlob(...)``,
``ws.RunNetOnce(...)``, ``ws.FetchBlob(...)`` and every other function of ``caffe2.python.workspace``
run with it as the current workspace and put the previous current workspace back afterwards (also
when they raise). When the object dies its blobs and nets are freed and its name is forgotten
(Caffe2 kept the emptied workspace registered).

>>> # ws = Workspace(); ws.FeedBlob("x", np.ones(3)); ws.RunOperatorOnce(op); ws.FetchBlob("y")
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

from framework.caffe2.python import workspace

__all__ = ["Workspace"]


class _WorkspaceCtx:
    """Makes one named workspace current for a ``with`` block; re-entrant (a stack of previous names)."""

    def __init__(self, workspace_id: str) -> None:
        self.workspace_id = workspace_id
        self.workspace_stack: list[str] = []

    def __enter__(self) -> None:
        self.workspace_stack.append(workspace.CurrentWorkspace())
        workspace.SwitchWorkspace(self.workspace_id, create_if_missing=True)

    def __exit__(self, *exc: Any) -> None:
        workspace.SwitchWorkspace(self.workspace_stack.pop(), create_if_missing=True)


class Workspace:
    """A workspace of its own that answers every ``caffe2.python.workspace`` function (module doc)."""

    def __init__(self) -> None:
        self._ctx = _WorkspaceCtx(str(uuid.uuid4()))

    def __getattr__(self, attr: str) -> Callable:
        if attr.startswith("_"):
            raise AttributeError(attr)
        fn = getattr(workspace, attr)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._ctx:
                return fn(*args, **kwargs)

        return call

    def __del__(self) -> None:
        ctx = self.__dict__.get("_ctx")
        if ctx is None or workspace is None:  # interpreter shutdown
            return
        # the workspace module keeps its named workspaces in one table; a private name nobody else
        # knows is dropped from it, unless it is current (then it stays until switched away from)
        if workspace.CurrentWorkspace() != ctx.workspace_id:
            workspace._workspaces.pop(ctx.workspace_id, None)
