"""``caffe2.python.device_checker``: the same op (or net) on several devices gives the same
outputs. Only the CPU exists here, so every device option runs the CPU code and the check
compares runs (it still catches ops whose results depend on state left by a previous run)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework import core, workspace


class DeviceChecker:
    def __init__(self, threshold: float, device_options: Sequence[Any]) -> None:
        self._threshold = threshold
        self._device_options = list(device_options)

    def CheckSimple(
        self,
        op: Any,
        inputs: Sequence[Any],
        outputs_to_check: Sequence[int],
        input_device_options: Any = None,
    ) -> bool:
        """Run ``op`` on ``inputs`` with each device option; True when the outputs agree."""
        outputs_to_check = [outputs_to_check] if isinstance(outputs_to_check, int) else list(outputs_to_check)
        results = []
        previous = workspace.CurrentWorkspace()
        for do in self._device_options:
            op_def = core.CreateOperator(op.type, [], [])
            op_def.CopyFrom(op)
            op_def.device_option.CopyFrom(do)
            workspace.SwitchWorkspace("_device_check_", True)
            try:
                workspace.ResetWorkspace()
                for name, value in zip(op_def.input, inputs):
                    workspace.FeedBlob(name, value, do)
                workspace.RunOperatorOnce(op_def)
                results.append([workspace.FetchBlob(op_def.output[k]) for k in outputs_to_check])
            finally:
                workspace.ResetWorkspace()
                workspace.SwitchWorkspace(previous)
        return self._agree(results, outputs_to_check, [str(o) for o in op.output])

    def _agree(self, results: list, indices: Sequence[Any], names: Sequence[str]) -> bool:
        ok = True
        for i, res in enumerate(results[1:], 1):
            for k, a, b in zip(indices, results[0], res):
                a, b = np.asarray(a), np.asarray(b)
                if a.dtype.kind in "OSU" or b.dtype.kind in "OSU":
                    same = a.shape == b.shape and bool(np.all(a == b))
                else:
                    same = a.shape == b.shape and np.allclose(a, b, atol=self._threshold, rtol=self._threshold)
                if not same:
                    label = names[k] if isinstance(k, int) and k < len(names) else str(k)
                    print(f"Failure in checking device option {i} and output {label}: {a} vs {b}")
                    ok = False
        return ok

    def CheckNet(
        self, net: Any, inputs: Any = None, blobs_to_check: Sequence[str] | None = None, ignore: Any = None
    ) -> bool:
        """Run ``net`` (a NetDef) fed with ``inputs`` ({name: value}) on each device option;
        True when the blobs ``blobs_to_check`` (default: every output) agree."""
        inputs = inputs or {}
        ignore = set(ignore or ())
        if blobs_to_check is None:
            blobs_to_check = sorted({o for op in net.op for o in op.output} - ignore)
        results = []
        previous = workspace.CurrentWorkspace()
        for do in self._device_options:
            copy = type(net)()
            copy.CopyFrom(net)
            for op in copy.op:
                op.device_option.CopyFrom(do)
            workspace.SwitchWorkspace("_device_check_", True)
            try:
                workspace.ResetWorkspace()
                for name, value in inputs.items():
                    workspace.FeedBlob(name, value, do)
                workspace.RunNetOnce(copy)
                results.append([workspace.FetchBlob(n) for n in blobs_to_check])
            finally:
                workspace.ResetWorkspace()
                workspace.SwitchWorkspace(previous)
        return self._agree(results, list(blobs_to_check), list(blobs_to_check))
