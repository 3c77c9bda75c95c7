"""RecurrentNetwork's plumbing: step workspaces, links, gradient accumulation, the blob fetcher.

- ``rnn_internal_apply_link`` makes a step-net blob (internal) a view of
  ``window`` time steps of a sequence blob (external) at ``t + offset``, so a
  step reads its input and writes its states in place, without copies.
- ``rnn_internal_accumulate_gradient_input`` adds the external gradient of
  step ``t`` into the states gradient at ``t + offset``.
- ``ScratchWorkspaces``: the step workspaces a RecurrentNetwork keeps for
  its gradient (the op's last output), and their compiled step nets.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, UNKNOWN, Arg, TensorSpec


class StepNet:
    """A compiled step net and ``key``, the digest of the NetDef it was compiled from: the key of its
    bound nets in ScratchWorkspaces.

    The step workspaces outlive the ops that run in them (forward and gradient ops made by separate
    RunOperatorOnce calls share them; RunNetOnce makes the op anew on every call), so their bound nets
    are keyed by what the step net says, never by the identity of an object that can die: an op made
    again from the same definition reuses the nets bound in the step workspaces, and a different step
    net (the gradient's, another op's) can never be taken for it.
    """

    __slots__ = ("compiled", "key")

    def __init__(self, compiled: Any, key: bytes) -> None:
        self.compiled = compiled
        self.key = key


class BoundSteps:
    """One step net bound in the step workspaces: ``nets`` {t: bound net}, and the op that last ran them
    (held weakly). An op made anew from the same definition checks, before reusing them, that every blob
    they hold is still the one its name finds from the step workspace (a blob removed and fed again
    outside is a new Blob: the nets are then bound again)."""

    __slots__ = ("nets", "_user")

    def __init__(self) -> None:
        self.nets: dict[int, Any] = {}
        self._user: Any = None

    def used_by(self, op: Any) -> bool:
        return self._user is not None and self._user() is op

    def take(self, op: Any, step_workspaces: list) -> None:
        """Hand the nets to ``op``; those whose blobs no longer resolve to what they hold are dropped."""
        self.nets = {t: net for t, net in self.nets.items() if _bindings_hold(net, step_workspaces[t])}
        self._user = weakref.ref(op)


def _bindings_hold(net: Any, ws: Workspace) -> bool:
    for o in net.ops:
        for name, blob in zip((*o.input_names, *o.output_names), (*o.inputs, *o.outputs)):
            if not ws.has_blob(name) or ws.get_blob(name) is not blob:
                return False
    return True


class ScratchWorkspaces:
    """Step workspaces of one RecurrentNetwork (Caffe2's detail::ScratchWorkspaces)."""

    def __init__(self) -> None:
        self.step_workspaces: list[Workspace] = []
        self.shared_ws: Workspace | None = None
        # StepNet.key -> that step net bound in the step workspaces
        self.nets: dict[bytes, BoundSteps] = {}

    def step(self, t: int) -> Workspace:
        while len(self.step_workspaces) <= t:
            self.step_workspaces.append(
                Workspace(
                    self.shared_ws.root_folder, parent=self.shared_ws, name=f"rnn_step{len(self.step_workspaces)}"
                )
            )
        return self.step_workspaces[t]

    def __repr__(self) -> str:
        return f"<ScratchWorkspaces {len(self.step_workspaces)} steps>"


def set_timestep(ws: Workspace, name: str, t: int) -> None:
    """The int32 [1] timestep blob of a step workspace, written in place when it exists."""
    blob = ws._blobs.get(name) or ws.create_local_blob(name)
    obj = blob.held
    if type(obj) is Tensor and obj.array is not None and obj.array.shape == (1,) and obj.array.dtype == np.int32:
        obj.array[0] = t
        return
    blob.get_mutable(Tensor).assign(np.array([t], np.int32))


def share_view(blob: Any, view: np.ndarray, last_shape: tuple | None = None) -> None:
    """Make ``blob``'s tensor wrap ``view``; a no-op when it already wraps that memory with the view's
    shape, or with a shape a step op gave it in place (Caffe2's ops resize linked outputs in place)
    after this caller shared a view of the same shape (``last_shape``). A view of another shape over
    the same memory (a new geometry, e.g. another window and batch over a reused buffer) is re-wrapped."""
    t = blob.held
    if type(t) is Tensor:
        arr = t.array
        if (
            arr is not None
            and arr.size == view.size
            and arr.dtype == view.dtype
            and arr.__array_interface__["data"][0] == view.__array_interface__["data"][0]
            and (arr.shape == view.shape or last_shape == view.shape)
        ):
            return
    else:
        t = blob.get_mutable(Tensor)
    t.share_external(view)
    t.data()  # build the view now, so later ops see a stable array object


def timestep_of(op: Operator, i: int = 0) -> int:
    ts = op.input(i)
    if ts.dtype.kind not in "iu" or ts.size < 1:
        raise TypeMismatchError(
            f"{op.describe()}: timestep '{op.input_names[i]}' must be an integer tensor with a value, found {ts.dtype}"
        )
    return int(ts.reshape(-1)[0])


@register_op(
    "rnn_internal_apply_link",
    inputs=2,
    outputs=2,
    enforce_inplace={(1, 1)},
    input_docs=[("timestep", "int32 t"), ("external", "sequence blob")],
    output_docs=[("internal", "view of external[t + offset : t + offset + window]"), ("external", "unchanged")],
    args=[Arg("offset", INT, -1, "time offset of the view"), Arg("window", INT, -1, "time steps in the view")],
    infer=lambda args, ins: [UNKNOWN, ins[1] if len(ins) > 1 else UNKNOWN],
    category="rnn",
    private=True,
)
class ApplyLink(Operator):
    """Internal RNN operator: output 0 (internal) becomes a view of ``window`` time steps of
    input 1 (external, also output 1) starting at ``timestep + offset``. No data is copied."""

    def setup(self) -> None:
        if self.args.offset < 0:
            raise self.arg_error("offset not set")
        if self.args.window < 0:
            raise self.arg_error("window not set")
        self._last: tuple = (None, -1, None)  # (external array, start, internal array) of the last run
        self._last_shape: tuple | None = None  # shape of the view the last run shared

    def run(self) -> None:
        t = timestep_of(self)
        ext = self.input(1)
        a = self.args
        last_ext, last_start, last_view = self._last
        obj = self.outputs[0].held
        if last_ext is ext and last_start == t + a.offset and type(obj) is Tensor and obj.array is last_view:
            return  # already a view of the same steps of the same array
        if ext.ndim < 1 or ext.size == 0:
            raise ShapeError(f"{self.describe()}: external '{self.input_names[1]}' is empty ({list(ext.shape)})")
        start = t + a.offset
        if start < 0 or start + a.window > ext.shape[0]:
            raise ShapeError(
                f"{self.describe()}: link window [{start}, {start + a.window}) is outside '{self.input_names[1]}' "
                f"with {ext.shape[0]} time steps"
            )
        view = ext[start : start + a.window]
        share_view(self.outputs[0], view, self._last_shape)
        self._last = (ext, start, self.outputs[0].array)
        self._last_shape = view.shape

    def compile(self):
        """A check that the timestep still selects the bound view (framework.net.program keeps the
        arrays): each step workspace of a RecurrentNetwork has a fixed timestep, so the view made
        by the first run stays valid and the link costs one comparison per step."""
        ext, start, view = self._last
        if ext is not self.input(1) or self.outputs[0].array is not view:
            return None
        ts, offset = self.input(0).reshape(-1), self.args.offset

        def link() -> None:
            if int(ts[0]) + offset != start:
                raise ShapeError(
                    f"{self.describe()}: compiled for timestep {start - offset}, run at {int(ts[0])}: "
                    "a step workspace runs one timestep"
                )

        return link


@register_op(
    "rnn_internal_accumulate_gradient_input",
    inputs=3,
    outputs=(1, float("inf")),
    enforce_inplace={(2, 0)},
    input_docs=[("timestep", "int32 t"), ("og", "external gradient sequence"), ("g", "states gradient")],
    output_docs=[("g", "states gradient, step t + offset incremented")],
    args=[Arg("offset", INT, -1, "time offset of the destination")],
    infer=lambda args, ins: [ins[2] if len(ins) > 2 else UNKNOWN] * args.num_outputs,
    category="rnn",
    private=True,
)
class AccumulateInputGradient(Operator):
    """Internal RNN operator: g[timestep + offset] += og[timestep] (inputs timestep, og, g)."""

    def setup(self) -> None:
        if self.args.offset < 0:
            raise self.arg_error("Offset not set")

    def run(self) -> None:
        t = timestep_of(self)
        og, g = self.input(1), self.input(2)
        dst = t + self.args.offset
        if g.ndim < 1 or dst >= g.shape[0] or t >= og.shape[0] or og.shape[1:] != g.shape[1:]:
            raise ShapeError(
                f"{self.describe()}: cannot add step {t} of '{self.input_names[1]}' {list(og.shape)} into step "
                f"{dst} of '{self.input_names[2]}' {list(g.shape)}"
            )
        g[dst] += og[t]


@register_op(
    "RecurrentNetworkBlobFetcher",
    inputs=1,
    outputs=1,
    input_docs=[("ScratchWorkspaceBlob", "Name of scratch workspace blob returned by recurrent network.")],
    output_docs=[("blob_names", "1D tensor of strings containing extracted blob names.")],
    args=[Arg("prefix", STRING, "rnn", "Prefix string to prepend extracted blobs.")],
    infer=lambda args, ins: [TensorSpec((None,), np.dtype(object))],
    category="rnn",
)
class RecurrentNetworkBlobFetcher(Operator):
    """Retrieves blobs from scratch workspaces (which contain intermediate recurrent network
    computation for each timestep) and puts them in the global workspace under
    ``<prefix>_<blob name><timestep>``."""

    def run(self) -> None:
        obj = self.inputs[0].held
        if type(obj) is not ScratchWorkspaces:
            found = "an empty blob" if obj is None else type(obj).__qualname__
            raise TypeMismatchError(
                f"{self.describe()}: '{self.input_names[0]}' must hold the step workspaces of a RecurrentNetwork "
                f"(its last output), found {found}"
            )
        names = []
        for i, ws in enumerate(obj.step_workspaces):
            for name in ws.local_blobs():
                t = ws.get_blob(name).held
                if type(t) is not Tensor or not t.is_initialized:
                    continue
                new = f"{self.args.prefix}_{name}{i}"
                self.workspace.feed_blob(new, np.array(t.data(), copy=True))
                names.append(new.encode())
        out = self.output(0, (len(names),), object)
        out[:] = names


no_gradient("RecurrentNetworkBlobFetcher")
