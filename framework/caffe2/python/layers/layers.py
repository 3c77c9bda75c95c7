"""The base of Caffe2's layers (``caffe2.python.layers.layers``): ``ModelLayer``, its parameters
(``LayerParameter``), the layer registry, the instantiation contexts and the record helpers
(``IdList``, ``IdScoreList``, ``get_categorical_limit``, ``set_request_only``).

A layer is a meta-operator: it owns its parameters, declares an ``output_schema`` (a record bound
to blobs) at construction and adds its operators to any net later, differently for training,
evaluation and prediction (``add_train_ops`` / ``add_eval_ops`` / ``add_ops``). All blobs a layer
makes are named under the layer's name scope (``<layer name>/<blob>``).
"""

from __future__ import annotations

import logging
from collections import namedtuple
from typing import Any

import numpy as np

from framework import core, workspace
from framework.caffe2.python import schema, scope
from framework.caffe2.python import utils as _utils
from framework.caffe2.python.layers.tags import TagContext
from framework.errors import FrameworkError
from framework.ops.arg_reader import ArgReader
from framework.proto.framework_pb2 import OperatorDef

OpAlmostEqual = _utils.OpAlmostEqual

__all__ = [
    "AccessedFeatures", "IdList", "IdListWithEvicted", "IdScoreList", "IdScoreListWithEvicted",
    "InstantiationContext", "LayerError", "LayerParameter", "LayerPsParam", "ModelLayer",
    "almost_equal_schemas", "create_layer", "get_avg_length", "get_categorical_limit", "get_key", "get_layer_class",
    "is_request_only_scalar", "layer_exists", "register_layer", "set_request_only",
]  # fmt: skip

logger = logging.getLogger(__name__)


class LayerError(FrameworkError, AssertionError, ValueError):
    """A layer or layer model was given a record, argument or state it cannot take. Also an
    AssertionError and a ValueError: Caffe2 asserts these conditions, and code written for it
    (its own tests included) catches AssertionError."""


IdList = schema.List(np.int64)
IdScoreList = schema.Map(np.int64, np.float32)
IdListWithEvicted = schema.ListWithEvicted(np.int64)
IdScoreListWithEvicted = schema.MapWithEvicted(np.int64, np.float32)

# What a layer reads of a feature field: the feature type and the set of feature ids (Caffe2 2020).
AccessedFeatures = namedtuple("AccessedFeatures", ["type", "ids"])


def almost_equal_schemas(
    record: schema.Field, original_schema: schema.Field, check_field_names: bool = True,
    check_field_types: bool = True, check_field_metas: bool = False,
) -> bool:  # fmt: skip
    """``schema.equal_schemas``, where an IdList (IdScoreList) also matches its form with evicted values."""
    kw = {
        "check_field_names": check_field_names,
        "check_field_types": check_field_types,
        "check_field_metas": check_field_metas,
    }
    if original_schema == IdList:
        return schema.equal_schemas(record, IdList, **kw) or schema.equal_schemas(record, IdListWithEvicted, **kw)
    if original_schema == IdScoreList:
        return schema.equal_schemas(record, IdScoreList, **kw) or schema.equal_schemas(
            record, IdScoreListWithEvicted, **kw
        )
    return schema.equal_schemas(record, original_schema)


def get_key(record: schema.Field) -> schema.Scalar:
    """The id field of an IdList (``values``) or IdScoreList (``values:keys``), evicted forms included;
    it must carry metadata."""
    if almost_equal_schemas(record, IdList):
        key = "values"
    elif almost_equal_schemas(record, IdScoreList, check_field_types=False):
        key = "values:keys"
    else:
        raise NotImplementedError(f"not an IdList or IdScoreList: {record.field_names()}")
    field = record[key]
    if field.metadata is None:
        raise LayerError(f"blob {field()} has no metadata")
    return field


def get_categorical_limit(record: schema.Field) -> int:
    return get_key(record).metadata.categorical_limit


