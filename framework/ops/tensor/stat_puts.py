"""Stat puts (Caffe2's stats_put_ops): IncrementPut, AveragePut, StdDevPut publish a tensor's first
value (times ``magnitude_expand``, as int64) to the workspace's StatRegistry (see
``framework.ops.training.stats``), under the keys Caffe2's stat kinds use:

- IncrementPut: ``<name>/stat_value`` += v;
- AveragePut: ``<name>/stat_value/sum`` += v, ``<name>/stat_value/count`` += 1;
- StdDevPut: also ``/sumoffset`` and ``/sumsqoffset``, the sums of v - first and (v - first)^2
  where ``first`` is the first value put (an offset against precision loss).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, STRING, UNKNOWN, Arg
from framework.ops.training.stats import default_registry

_I64_MAX, _I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
_ARGS = [
    Arg("stat_name", STRING, "", "name of the stat (default: the input blob's name)"),
    Arg("magnitude_expand", INT, 1, "multiply the value by this before the int64 conversion"),
    Arg("bound", BOOL, False, "clamp out-of-range values (NaN -> 0) instead of failing"),
    Arg("default_value", FLOAT, None, "value used for an empty input (else an empty input is an error)"),
]


def _put(kind: str):
    @register_op(
        f"{kind}Put",
        outputs=0,
        args=_ARGS,
        input_docs=[("value", "a numeric tensor; its first element is put")],
        infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
        doc=f"Publish the input's first value (x magnitude_expand, int64) as a {kind.lower()} stat (module doc).",
        category="training",
    )
    class _Put(Operator):
        def setup(self) -> None:
            if self.args.magnitude_expand <= 0:
                raise self.arg_error(f"magnitude_expand must be > 0, got {self.args.magnitude_expand}")
            self._name = (self.args.stat_name or self.input_names[0]) + "/stat_value"
            self._first: int | None = None
            self._lock = threading.Lock()

        def _value(self) -> int:
            a = self.args
            x = self.input(0)
            if x.dtype.kind not in "fiub":
                raise ShapeError(f"{self.describe()}: value must be numeric, got {x.dtype}")
            if x.size:
                v = float(x.reshape(-1)[0])
            elif a.default_value is not None:
                v = float(a.default_value)
            else:
                raise ShapeError(f"{self.describe()}: default value must be provided when receiving empty tensors")
            bound = _I64_MAX // a.magnitude_expand
            if a.bound:
                if math.isnan(v):
                    return 0
                if v <= -bound:
                    return int(_I64_MIN)
                if v >= bound:
                    return int(_I64_MAX)
                return int(v * a.magnitude_expand)
            if math.isnan(v):
                raise ShapeError(f"{self.describe()}: input value cannot be NaN")
            if math.isinf(v) or abs(int(v)) >= bound:
                raise ShapeError(f"{self.describe()}: input value is too large for the given magnitude expansion")
            return int(v * a.magnitude_expand)

        def run(self) -> None:
            v = self._value()
            reg = default_registry(self.workspace)
            if kind == "Increment":
                reg.update(self._name, v)
                return
            if kind == "StdDev":
                with self._lock:
                    if self._first is None:
                        self._first = v
                d = v - self._first
                reg.update(self._name + "/sumsqoffset", d * d)
                reg.update(self._name + "/sumoffset", d)
            reg.update(self._name + "/count", 1)
            reg.update(self._name + "/sum", v)

    _Put.__name__ = _Put.__qualname__ = f"{kind}Put"
    return _Put


for _kind in ("Increment", "Average", "StdDev"):
    _put(_kind)

should_not_do_gradient("IncrementPut", "AveragePut", "StdDevPut")
