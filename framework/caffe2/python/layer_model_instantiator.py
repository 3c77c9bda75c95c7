"""Nets from a ``LayerModelHelper`` (Caffe2's ``caffe2.python.layer_model_instantiator``).

Each generator instantiates the model's layers in a fresh net for one context, skipping layers
tagged ``EXCLUDE_FROM_<context>`` (and, given ``include_tags``, layers carrying none of them), and
sets the net's input and output records (outputs not produced by the net are dropped):

- ``generate_training_nets(model)`` -> ``(train_init_net, train_net)``: layers' training ops,
  regularizer terms, gradients of the loss, net modifiers and every parameter's optimizer;
- ``generate_training_nets_forward_only(model)``: the same without gradients and optimizers;
- ``generate_eval_net(model)``: eval ops; inputs are features + trainer extras, outputs include metrics;
- ``generate_predict_net(model)``: prediction ops over the input features only.
"""

from __future__ import annotations

from typing import Any, Iterable

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import InstantiationContext
from framework.caffe2.python.layers.tags import Tags

__all__ = [
    "generate_eval_net", "generate_predict_net", "generate_training_nets", "generate_training_nets_forward_only",
    "shrink_output_schema",
]  # fmt: skip


def _filter_layers(layers: list[Any], include_tags: Iterable[str] | None) -> list[Any]:
    if include_tags is None:
        return layers
    wanted = set(include_tags)
    return [layer for layer in layers if not wanted.isdisjoint(layer.tags)]


def shrink_output_schema(net: Any, out_schema: schema.Field) -> schema.Field:
    """``out_schema`` without the fields whose blobs ``net`` does not define (kept whole if it has
    at most one field)."""
    if len(out_schema.field_names()) <= 1:
        return out_schema
    keep = [net.BlobIsDefined(blob) for blob in out_schema.field_blobs()]

    def kept(values: list[Any]) -> list[Any]:
        return [v for ok, v in zip(keep, values) if ok]

    return schema.from_column_list(
        kept(out_schema.field_names()),
        kept(out_schema.field_types()),
        kept(out_schema.field_blobs()),
        kept(out_schema.field_metadata()),
    )


def generate_predict_net(model: Any, include_tags: Iterable[str] | None = None) -> Any:
    predict_net = core.Net("predict_net")
    for layer in _filter_layers(model.layers, include_tags):
        if Tags.EXCLUDE_FROM_PREDICTION not in layer.tags:
            layer.add_operators(predict_net, context=InstantiationContext.PREDICTION)
    predict_net.set_input_record(model.input_feature_schema.clone())
    predict_net.set_output_record(shrink_output_schema(predict_net, model.output_schema.clone()))
    return predict_net


def generate_eval_net(model: Any, include_tags: Iterable[str] | None = None) -> Any:
    eval_net = core.Net("eval_net")
    for layer in _filter_layers(model.layers, include_tags):
        if Tags.EXCLUDE_FROM_EVAL not in layer.tags:
            layer.add_operators(eval_net, context=InstantiationContext.EVAL)
    eval_net.set_input_record(model.input_feature_schema + model.trainer_extra_schema)
    eval_net.set_output_record(shrink_output_schema(eval_net, model.output_schema + model.metrics_schema))
    return eval_net


def _generate_training_net_only(model: Any, include_tags: Iterable[str] | None = None) -> tuple[Any, Any]:
    train_net = core.Net("train_net")
    train_init_net = model.create_init_net("train_init_net")
    for layer in _filter_layers(model.layers, include_tags):
        if Tags.EXCLUDE_FROM_TRAIN not in layer.tags:
            layer.add_operators(train_net, train_init_net)
    train_net.set_input_record(model.input_feature_schema + model.trainer_extra_schema)
    train_net.set_output_record(shrink_output_schema(train_net, model.output_schema + model.metrics_schema))
    return train_init_net, train_net


def generate_training_nets_forward_only(model: Any, include_tags: Iterable[str] | None = None) -> tuple[Any, Any]:
    return _generate_training_net_only(model, include_tags)


def generate_training_nets(model: Any, include_tags: Iterable[str] | None = None) -> tuple[Any, Any]:
    train_init_net, train_net = _generate_training_net_only(model, include_tags)
    model.apply_regularizers_on_loss(train_net, train_init_net)
    if not model.has_loss():
        return train_init_net, train_net
    grad_map = train_net.AddGradientOperators(model.loss.field_blobs())
    model.apply_post_grad_net_modifiers(train_net, train_init_net, grad_map)
    model.apply_optimizers(train_net, train_init_net, grad_map)
    model.apply_regularizers_after_optimizer(train_net, train_init_net, grad_map)
    model.apply_final_net_modifiers(train_net, train_init_net, grad_map)
    return train_init_net, train_net
