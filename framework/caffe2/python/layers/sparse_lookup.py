"""``SparseLookup``: embedding lookup of an IdList or IdScoreList with a pooling reducer.

The table ``w`` has shape ``[categorical_limit] + inner_shape`` (UniformFill in
``+-sqrt(uniform_weight_init_scale_numerator/limit)`` by default, numerator 1);
``scale_bias`` (shape ``[]``, never trained) serves the 8-bit row-wise version.

=================  ==========================================================================
IdList reducers    Sum/WeightedSum -> SparseLengthsSum; Mean/WeightedMean -> SparseLengthsMean;
                   Sqrt -> SparseLengthsWeightedSum with weights 1/sqrt(length);
                   None -> Gather (one embedding per id);
                   Max, LogSumExp, LogMeanExp -> Gather + SortedSegmentRange<reducer>
IdScoreList        Sum/Mean (scores ignored); WeightedSum/WeightedMean -> SparseLengthsWeighted*;
                   PositionWeighted / RecencyWeighted -> SparseLengthsWeightedSum with
                   ``grad_on_weights=1`` (the scores are learned weights), as Sum with
                   ``use_external_weights`` (Caffe2 2020); None -> Gather
=================  ==========================================================================

An IdList / IdScoreList with evicted values (``schema.ListWithEvicted``, Caffe2 2020) gets a parameter
``reinit_vec`` (shape ``inner_shape``, the table's initializer, never trained); training first resets the
table rows of the evicted ids to it (CopyRowsToTensor).

Training reads the table at the trainer version (``fp32``, or ``fp16`` with a Float16UniformFill
table) from the arg scope of ``get_sparse_lookup_trainer_version``; evaluation and prediction at the
predictor version (``fp32`` default, ``fp16``, ``uint8rowwise``, ``fused_uint8rowwise``) from that of
``get_sparse_lookup_predictor_version`` (Caffe2's ``helpers.arg_scope``); 8-bit versions are used
only for 2-D tables with at least 8 columns.
"""

from __future__ import annotations

import collections
import functools
import math
import operator
from typing import Any

import numpy as np

from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import (
    IdList,
    IdListWithEvicted,
    IdScoreList,
    IdScoreListWithEvicted,
    LayerError,
    LayerPsParam,
    ModelLayer,
    get_categorical_limit,
    get_key,
)

__all__ = ["SparseLookup", "get_sparse_lookup_predictor_version", "get_sparse_lookup_trainer_version"]

_VERSIONS = ("fp32", "fp16", "uint8rowwise", "fused_uint8rowwise")
_SUFFIX = {"fp32": "", "fp16": "", "uint8rowwise": "8BitsRowwise", "fused_uint8rowwise": "Fused8BitRowwise"}


def get_sparse_lookup_predictor_version(version: str) -> str:
    if version not in _VERSIONS:
        raise LayerError(f"unexpected version of sparse_lookup layer {version!r} (one of {_VERSIONS})")
    return version


def get_sparse_lookup_trainer_version(version: str) -> str:
    if version not in ("fp32", "fp16"):
        raise LayerError(f"unexpected trainer version of sparse_lookup layer {version!r} (fp32 or fp16)")
    return version


def _scoped_version(getter: Any, default: str) -> str:
    """The version set by ``arg_scope([getter], version=...)`` (Caffe2's ``helpers.arg_scope``)."""
    try:
        from framework.caffe2.python.helpers.arg_scope import get_current_scope
    except ImportError:
        return default
    return getter(**get_current_scope().get(getter.__name__, {"version": default}))


def _is_id_list(record: Any) -> bool:
    return schema.equal_schemas(record, IdList) or schema.equal_schemas(record, IdListWithEvicted)


def _is_id_score_list(record: Any) -> bool:
    return schema.equal_schemas(record, IdScoreList, check_field_types=False) or schema.equal_schemas(
        record, IdScoreListWithEvicted, check_field_types=False
    )


def _evicted_values(record: Any) -> Any:
    """The ``_evicted_values`` field of an IdList/IdScoreList with evicted values, else None."""
    if schema.equal_schemas(record, IdListWithEvicted) or schema.equal_schemas(
        record, IdScoreListWithEvicted, check_field_types=False
    ):
        return record._evicted_values
    return None