def get_avg_length(record: schema.Field) -> Any:
    return record["lengths"].metadata.expected_value


def set_request_only(field: schema.Field) -> None:
    """Mark every scalar of ``field`` request-only (its FeatureSpec's ``feature_is_request_only``),
    keeping the rest of its metadata; a categorical_limit on a non-integer field is an error."""
    for f in field.all_scalars():
        meta = f.metadata
        limit = meta.categorical_limit if meta else None
        expected = meta.expected_value if meta else None
        specs = meta.feature_specs if meta else None
        if specs:
            specs = specs._replace(feature_is_request_only=True)
        else:
            specs = schema.FeatureSpec(feature_is_request_only=True)
        if not np.issubdtype(f.field_type(), np.integer) and limit is not None:
            raise LayerError(f"categorical_limit set on the non-integer field {f.field_type()}")
        f.set_metadata(schema.Metadata(categorical_limit=limit, expected_value=expected, feature_specs=specs))


def is_request_only_scalar(scalar: schema.Field) -> bool:
    metas = scalar.field_metadata()
    if not metas:
        return False
    return all(m and m.feature_specs and getattr(m.feature_specs, "feature_is_request_only", False) for m in metas)


class InstantiationContext:
    """Where a layer is being instantiated; each selects one of the layer's ``add_*_ops``."""

    ACCUMULATE_PRED = "accumulate_pred"
    EVAL = "eval"
    PREDICTION = "prediction"
    TRAINING = "training"


_LAYER_REGISTRY: dict[str, type] = {}


def register_layer(name: str, layer: type) -> None:
    if name in _LAYER_REGISTRY and _LAYER_REGISTRY[name] is not layer:
        raise LayerError(f"layer {name} already registered")
    _LAYER_REGISTRY[name] = layer


def layer_exists(name: str) -> bool:
    return name in _LAYER_REGISTRY


def get_layer_class(name: str) -> type:
    return _LAYER_REGISTRY[name]


def create_layer(layer_name: str, *args: Any, **kwargs: Any) -> ModelLayer:
    return _LAYER_REGISTRY[layer_name](*args, **kwargs)


LayerPsParam = namedtuple("LayerPsParam", ["sparse_key", "average_length"])


class LayerParameter:
    """One trainable blob of a layer: its initializer op, optimizer, regularizer and shape (from
    the initializer's ``shape`` argument, else by running the initializer in a scratch workspace)."""

    def __init__(
        self, parameter: Any = None, optimizer: Any = None, initializer: OperatorDef | None = None,
        ps_param: Any = None, regularizer: Any = None,
    ) -> None:  # fmt: skip
        if not isinstance(parameter, core.BlobReference):
            raise LayerError(f"LayerParameter expects a BlobReference, got {parameter!r}")
        self._shape: list[int] | None = None
        self.parameter = parameter
        self.optimizer = optimizer
        self.initializer = initializer
        self.ps_param = ps_param
        self.regularizer = regularizer

    @property
    def initializer(self) -> OperatorDef | None:
        return self._initializer

    @initializer.setter
    def initializer(self, op: OperatorDef | None) -> None:
        if op is not None and not core.IsOperator(getattr(op, "type", None)):
            raise LayerError(f"initializer expects an operator, got {type(op).__name__}")
        self._initializer = op
        if op is not None:
            self.shape = self._infer_shape_from_initializer()

    @property
    def shape(self) -> list[int] | None:
        return self._shape

    @shape.setter
    def shape(self, shape: list[int] | None) -> None:
        if self._shape is not None and self._shape != shape:
            raise LayerError(f"inconsistent shape for layer parameter {self}: expected {self._shape}, got {shape}")
        self._shape = shape

    def _infer_shape_from_initializer(self) -> list[int] | None:
        args = ArgReader(self.initializer)
        if args.has("shape"):
            return list(args.proto("shape").ints)
        try:
            net = core.Net("shape_checker")
            net.Proto().op.extend([self.initializer])
            with workspace.WorkspaceGuard("model_init_by_loading_params"):
                workspace.ResetWorkspace()
                workspace.RunNetOnce(net)
                value = workspace.FetchBlob(str(self.parameter))
                # a mutex, map or index has no shape
                shape = list(value.shape) if isinstance(value, np.ndarray) else None
                workspace.ResetWorkspace()
            return shape
        except RuntimeError as exc:
            logger.warning("cannot infer the shape of %s from %s: %s", self.parameter, self.initializer.type, exc)
            return None

    def __str__(self) -> str:
        return str(self.parameter)


