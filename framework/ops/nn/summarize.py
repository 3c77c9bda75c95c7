"""Summarize: min, max, mean and standard deviation of a tensor, to a blob and/or a file."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.paths import safe_file_name
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, Arg, TensorSpec

_STATS = (4,)
_F32 = np.dtype(np.float32)


@register_op(
    "Summarize",
    inputs=1,
    outputs=(0, 1),
    args=[Arg("to_file", BOOL, False, "append 'min max mean std' lines to <root folder>/<input>.summary")],
    input_docs=[("data", "the tensor to summarize")],
    output_docs=[("output", "float32 [min, max, mean, std] (std unbiased; 0 for one element)")],
    infer=lambda args, ins: [TensorSpec(_STATS, _F32)] * args.num_outputs,
    category="utility",
    input_types="numeric",
)
class Summarize(Operator):
    """Four statistics of the input: min, max, mean and the unbiased standard deviation.

    With ``to_file`` the values are also written, one line per run, to
    ``<workspace root folder>/<input name>.summary`` ('/' in the name becomes
    '#'), truncated when the op is created, as in Caffe2.
    """

    def setup(self) -> None:
        self._file = None
        if self.args.to_file:
            name = safe_file_name(self.input_names[0], ".summary")
            path = self.workspace.resolve_write_path(name, False, f"{self.describe()}: to_file")
            self._file = open(path, "w")

    def run(self) -> None:
        x = self.input(0)
        if x.size == 0:
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' is empty; nothing to summarize")
        xd = x.astype(np.float64, copy=False)
        mean = float(xd.mean())
        std = float(np.sqrt(((xd - mean) ** 2).sum() / (x.size - 1))) if x.size > 1 else 0.0
        stats = (float(x.min()), float(x.max()), mean, std)
        if self._file is not None:
            self._file.write(" ".join(f"{v:g}" for v in stats) + "\n")
            self._file.flush()
        if self.outputs:
            self.output(0, _STATS, _F32)[...] = stats

    def __del__(self) -> None:
        if getattr(self, "_file", None) is not None:
            self._file.close()


should_not_do_gradient("Summarize")
