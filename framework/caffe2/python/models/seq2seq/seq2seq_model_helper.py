"""``caffe2.python.models.seq2seq.seq2seq_model_helper``: the ModelHelper Caffe2's seq2seq models use.

``Seq2SeqModelHelper(init_params=True, **kwargs)`` is a ``ModelHelper`` whose ``arg_scope`` is Caffe2's:
``use_cudnn`` (default True) and ``cudnn_exhaustive_search`` (default False) taken from the keywords,
``order="NHWC"``, and ``ws_nbytes_limit`` when given and truthy. It keeps parameters that take no
gradient apart:

- ``AddParam(name, init=None, init_value=None, trainable=True)``: a parameter made by ``init`` (an
  ``(op type, kwargs)`` pair run in ``param_init_net``) or, with ``init_value`` (an int, float or str), by a
  one-element ``ConstantFill``; without ``init_params`` it is an external input of ``net`` instead. A
  trainable one goes to ``params``, the others to ``non_trainable_params``.
- ``GetNonTrainableParams(namescope=None)``: those of the given (default: current) name scope, all of them
  at the root scope.
- ``GetAllParams(namescope=None)``: trainable, computed, then non-trainable parameters of that scope.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import scope
from framework.caffe2.python.model_helper import ModelHelper


class Seq2SeqModelHelper(ModelHelper):
    def __init__(self, init_params: bool = True, **kwargs: Any) -> None:
        arg_scope = {
            "use_cudnn": kwargs.pop("use_cudnn", True),
            "cudnn_exhaustive_search": kwargs.pop("cudnn_exhaustive_search", False),
            "order": "NHWC",
        }
        if kwargs.get("ws_nbytes_limit"):
            arg_scope["ws_nbytes_limit"] = kwargs.pop("ws_nbytes_limit")
        super().__init__(init_params=init_params, arg_scope=arg_scope, **kwargs)
        self.non_trainable_params: list[Any] = []

    def AddParam(self, name: str, init: Any = None, init_value: Any = None, trainable: bool = True) -> Any:
        if init_value is not None:
            if init is not None:
                raise ValueError("AddParam: give either init or init_value, not both")
            if type(init_value) not in (int, float, str):
                raise TypeError(f"AddParam: init_value must be an int, float or str, got {type(init_value).__name__}")
            init = ("ConstantFill", {"shape": [1], "value": init_value})
        if self.init_params:
            if init is None:
                raise ValueError(f"AddParam: parameter '{name}' needs init or init_value when init_params is set")
            param = getattr(self.param_init_net, init[0])([], name, **init[1])
        else:
            param = self.net.AddExternalInput(name)
        (self.params if trainable else self.non_trainable_params).append(param)
        return param

    def GetNonTrainableParams(self, namescope: str | None = None) -> list[Any]:
        if namescope is None:
            namescope = scope.CurrentNameScope()
        elif not namescope.endswith(scope._NAMESCOPE_SEPARATOR):
            namescope += scope._NAMESCOPE_SEPARATOR
        if namescope == "":
            return list(self.non_trainable_params)
        return [p for p in self.non_trainable_params if p.GetNameScope() == namescope]

    def GetAllParams(self, namescope: str | None = None) -> list[Any]:
        return self.GetParams(namescope) + self.GetComputedParams(namescope) + self.GetNonTrainableParams(namescope)
