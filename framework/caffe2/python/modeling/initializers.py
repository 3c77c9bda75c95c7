"""How a parameter is created in a model's init net (Caffe2's ``caffe2.python.modeling.initializers``).

Every initializer has ``create_param(param_name, init_net, shape) -> ParameterInfo``:

- ``Initializer(op, **kwargs)``: one fill op (``XavierFill``, ``ConstantFill``...) writes the parameter;
- ``ExternalInitializer()``: no op; the parameter is fed or loaded before the init net runs;
- ``PseudoFP16Initializer``: the fill op writes an fp32 master copy ``<name>_fp32``, ``FloatToHalf`` the
  float16 parameter ``<name>`` (``blob_copy[FLOAT]`` is the master: the optimizer updates it);
- ``ReversePseudoFP16Initializer``: the parameter stays fp32, ``<name>_fp16`` is its float16 copy.

>>> from framework import core
>>> net = core.Net("init")
>>> info = Initializer("ConstantFill", value=0.5).create_param("b", net, [3])
>>> str(info.blob), net.Proto().op[0].type
('b', 'ConstantFill')
"""

from __future__ import annotations

from typing import Any, Sequence

from framework.caffe2.python.modeling.parameter_info import ParameterInfo
from framework.errors import FrameworkError
from framework.proto.framework_pb2 import TensorProto

__all__ = [
    "ExternalInitializer",
    "Initializer",
    "PseudoFP16Initializer",
    "ReversePseudoFP16Initializer",
    "update_initializer",
]


class Initializer:
    """A fill op creating the parameter: ``Initializer("GaussianFill", std=0.01)``.

    Built without an op name, it takes one later through ``update`` (once: a second name raises).
    """

    def __init__(self, operator_name: str | None = None, **kwargs: Any) -> None:
        self.operator_name = operator_name
        self.operator_kwargs = kwargs

    def update(self, operator_name: str, kwargs: dict[str, Any]) -> None:
        if self.operator_name is not None:
            raise FrameworkError(
                f"initializer already fills with '{self.operator_name}'; cannot change it to '{operator_name}'"
            )
        self.operator_name = operator_name
        self.operator_kwargs = dict(kwargs or {})

    def _fill(self, init_net: Any, name: Any, shape: Sequence[int]) -> Any:
        if self.operator_name is None:
            raise FrameworkError(f"parameter '{name}': the initializer has no fill op (give one or use update())")
        return getattr(init_net, self.operator_name)([], name, shape=list(shape), **self.operator_kwargs)

    def create_param(self, param_name: Any, init_net: Any, shape: Sequence[int]) -> ParameterInfo:
        return ParameterInfo(param_id=None, param=self._fill(init_net, param_name, shape), shape=shape)


class ExternalInitializer:
    """The parameter comes from outside the init net (a checkpoint, a feed): no op is added.

    A plain string name is scoped by the current NameScope; a BlobReference is used as given.
    """

    def create_param(self, param_name: Any, init_net: Any, shape: Sequence[int]) -> ParameterInfo:
        from framework import core

        if isinstance(param_name, core.BlobReference):
            param = core.BlobReference(str(param_name), init_net)
        elif isinstance(param_name, str):
            param = core.ScopedBlobReference(param_name, init_net)
        else:
            raise FrameworkError(f"parameter name must be a str or BlobReference, got {type(param_name).__name__}")
        return ParameterInfo(param_id=None, param=param, shape=shape)


class PseudoFP16Initializer(Initializer):
    """A float16 parameter computed from an fp32 master copy ``<name>_fp32`` kept for the optimizer."""

    def create_param(self, param_name: Any, init_net: Any, shape: Sequence[int]) -> ParameterInfo:
        master = self._fill(init_net, str(param_name) + "_fp32", shape)
        param = init_net.FloatToHalf(master, param_name)
        return ParameterInfo(param_id=None, param=param, shape=shape, blob_copy={TensorProto.FLOAT: master})


class ReversePseudoFP16Initializer(Initializer):
    """An fp32 parameter with a float16 copy ``<name>_fp16`` (``blob_copy[FLOAT16]``)."""

    def create_param(self, param_name: Any, init_net: Any, shape: Sequence[int]) -> ParameterInfo:
        param = self._fill(init_net, param_name, shape)
        half = init_net.FloatToHalf(param, str(param_name) + "_fp16")
        return ParameterInfo(param_id=None, param=param, shape=shape, blob_copy={TensorProto.FLOAT16: half})


def update_initializer(
    initializer_class: Any, operator_name_and_kwargs: Any, default_operator_name_and_kwargs: tuple[str, dict]
) -> Any:
    """The initializer a layer helper uses for one parameter.

    ``initializer_class`` (e.g. ``PseudoFP16Initializer``; default ``Initializer``) is built with the op
    and kwargs of ``operator_name_and_kwargs`` (``("GaussianFill", {"std": 0.1})``), or of the layer's
    default when that is None. An initializer *instance* is used as it is (an extension to Caffe2, which
    accepts classes only); one without a fill op takes the given or default one.
    """
    # Caffe2 reads the first two items: (op, kwargs); anything after them is ignored
    op, kwargs = (operator_name_and_kwargs or default_operator_name_and_kwargs)[:2]
    kwargs = dict(kwargs or {})
    if initializer_class is None:
        return Initializer(op, **kwargs)
    if isinstance(initializer_class, type):
        return initializer_class(op, **kwargs)
    if isinstance(initializer_class, Initializer) and initializer_class.operator_name is None:
        initializer_class.update(op, kwargs)
    return initializer_class
