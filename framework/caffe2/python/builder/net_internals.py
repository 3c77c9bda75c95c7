"""Caffe2 ``core.Net`` methods beyond building ops: external input/output views, observers of the net
created in the current workspace, op names from creation sites, and ``reroute_tensor`` (Caffe2 2020).
``Net`` mixes ``NetInternals`` in.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from framework.errors import NetError

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


class NetInternals:
    """The methods; they use only ``Proto()``, ``Name()``, ``BlobIsDefined`` and ``AddExternalInput``."""

    @property
    def external_inputs(self) -> list[Any]:
        """The external inputs as BlobReferences (Caffe2's property)."""
        from framework.caffe2.python.builder.blob_reference import BlobReference

        return [BlobReference(x) for x in self.Proto().external_input]

    @property
    def external_outputs(self) -> list[Any]:
        from framework.caffe2.python.builder.blob_reference import BlobReference

        return [BlobReference(x) for x in self.Proto().external_output]

    # -- observers of the instantiated net ----------------------------------------------------
    def _instance(self) -> Any:
        from framework import workspace

        ws = workspace.current()
        if not ws.has_net(self.Name()):
            raise NetError(f"net '{self.Name()}' is not created in the current workspace: CreateNet it first")
        return ws.get_net(self.Name())

    def AddObserver(self, observer_type: str) -> Any:
        """Attach a ``TimeObserver`` or ``RunCountObserver`` to this net as created in the current
        workspace; returns the observer (``average_time()``, ``debug_info()``)."""
        from framework.net.observers import make_observer

        observer = make_observer(observer_type)
        self._instance().observers.append(observer)
        return observer

    def RemoveObserver(self, observer: Any) -> None:
        observers = self._instance().observers
        if observer not in observers:
            raise NetError(f"net '{self.Name()}': that observer is not attached")
        observers.remove(observer)

    def NumObservers(self) -> int:
        return len(self._instance().observers)

    # -- names and edits ------------------------------------------------------------------------
    def PopulateProtoWithFileName(self) -> None:
        """Name each op ``file:line:function`` after the innermost frame of the place that created it
        (its ``debug_info``), as Caffe2 does from its recorded tracebacks; ops without one keep their name."""
        for op in self.Proto().op:
            frames = _FRAME.findall(op.debug_info or "")
            if frames:
                op.name = ":".join(frames[-1])

    def insert_op_at_idx(self, op: Any, op_idx: int) -> None:
        """Insert ``op`` at position ``op_idx``; its outputs and inputs join the external lists (as Caffe2)."""
        if op_idx < 0:
            raise NetError(f"net '{self.Name()}': cannot insert an op at index {op_idx}")
        proto = self.Proto()
        tail = list(proto.op[op_idx:])
        del proto.op[op_idx:]
        proto.op.add().CopyFrom(op)
        proto.op.extend(tail)
        proto.external_output.extend(op.output)
        proto.external_input.extend(op.input)
        self._note_op(op)

    def reroute_tensor(self, tensor: Any, new_producer: Any, can_modify: Iterable[Any] | None = None) -> int:
        """Insert ``new_producer`` (an op reading ``tensor``, writing a new tensor) right after the latest
        producer of its inputs; the new tensor replaces ``tensor`` in the external outputs and in the
        inputs of the ops in ``can_modify``. Returns how many of those ops were changed. Assumes no
        in-place blobs, as Caffe2 does."""
        tensor = str(tensor)
        if tensor not in new_producer.input:
            raise NetError(f"new producer {new_producer.type} does not read '{tensor}'")
        proto = self.Proto()

        def producer_index(blob: str) -> int:
            if blob in proto.external_input:
                return -1
            for i, op in enumerate(proto.op):
                if blob in op.output:
                    return i
            return -2

        idx = max(producer_index(b) for b in new_producer.input)
        self.insert_op_at_idx(new_producer, idx + 1)
        new_tensor = new_producer.output[0]
        if tensor in proto.external_output:
            renamed = [new_tensor if b == tensor else b for b in proto.external_output]
            del proto.external_output[:]
            proto.external_output.extend(renamed)
        changed = 0
        for op in proto.op:
            if can_modify and op in can_modify:
                for i, b in enumerate(op.input):
                    if b == tensor:
                        op.input[i] = new_tensor
                changed += 1
        return changed

    def _note_op(self, op: Any) -> None:
        """Record an op added outside add_op in the name tables (Net overrides this)."""

    def _CheckLookupTables(self) -> None:
        """Check that the blob-name tables agree with the proto (Caffe2 calls this from its tests)."""
        proto = self.Proto()
        outputs = {o for op in proto.op for o in op.output}
        missing = {b for b in outputs | set(proto.external_input) if not self.BlobIsDefined(b)}
        if missing:
            raise NetError(f"net '{self.Name()}': lookup tables miss {sorted(missing)}")
