"""``LayerModelHelper`` (Caffe2's ``caffe2.python.layer_model_helper``): a model built from layers.

The model holds typed input records (``input_feature_schema``, ``trainer_extra_schema``) bound to
blobs of ``model.net``, a list of layers (``model.FC(record, 10)`` creates and adds the registered
layer ``FC``; ``model.Relu(record, 1)`` or ``model.FunctionalLayerSplit(...)`` wraps a plain
operator as a ``Functional`` layer), the loss and output records, global constants (``ONE``,
``ZERO``, ``ZERO_RANGE``) created in every init net, and per parameter its optimizer and
regularizer. ``layer_model_instantiator`` turns it into train / eval / predict nets.

>>> # model = LayerModelHelper("m", schema.Struct(("x", schema.Scalar((np.float32, (4,))))), schema.Struct())
>>> # y = model.FC(model.input_feature_schema.x, 2)
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from framework import core
from framework.caffe2.python import layers as _layers_pkg  # noqa: F401  (registers every layer)
from framework.caffe2.python import model_helper, schema, scope
from framework.caffe2.python.layer_model_constants import GlobalConstantsMixin
from framework.caffe2.python.layer_model_training import TrainingAssemblyMixin
from framework.caffe2.python.layers import layers

__all__ = ["LayerModelHelper"]

logger = logging.getLogger(__name__)


def _shared_param_name(name: str) -> str:
    """``name`` under the current name scope, as resolved by parameter sharing when the
    ``modeling.parameter_sharing`` module is present (plain scoping otherwise, which is what
    parameter sharing does when no scope is overridden)."""
    try:
        from framework.caffe2.python.modeling.parameter_sharing import parameter_sharing_context
    except ImportError:
        return scope.CurrentNameScope() + name
    return parameter_sharing_context.get_parameter_name(name)


class LayerModelHelper(GlobalConstantsMixin, TrainingAssemblyMixin, model_helper.ModelHelper):
    """A model of layers over typed input records (see module doc).

    ``input_feature_schema`` / ``trainer_extra_schema``: schema Structs; fresh blobs of ``net`` are
    bound to them unless ``keep_blobs`` (then the records' own blobs are kept).
    """

    def __init__(
        self, name: str, input_feature_schema: schema.Field, trainer_extra_schema: schema.Field,
        keep_blobs: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(name=name)
        self._layer_names: set[str] = set()
        self._layers: list[layers.ModelLayer] = []
        self._param_to_shape: dict[str, Any] = {}
        self._seed: int | None = None
        self._sequence_seed = True
        self.param_to_optim: dict[str, Any] = {}
        self.param_to_reg: dict[Any, Any] = {}
        self._default_optimizer: Any = None
        self._loss: schema.Field | None = None
        self._output_schema: schema.Field | None = None
        self._post_grad_net_modifiers: list[Any] = []
        self._final_net_modifiers: list[Any] = []
        self._breakdown_map: dict[str, int] | None = None
        if keep_blobs:
            self._input_feature_schema = input_feature_schema.clone()
            self._trainer_extra_schema = trainer_extra_schema.clone()
        else:
            self._input_feature_schema = schema.NewRecord(self.net, input_feature_schema)
            self._trainer_extra_schema = schema.NewRecord(self.net, trainer_extra_schema)
        self._metrics_schema: schema.Field = schema.Struct()
        self._preproc_output_schema: schema.Field | None = None
        self._init_global_constants()
        self.param_init_net = self.create_init_net("param_init_net")
        self._initialize_params = True

    # -- output, metrics, loss records ------------------------------------------------
    def clear_output_schema(self) -> None:
        self._output_schema = None

    def set_initialize_params(self, initialize_params: bool) -> None:
        self._initialize_params = initialize_params

    def add_metric_field(self, name: str, value: Any) -> None:
        if name in self._metrics_schema.fields:
            raise layers.LayerError(f"metric field {name} added twice")
        self._metrics_schema = self._metrics_schema + schema.Struct((name, value))

    def filter_metrics_schema(self, white_set: Any) -> None:
        """Keep only the metric fields whose full names (``a:b`` for a nested field) are in ``white_set``;
        an empty set removes every field (Caffe2 2020)."""
        keep = set(white_set)
        for name in self._metrics_schema.field_names():
            if name not in keep:
                self._metrics_schema = self._metrics_schema - schema.Struct((name, schema.Scalar()))

    # -- parameters and layers ---------------------------------------------------------
    def _validate_param_shape(self, param_name: str, shape: Any) -> None:
        ref = self._param_to_shape.get(param_name)
        if param_name in self._param_to_shape and shape != ref:
            raise layers.LayerError(
                f"Got inconsistent shapes between shared parameters when trying to map a blob in scope "
                f"{scope.CurrentNameScope()} to {param_name}: ref_shape {ref}, shape {shape}"
            )

    def _validate_param_optim(self, param_name: str, optim: Any) -> None:
        """A parameter shared with one already created must get the same optimizer: None (the default
        optimizer, which must then be the one the other got), ``NoOptim``, or an Optimizer of the same type
        and the same ``attributes``."""
        from framework.caffe2.python.optimizers.base import Optimizer

        if param_name not in self.param_to_optim:
            return
        ref = self.param_to_optim[param_name]
        where = f"parameter {param_name} is shared with one whose optimizer is {ref!r}"
        if optim is None:
            if ref != self._default_optimizer:
                raise layers.LayerError(
                    f"{where}, but its optimizer is None (the default, {self._default_optimizer!r})"
                )
        elif optim == self.NoOptim:
            if ref != self.NoOptim:
                raise layers.LayerError(f"{where}, but its optimizer is NoOptim")
        elif isinstance(optim, Optimizer):
            if not isinstance(ref, Optimizer):
                raise layers.LayerError(f"{where}, not an Optimizer, but its optimizer is {optim!r}")
            if type(optim) is not type(ref) or optim.attributes != ref.attributes:
                raise layers.LayerError(
                    f"{where}, but its optimizer {optim!r} differs in type or attributes "
                    f"({optim.attributes} vs {ref.attributes})"
                )
        else:
            raise layers.LayerError(f"optim should be None, NoOptim or an Optimizer, got {optim!r}")

    def create_param(
        self, param_name: Any, shape: Any, initializer: Any, optimizer: Any = None, ps_param: Any = None,
        regularizer: Any = None,
    ) -> layers.LayerParameter:  # fmt: skip
        """A LayerParameter: ``initializer`` is ``(op_type,)`` or ``(op_type, kwargs)``; the op gets
        ``shape`` unless None. A string name is scoped (and resolved by parameter sharing)."""
        if isinstance(param_name, core.BlobReference):
            param_name = str(param_name)
        elif isinstance(param_name, str):
            param_name = _shared_param_name(param_name)
        else:
            raise layers.LayerError(f"unsupported type for param_name: {type(param_name).__name__}")
        self._validate_param_optim(param_name, optimizer)
        param_blob = core.BlobReference(param_name)
        if len(initializer) == 1:
            init_args: dict[str, Any] = {}
        elif len(initializer) == 2:
            init_args = copy.deepcopy(initializer[1])
        else:
            raise layers.LayerError(f"initializer must be (op_type,) or (op_type, kwargs), got {initializer!r}")
        if shape is not None:
            if "shape" in init_args:
                raise layers.LayerError(f"parameter {param_name}: shape given both as argument and in the initializer")
            init_args["shape"] = shape
        init_op = None
        if self._initialize_params:
            init_op = core.CreateOperator(initializer[0], [], param_blob, **init_args)
        param = layers.LayerParameter(
            parameter=param_blob, initializer=init_op, optimizer=optimizer, ps_param=ps_param,
            regularizer=regularizer,
        )  # fmt: skip
        self._validate_param_shape(param_name, shape)
        self._param_to_shape[param_name] = shape
        return param

    def next_layer_name(self, prefix: str) -> str:
        """``prefix`` under the name scope, made unique with ``_auto_<k>``."""
        base = core.ScopedName(prefix)
        name, index = base, 0
        while name in self._layer_names:
            name = f"{base}_auto_{index}"
            index += 1
        self._layer_names.add(name)
        return name

    def add_layer(self, layer: layers.ModelLayer) -> schema.Field:
        """Record ``layer`` and its parameters, add its ops to ``self.net`` (so errors surface at
        once) and return its output record."""
        self._layers.append(layer)
        for param in layer.get_parameters():
            if not isinstance(param.parameter, core.BlobReference):
                raise layers.LayerError(f"layer {layer.name}: parameter {param.parameter!r} is not a BlobReference")
            self.param_to_optim[str(param.parameter)] = param.optimizer or self.default_optimizer
            self.params.append(param.parameter)
            if isinstance(param, layers.LayerParameter):
                self.param_to_reg[param.parameter] = param.regularizer
            elif isinstance(param, model_helper.ParameterInfo):
                logger.info("regularization is unsupported for ParameterInfo object")
            else:
                raise layers.LayerError(f"unknown parameter object {param!r} (LayerParameter or ParameterInfo)")
        layer.add_operators(self.net, self.param_init_net)
        return layer.output_schema

    def get_parameter_blobs(self) -> list[Any]:
        return [p.parameter for layer in self._layers for p in layer.get_parameters()]

    # -- seeds and records -------------------------------------------------------------
    @property
    def seed(self) -> int | None:
        return self._seed

    @property
    def sequence_seed(self) -> bool:
        return self._sequence_seed

    def store_seed(self, seed: int, sequence_seed: bool = True) -> None:
        """Seed applied to each op by ``apply_seed`` (op i gets ``seed + i`` when ``sequence_seed``)."""
        self._seed = seed
        self._sequence_seed = sequence_seed

    def apply_seed(self, net: Any) -> None:
        if self._seed:
            net.set_rand_seed(self._seed, self._sequence_seed)

    @property
    def default_optimizer(self) -> Any:
        return self._default_optimizer

    @default_optimizer.setter
    def default_optimizer(self, optimizer: Any) -> None:
        self._default_optimizer = optimizer

    @property
    def input_feature_schema(self) -> schema.Field:
        return self._input_feature_schema

    @property
    def trainer_extra_schema(self) -> schema.Field:
        return self._trainer_extra_schema

    @property
    def metrics_schema(self) -> schema.Field:
        """Outputs reported as metrics; train and eval nets append them to the output record."""
        return self._metrics_schema

    @property
    def output_schema(self) -> schema.Field:
        if self._output_schema is None:
            raise layers.LayerError(f"model {self.name}: output_schema is not set")
        return self._output_schema

    @output_schema.setter
    def output_schema(self, value: schema.Field) -> None:
        if self._output_schema is not None:
            raise layers.LayerError(f"model {self.name}: output_schema is already set")
        self._output_schema = value

    @property
    def preproc_output_schema(self) -> schema.Field:
        if self._preproc_output_schema is None:
            raise layers.LayerError(f"model {self.name}: preproc_output_schema is not set")
        return self._preproc_output_schema

    @preproc_output_schema.setter
    def preproc_output_schema(self, value: schema.Field) -> None:
        if self._preproc_output_schema is not None:
            raise layers.LayerError(f"model {self.name}: preproc_output_schema is already set")
        self._preproc_output_schema = value

    @property
    def loss(self) -> schema.Field:
        if self._loss is None:
            raise layers.LayerError(f"model {self.name}: no loss was added")
        return self._loss

    @loss.setter
    def loss(self, loss: schema.Field) -> None:
        if self._loss is not None:
            raise layers.LayerError(f"model {self.name}: loss is already set")
        self._loss = loss

    def has_loss(self) -> bool:
        return self._loss is not None

    def add_loss(self, loss: schema.Field, name: str = "unnamed") -> None:
        """Add ``loss`` (a Scalar or Struct) to the loss Struct as ``name`` (``name_auto_<k>`` if taken)."""
        if loss is None:
            raise layers.LayerError("added loss should not be None")
        if not isinstance(loss, (schema.Scalar, schema.Struct)):
            raise layers.LayerError(f"added loss should be a Scalar or a Struct, got {type(loss).__name__}")
        if self._loss is None:
            self._loss = schema.Struct((name, loss))
            return
        prefix, index = name, 0
        while prefix in self._loss:
            prefix = f"{name}_auto_{index}"
            index += 1
        self._loss = self._loss + schema.Struct((prefix, loss))

    def add_output_schema(self, name: str, value: schema.Field) -> None:
        if value is None:
            raise layers.LayerError(f"added output schema {name} should not be None")
        if not isinstance(value, (schema.Scalar, schema.Struct)):
            raise layers.LayerError(f"output schema {name} should be a Scalar or a Struct: {type(value).__name__}")
        if self._output_schema is None:
            self._output_schema = schema.Struct((name, value))
            return
        if name in self._output_schema.fields:
            raise layers.LayerError(f"output schema field {name} already exists")
        self._output_schema = self._output_schema + schema.Struct((name, value))

    def add_trainer_extra_schema(self, trainer_extra_schema: schema.Field) -> None:
        record = schema.NewRecord(self.net, trainer_extra_schema)
        self._trainer_extra_schema += record

    # -- layer factory -----------------------------------------------------------------
    def __getattr__(self, layer: str) -> Any:
        if layer.startswith("__"):
            raise AttributeError(layer)
        if layers.layer_exists(layer):

            def make_layer(*args: Any, **kwargs: Any) -> schema.Field:
                new_layer = layers.create_layer(layer, self, *args, **kwargs)
                if kwargs.get("output_to_metrics", False):
                    new_layer.export_output_for_metrics()
                if kwargs.get("params_to_metrics", False):
                    new_layer.export_params_for_metrics()
                return self.add_layer(new_layer)

            return make_layer
        op_type = layer[len("FunctionalLayer") :] if layer.startswith("FunctionalLayer") else layer
        if layer.startswith("FunctionalLayer") or core.IsOperator(layer):

            def make_functional(*args: Any, **kwargs: Any) -> schema.Field:
                def apply_operator(net: Any, in_record: Any, out_record: Any, **op_kwargs: Any) -> None:
                    getattr(net, op_type)(in_record.field_blobs(), out_record.field_blobs(), **op_kwargs)

                kwargs.setdefault("name", op_type)
                new_layer = layers.create_layer("Functional", self, *args, function=apply_operator, **kwargs)
                if kwargs.get("output_to_metrics", False):
                    new_layer.export_output_for_metrics()
                if kwargs.get("params_to_metrics", False):
                    new_layer.export_params_for_metrics()
                return self.add_layer(new_layer)

            return make_functional
        raise AttributeError(f"trying to create non-registered layer: {layer}")

    @property
    def layers(self) -> list[layers.ModelLayer]:
        return self._layers

    def _GetOne(self) -> Any:
        return self.global_constants["ONE"]

    def NoOptim(self, *args: Any, **kwargs: Any) -> None:
        """An optimizer that leaves its parameter untouched."""

    @property
    def breakdown_map(self) -> dict[str, int] | None:
        return self._breakdown_map

    @breakdown_map.setter
    def breakdown_map(self, breakdown_map: dict[str, int]) -> None:
        if not isinstance(breakdown_map, dict) or not all(isinstance(k, str) for k in breakdown_map):
            raise layers.LayerError("breakdown_map maps feature names (str) to indices")
        if sorted(breakdown_map.values()) != list(range(len(breakdown_map))):
            raise layers.LayerError("breakdown_map values must be 0..n-1")
        self._breakdown_map = breakdown_map
