"""``Functional``: any function of ``(net, input_record, output_record, **kwargs)`` as a layer;
``LayerModelHelper`` uses it to expose every operator as a layer (``model.Relu(record, 1)``).

``output_names_or_num``: an int (that many outputs, a Scalar when 1), a list of names (a Struct),
one name (a Scalar) or a ready schema Field. Without ``output_dtypes`` the outputs' types and inner
shapes are inferred by running shape inference over the function's ops on an empty record of the
input's types: a blob whose inferred first dimension is the batch (0) gets the rest as its shape,
a 0-d blob a scalar shape; others stay untyped (with a warning)."""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from framework import core, workspace
from framework.caffe2.python import schema, scope
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.proto.framework_pb2 import TensorProto

__all__ = ["Functional"]

logger = logging.getLogger(__name__)

_NP_TYPE = {
    TensorProto.DOUBLE: np.float64,
    TensorProto.FLOAT: np.float32,
    TensorProto.INT32: np.int32,
    TensorProto.INT64: np.int64,
    TensorProto.FLOAT16: np.float16,
}


class Functional(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, output_names_or_num: Any, function: Callable,
        name: str = "functional", output_dtypes: Any = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        input_record = schema.as_record(input_record)
        super().__init__(model, name, input_record, **kwargs)
        self._function = function
        self._kwargs = kwargs
        return_struct = isinstance(output_names_or_num, list) or (
            isinstance(output_names_or_num, int) and output_names_or_num != 1
        )
        with scope.NameScope(self.name, reset=True):
            if isinstance(output_names_or_num, int):
                struct_output = schema.NewRecord(model.net, schema.RawTuple(output_names_or_num))
            elif isinstance(output_names_or_num, schema.Field):
                self.output_schema = output_names_or_num.clone(keep_blobs=True)
                return
            else:
                names = output_names_or_num if isinstance(output_names_or_num, list) else [output_names_or_num]
                struct_output = schema.NewRecord(model.net, schema.Struct(*[(n, np.void) for n in names]))
        num_outputs = len(struct_output.field_blobs())
        self.output_schema = struct_output if return_struct else struct_output[0]
        if output_dtypes is not None:
            if not isinstance(output_dtypes, list):
                output_dtypes = [output_dtypes] * num_outputs
            if len(output_dtypes) != num_outputs:
                raise LayerError(f"Functional {self.name}: {len(output_dtypes)} dtypes for {num_outputs} outputs")
            for dtype, scalar in zip(output_dtypes, self.output_schema.all_scalars()):
                scalar.set_type(dtype)
            return
        if not self._infer_output_types(input_record, function, kwargs, num_outputs, return_struct):
            logger.warning("type inference had problems for layer: %s", self.name)

    def _infer_output_types(
        self, input_record: Any, function: Callable, kwargs: dict, num_outputs: int, return_struct: bool
    ) -> bool:
        ok = True
        try:
            type_net = core.Net("_temp_type_and_shape_inference_net")
            schema.InitEmptyRecord(type_net, input_record, enforce_types=True)
            function(type_net, self.input_record, self.output_schema, **kwargs)
            shapes, types = workspace.InferShapesAndTypes([type_net], {})
        except (TypeError, RuntimeError, ValueError) as exc:
            logger.warning("Functional %s: %s", self.name, exc)
            return False
        for i in range(num_outputs):
            scalar = self.output_schema[i] if return_struct else self.output_schema
            blob = str(scalar())
            if blob not in types or blob not in shapes:
                ok = False
                continue
            dims = list(shapes[blob])
            if dims == []:
                shape: tuple = ()
            elif dims[0] == 0:
                shape = tuple(dims[1:])
            else:
                logger.warning("unexpected shape: %s", dims)
                ok = False
                continue
            np_type = _NP_TYPE.get(types[blob])
            if np_type is not None:
                scalar.set_type((np_type, shape))
        return ok

    def add_ops(self, net: Any) -> None:
        self._function(net, self.input_record, self.output_schema, **self._kwargs)