class ModelLayer:
    """Base of all layers (see module doc).

    ``model``: the LayerModelHelper; ``prefix``: the layer's name (made unique by the model);
    ``input_record``: a schema record bound to blobs; ``predict_input_record_fields``: the subset
    of the input used at prediction; ``tags``: added to the ones of the enclosing ``Tags`` scopes.
    A layer whose every input scalar is request-only marks its outputs request-only.
    """

    def __init__(
        self, model: Any, prefix: str, input_record: schema.Field, predict_input_record_fields: Any = None,
        tags: Any = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        self.name = model.next_layer_name(prefix)
        self.model = model
        self.kwargs = kwargs
        self._input_record = input_record
        if predict_input_record_fields:
            if not isinstance(predict_input_record_fields, list):
                predict_input_record_fields = [predict_input_record_fields]
            self._predict_input_record = self._input_record[predict_input_record_fields]
        else:
            self._predict_input_record = None
        scalars = input_record.all_scalars()
        self.request_only = bool(scalars) and all(is_request_only_scalar(s) for s in scalars)
        self._output_schema: schema.Field | None = None
        self._predict_output_schema: schema.Field | None = None
        self.eval_output_schema: schema.Field | None = None
        self.tags = set(tags or [])
        self.tags.update(TagContext.current().tags)
        self.params: list[LayerParameter] = []
        self._export_output_for_metrics = False
        self._export_params_for_metrics = False

    def get_type(self) -> str:
        return type(self).__name__

    def _check_output_schema(self) -> None:
        if self._output_schema is None:
            raise LayerError(f"layer {self.name}: output schema is not initialized")
        if self._predict_output_schema is not None and not schema.is_schema_subset(
            self._predict_output_schema, self._output_schema
        ):
            raise LayerError(f"layer {self.name}: predict_output_schema is not a subset of output_schema")

    @property
    def predict_input_record(self) -> schema.Field:
        return self._predict_input_record or self._input_record

    @property
    def input_record(self) -> schema.Field:
        return self._input_record

    @property
    def predict_output_schema(self) -> schema.Field:
        self._check_output_schema()
        return self._predict_output_schema or self._output_schema

    @predict_output_schema.setter
    def predict_output_schema(self, output_schema: schema.Field) -> None:
        if self._predict_output_schema is not None:
            raise LayerError(f"layer {self.name}: predict_output_schema is already set")
        self._predict_output_schema = output_schema

    @property
    def output_schema(self) -> schema.Field:
        if self.request_only:
            set_request_only(self._output_schema)
        self._check_output_schema()
        return self._output_schema

    @output_schema.setter
    def output_schema(self, output_schema: schema.Field) -> None:
        if self._output_schema is not None:
            raise LayerError(f"layer {self.name}: output_schema is already set")
        self._output_schema = output_schema

    def get_parameters(self) -> list[LayerParameter]:
        return self.params

    def get_fp16_compatible_parameters(self) -> list[Any]:
        """The parameters that may be stored as float16 (none by default)."""
        return []

    def get_memory_usage(self) -> int:
        return 0

    def get_accessed_features(self) -> dict[str, list[AccessedFeatures]]:
        """{input field: [AccessedFeatures]} of the features this layer reads (none by default)."""
        return {}

    def add_init_params(self, init_net: Any) -> None:
        """Append the initializers of this layer's parameters to ``init_net`` (under the current
        device scope when the op has none), skipping ones equal to an op already there."""
        device = scope.CurrentDeviceScope()
        for param in self.params:
            init_op = param.initializer
            if init_op is None:
                continue
            if not init_op.HasField("device_option") and device is not None:
                copy = OperatorDef()
                copy.CopyFrom(init_op)
                copy.device_option.CopyFrom(device)
                init_op = copy
            if any(OpAlmostEqual(op, init_op, "debug_info") for op in init_net.Proto().op):
                continue
            init_net.Proto().op.extend([init_op])

    def create_param(
        self, param_name: str, shape: Any, initializer: Any, optimizer: Any, ps_param: Any = None,
        regularizer: Any = None,
    ) -> Any:  # fmt: skip
        """A parameter named ``<layer name>/<param_name>`` (subject to parameter sharing); returns its blob."""
        with scope.NameScope(self.name, reset=True):
            param = self.model.create_param(
                param_name=param_name, shape=shape, initializer=initializer, optimizer=optimizer,
                ps_param=ps_param, regularizer=regularizer,
            )  # fmt: skip
        if any(param.parameter == p.parameter for p in self.params):
            raise LayerError(f"layer {self.name}: parameter {param.parameter} created twice")
        self.params.append(param)
        return param.parameter

    def get_next_blob_reference(self, name: str) -> Any:
        """A fresh blob named under this layer's scope."""
        with scope.NameScope(self.name, reset=True):
            return self.model.net.NextScopedBlob(name)

    def add_operators(self, net: Any, init_net: Any = None, context: str = InstantiationContext.TRAINING) -> None:
        """Add this layer's ops for ``context`` to ``net`` (and its initializers to ``init_net``,
        which training requires)."""
        with scope.NameScope(self.name):
            needs_init = context not in (
                InstantiationContext.PREDICTION, InstantiationContext.EVAL, InstantiationContext.ACCUMULATE_PRED,
            )  # fmt: skip
            if needs_init and not init_net:
                raise LayerError(f"layer {self.name}: only prediction and eval contexts may omit init_net")
            if init_net:
                self.add_init_params(init_net)
            if context == InstantiationContext.TRAINING:
                self.add_train_ops(net)
            elif context == InstantiationContext.EVAL:
                self.add_eval_ops(net)
            elif context == InstantiationContext.ACCUMULATE_PRED:
                self.add_ops_to_accumulate_pred(net)
            else:
                self.add_ops(net)
            if context in (InstantiationContext.TRAINING, InstantiationContext.EVAL) and (
                self._export_params_for_metrics
            ):
                self.add_param_copy_operators(net)

    def add_ops(self, net: Any) -> None:
        """The prediction ops (every layer defines them)."""
        raise NotImplementedError(f"layer {type(self).__name__} defines no ops")

    def add_eval_ops(self, net: Any) -> None:
        self.add_ops(net)

    def add_train_ops(self, net: Any) -> None:
        self.add_eval_ops(net)

    def add_ops_to_accumulate_pred(self, net: Any) -> None:
        self.add_eval_ops(net)

    def add_param_copy_operators(self, net: Any) -> None:
        for param in self.params:
            copy_ref = self.model.metrics_schema[str(param.parameter)]
            net.Copy([param.parameter], copy_ref.field_blobs())

    def export_output_for_metrics(self) -> None:
        self._export_output_for_metrics = True
        self.model.add_metric_field(self.name + "/output", self.output_schema)

    def export_params_for_metrics(self) -> None:
        self._export_params_for_metrics = True
        for param in self.params:
            copy_ref = self.get_next_blob_reference(str(param).split("/")[-1] + "_copy")
            self.model.add_metric_field(str(param.parameter), copy_ref)
