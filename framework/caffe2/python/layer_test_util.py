"""Test helpers for layers (Caffe2's ``caffe2.python.layer_test_util``).

``LayersTestCase`` gives each test (and each hypothesis example, through ``setup_example``) a
fresh workspace and a ``LayerModelHelper`` named ``test_model`` whose input features are one
``float_features`` Scalar of 32 floats; it instantiates nets from the model's layers and checks
nets against ``OpSpec(type, inputs, outputs, args)`` lists (None matches anything).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from framework import core, workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, schema, test_util
from framework.caffe2.python import utils as _utils
from framework.proto.framework_pb2 import OperatorDef

MakeArgument = _utils.MakeArgument

__all__ = ["LayersTestCase", "OpSpec"]


class OpSpec(namedtuple("OpSpec", "type input output arg")):
    """Expected op: type, input and output blob names (None entries match anything) and args."""

    def __new__(cls, op_type: str, op_input: Any, op_output: Any, op_arg: Any = None) -> OpSpec:
        return super().__new__(cls, op_type, op_input, op_output, op_arg)


class LayersTestCase(test_util.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.setup_example()

    def setup_example(self) -> None:
        """Called by hypothesis before each example: a clean workspace and model."""
        workspace.ResetWorkspace()
        self.reset_model()

    def reset_model(self, input_feature_schema: Any = None, trainer_extra_schema: Any = None) -> None:
        input_feature_schema = input_feature_schema or schema.Struct(
            ("float_features", schema.Scalar((np.float32, (32,)))),
        )
        trainer_extra_schema = trainer_extra_schema or schema.Struct()
        self.model = layer_model_helper.LayerModelHelper(
            "test_model", input_feature_schema=input_feature_schema, trainer_extra_schema=trainer_extra_schema
        )

    def new_record(self, schema_obj: Any) -> Any:
        return schema.NewRecord(self.model.net, schema_obj)

    def get_training_nets(self, add_constants: bool = False) -> tuple[Any, Any]:
        """The layers' training ops, with an init net that holds the global constants only if
        ``add_constants`` (so op lists stay easy to compare)."""
        train_net = core.Net("train_net")
        train_init_net = self.model.create_init_net("train_init_net") if add_constants else core.Net("train_init_net")
        for layer in self.model.layers:
            layer.add_operators(train_net, train_init_net)
        return train_init_net, train_net

    def get_eval_net(self) -> Any:
        return layer_model_instantiator.generate_eval_net(self.model)

    def get_predict_net(self) -> Any:
        return layer_model_instantiator.generate_predict_net(self.model)

    def run_train_net(self) -> None:
        self.model.output_schema = schema.Struct()
        train_init_net, train_net = layer_model_instantiator.generate_training_nets(self.model)
        workspace.RunNetOnce(train_init_net)
        workspace.RunNetOnce(train_net)

    def run_train_net_forward_only(self, num_iter: int = 1) -> None:
        self.model.output_schema = schema.Struct()
        train_init_net, train_net = layer_model_instantiator.generate_training_nets_forward_only(self.model)
        workspace.RunNetOnce(train_init_net)
        if num_iter <= 0:
            raise ValueError(f"num_iter must be larger than 0, got {num_iter}")
        workspace.CreateNet(train_net)
        workspace.RunNet(train_net.Proto().name, num_iter=num_iter)

    def assertBlobsEqual(self, spec_blobs: Any, op_blobs: Any) -> None:
        """Each non-None name of ``spec_blobs`` equals the op's blob at that position."""
        if spec_blobs is None:
            return
        self.assertEqual(len(spec_blobs), len(op_blobs))
        for spec_blob, op_blob in zip(spec_blobs, op_blobs):
            if spec_blob is not None:
                self.assertEqual(spec_blob, op_blob)

    def assertArgsEqual(self, spec_args: dict, op_args: Any) -> None:
        self.assertEqual(len(spec_args), len(op_args))
        op = OperatorDef()
        for arg in op_args:
            op.arg.add().CopyFrom(MakeArgument(arg.name, spec_args[arg.name]))
        self.assertEqual(op.arg, op_args)

    def assertNetContainOps(self, net: Any, op_specs: list[OpSpec]) -> Any:
        """``net``'s ops match ``op_specs`` one to one; returns the ops."""
        ops = net.Proto().op
        self.assertEqual(len(op_specs), len(ops))
        for op, spec in zip(ops, op_specs):
            self.assertEqual(spec.type, op.type)
            self.assertBlobsEqual(spec.input, op.input)
            self.assertBlobsEqual(spec.output, op.output)
            if spec.arg is not None:
                self.assertArgsEqual(spec.arg, op.arg)
        return ops