class SparseLookup(ModelLayer):
    _id_list_supported_reducers = ["LogMeanExp", "LogSumExp", "Max", "Mean", "Sum", "WeightedSum", "WeightedMean",
                                   "Sqrt", "None"]  # fmt: skip
    _id_score_list_supported_reducers = ["PositionWeighted", "RecencyWeighted", "Mean", "Sum", "WeightedSum",
                                         "WeightedMean", "None"]  # fmt: skip
    _fp16_compatible_init_op_types = ["Float16UniformFill"]

    def __init__(
        self, model: Any, input_record: Any, inner_shape: Any, reducer: str, weight_init: Any = None,
        weight_optim: Any = None, name: str = "sparse_lookup", regularizer: Any = None,
        use_external_weights: bool = False, uniform_weight_init_scale_numerator: float = 1.0, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        if isinstance(inner_shape, int):
            inner_shape = [inner_shape]
        if not isinstance(inner_shape, (list, tuple)):
            raise LayerError(f"SparseLookup: inner_shape must be a list or tuple, got {type(inner_shape).__name__}")
        if reducer in ("PositionWeighted", "RecencyWeighted"):
            if not _is_id_score_list(self.input_record):
                raise LayerError(
                    f"{reducer} only supports IdScoreList, got {self.input_record!r}; use the "
                    "PositionWeighted layer to turn an IdList into an IdScoreList"
                )
            self.external_weights = input_record.values()
        elif use_external_weights:
            # Caffe2 2020: an IdScoreList's scores weigh the rows of a Sum, and get a gradient
            if not _is_id_score_list(self.input_record):
                raise LayerError(f"use_external_weights only supports IdScoreList, got {self.input_record!r}")
            if reducer not in ("Sum", "WeightedSum"):
                raise LayerError(f"use_external_weights only supports the Sum reducers, got {reducer}")
            self.external_weights = input_record.values()
        self.reducer = reducer
        self.use_external_weights = use_external_weights
        input_dim = get_categorical_limit(input_record)
        if not input_dim or input_dim <= 0:
            raise LayerError(f"{get_key(input_record)()} should have categorical limit > 0, got {input_dim}")
        self.input_dim = input_dim
        self.shape = [input_dim] + list(inner_shape)
        self.trainer_version = _scoped_version(get_sparse_lookup_trainer_version, "fp32")
        scale = math.sqrt(uniform_weight_init_scale_numerator / input_dim)
        fill = "Float16UniformFill" if self.trainer_version == "fp16" else "UniformFill"
        self.weight_init = weight_init or (fill, {"min": -scale, "max": scale})
        if self.trainer_version == "fp16":
            if self.weight_init[0] == "UniformFill":
                self.weight_init = ("Float16UniformFill", self.weight_init[1])
            if self.weight_init[0] not in self._fp16_compatible_init_op_types:
                raise LayerError(
                    f"fp16 training needs an fp16 initializer for the table, got {self.weight_init[0]} "
                    f"(supported: {self._fp16_compatible_init_op_types})"
                )
        if _is_id_list(self.input_record):
            sparse_key = self.input_record.items()
        elif _is_id_score_list(self.input_record):
            sparse_key = self.input_record.keys()
        else:
            raise NotImplementedError(f"SparseLookup: unsupported input {self.input_record!r}")
        lengths_meta = self.input_record.lengths.metadata
        avg_length = lengths_meta.expected_value if lengths_meta else None
        self.w = self.create_param(
            param_name="w", shape=self.shape, initializer=self.weight_init, optimizer=weight_optim,
            ps_param=LayerPsParam(sparse_key=sparse_key, average_length=avg_length), regularizer=regularizer,
        )  # fmt: skip
        self.evicted_values = _evicted_values(self.input_record)
        if self.evicted_values is not None:
            # the rows named by the evicted ids are reset to this vector before each training lookup
            self.reinit_vec = self.create_param(
                param_name="reinit_vec", shape=list(inner_shape), initializer=self.weight_init,
                optimizer=model.NoOptim, regularizer=None,
            )  # fmt: skip
        self.scale_bias_init = ("ConstantFill", {"value": 0.0})
        self.scale_bias = self.create_param(
            param_name="scale_bias", shape=[], initializer=self.scale_bias_init, optimizer=model.NoOptim
        )
        self.output_schema = schema.Scalar((np.float32, inner_shape), self.get_next_blob_reference("output"))

    def get_memory_usage(self) -> int:
        return functools.reduce(operator.mul, self.shape) * 4

    def get_fp16_compatible_parameters(self) -> list[Any]:
        return [self.w]

    def support_8bit(self) -> bool:
        """Row-wise quantization applies only to 2-D tables with rows of at least 8 values."""
        return len(self.shape) == 2 and self.shape[1] >= 8

    def get_8bits_compatible_parameters(self, fused: bool = True) -> list[Any]:
        if not self.support_8bit():
            return []
        if fused:
            return [collections.namedtuple("RowwiseQuantized8BitsWeight", "w")(self.w)]
        return [collections.namedtuple("RowwiseQuantized8BitsWeight", "w, scale_bias")(self.w, self.scale_bias)]

    # -- op builders -------------------------------------------------------------------
    def _gather_wrapper(self, net: Any, version: str, indices: Any, out: Any) -> Any:
        """Gather rows of ``w`` as float32 (dequantizing fp16 / 8-bit tables)."""
        if version == "fp32":
            return net.Gather([self.w, indices], out)
        gathered = net.Gather([self.w, indices], "gathered_w")
        if version == "fp16":
            return net.HalfToFloat(gathered, out)
        if version == "uint8rowwise":
            scale_bias = net.Gather([self.scale_bias, indices], "gathered_scale_bias")
            return net.Rowwise8BitQuantizedToFloat([gathered, scale_bias], out)
        return net.Fused8BitRowwiseQuantizedToFloat(gathered, out)

    def _lengths_reducer(self, net: Any, version: str, reducer: str, op_input: list[Any], **kwargs: Any) -> None:
        """``SparseLengths<reducer>`` (or its 8-bit form) of ``op_input`` into the output."""
        if version == "uint8rowwise":
            op_input = op_input + [self.scale_bias]
        op_type = "SparseLengths" + reducer + _SUFFIX[version]
        if version in ("fp32", "fp16"):
            getattr(net, op_type)(op_input, self.output_schema.field_blobs(), **kwargs)
        else:
            getattr(net, op_type)(op_input, self.output_schema.field_blobs())

    def _add_ops_id_list(self, net: Any, version: str) -> None:
        if self.reducer not in self._id_list_supported_reducers:
            raise LayerError(f"unsupported reducer {self.reducer} for ID_LIST")
        items, lengths = self.input_record.items(), self.input_record.lengths()
        if self.reducer in ("Sum", "Mean", "WeightedSum", "WeightedMean"):
            # every id of an IdList weighs 1, so the weighted reducers are the plain ones
            reducer = {"WeightedSum": "Sum", "WeightedMean": "Mean"}.get(self.reducer, self.reducer)
            self._lengths_reducer(net, version, reducer, [self.w, items, lengths])
        elif self.reducer == "Sqrt":
            weights = net.LengthsToWeights([lengths], [net.NextScopedBlob("lengths_sqrt")], power=0.5)
            self._lengths_reducer(net, version, "WeightedSum", [self.w, weights, items, lengths], grad_on_weights=0)
        elif self.reducer == "None":
            self._gather_wrapper(net, version, items, self.output_schema.field_blobs())
        else:
            rows = self._gather_wrapper(net, version, items, "table_rows")
            segment_ids = net.LengthsToSegmentIds(lengths, net.NextScopedBlob(lengths + "_sid"))
            getattr(net, "SortedSegmentRange" + self.reducer)([rows, segment_ids], self.output_schema.field_blobs())

    def _add_ops_id_score_list(self, net: Any, version: str) -> None:
        if self.reducer not in self._id_score_list_supported_reducers:
            raise LayerError(f"unsupported reducer {self.reducer} for ID_SCORE_LIST")
        keys, values, lengths = self.input_record.keys(), self.input_record.values(), self.input_record.lengths()
        if self.reducer in ("WeightedSum", "WeightedMean"):
            self._lengths_reducer(net, version, self.reducer, [self.w, values, keys, lengths], grad_on_weights=0)
        elif self.reducer in ("PositionWeighted", "RecencyWeighted") or self.use_external_weights:
            self._lengths_reducer(
                net, version, "WeightedSum", [self.w, self.external_weights, keys, lengths], grad_on_weights=1
            )
        elif self.reducer in ("Sum", "Mean"):
            self._lengths_reducer(net, version, self.reducer, [self.w, keys, lengths])
        else:
            self._gather_wrapper(net, version, keys, self.output_schema.field_blobs())

    def add_train_ops(self, net: Any) -> None:
        """An IdList / IdScoreList with evicted values (``schema.ListWithEvicted``, Caffe2 2020) gets a parameter
        ``reinit_vec`` (shape ``inner_shape``, the table's initializer, never trained); training first resets the
        table rows of the evicted ids to it (CopyRowsToTensor).

        Training reads the table at the trainer version (fp32, or fp16 from the arg scope)."""
        if self.evicted_values is not None:
            net.CopyRowsToTensor([self.w, self.evicted_values(), self.reinit_vec], [self.w])
        self._add_ops(net, self.trainer_version)

    def add_ops(self, net: Any) -> None:
        """Evaluation and prediction read it at the predictor version (8-bit only for 2-D tables
        with rows of at least 8 values)."""
        version = _scoped_version(get_sparse_lookup_predictor_version, "fp32")
        if version in ("uint8rowwise", "fused_uint8rowwise") and not self.support_8bit():
            version = "fp32"
        self._add_ops(net, version)

    def _add_ops(self, net: Any, version: str) -> None:
        if _is_id_list(self.input_record):
            self._add_ops_id_list(net, version)
        elif _is_id_score_list(self.input_record):
            self._add_ops_id_score_list(net, version)
        else:
            raise NotImplementedError(f"SparseLookup: unsupported input type {self.input_record!r}")
