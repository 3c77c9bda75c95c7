"""Caffe2's ``crf``: CRFWithLoss, a linear-chain CRF loss over RecurrentNetwork (batch size 1).

As ``caffe2.python.crf``: predictions [T, C] and labels [T] are padded with BOS/EOS classes;
the loss is log Z (the forward algorithm as a RecurrentNetwork whose step is a log-sum-exp over
the previous scores plus transitions) minus the score of the labelled path. Departures: the
initial state is a Slice of row 0 and the labelled path's transition score a one-hot count
dotted with the transitions (Caffe2: Gather with dense_gradient), and update_predictions uses
ViterbiPath + SwapBestPath instead of a Python op.
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import recurrent
from framework.caffe2.python.model_helper import ModelHelper

__all__ = ["CRFWithLoss"]

INT64 = core.DataType.INT64
INT32 = core.DataType.INT32


class CRFWithLoss:
    def __init__(self, model: Any, num_classes: int, transitions_blob: Any = None) -> None:
        self.model = model
        self.num_classes = num_classes
        self.num_classes_padded = num_classes + 2  # BOS and EOS
        if not transitions_blob:
            transitions_blob = model.param_init_net.UniformFill(
                [],
                [core.ScopedBlobReference("crf_transitions")],
                shape=[self.num_classes_padded, self.num_classes_padded],
                min=-1.0,
                max=1.0,
            )
        self.transitions = transitions_blob
        model.params.append(self.transitions)

    def crf_loss(self, predictions: Any, labels: Any, seq_lengths: Any = None) -> Any:
        net, init = self.model.net, self.model.param_init_net
        snapshot = net.Copy(self.transitions, core.ScopedBlobReference("transitions_snapshot"))
        unary = self._gather_entries_sum(predictions, labels, self.num_classes)
        predictions = self._pad_predictions(predictions)
        labels = self._pad_labels(labels)
        binary = self._path_binary_scores(labels, snapshot)
        total = net.Add([binary, unary], core.ScopedBlobReference("path_total"))
        initial = net.Slice([predictions], core.ScopedBlobReference("rnn_initial"), starts=[0, 0], ends=[1, -1])
        input_data, _ = net.RemovePadding([predictions], 2, padding_width=1, end_padding_width=0)
        input_data = net.ExpandDims([input_data], core.ScopedBlobReference("rnn_input_data"), dims=[1])
        transitions_copy = net.Copy(snapshot, core.ScopedBlobReference("transitions_copy"))
        all_paths = self._crf_forward(input_data, initial, transitions_copy)
        _ = init
        return net.Sub([all_paths, total], core.ScopedBlobReference("crf_loss"))

    def _pad_predictions(self, predictions: Any) -> Any:
        return self.pad_predictions(predictions, self.model.param_init_net, self.model.net, self.num_classes)

    @staticmethod
    def pad_predictions(predictions: Any, init_net: Any, net: Any, num_classes: int) -> Any:
        """``predictions`` [T, C] framed for the CRF: two more columns (begin / end of sequence, scored
        -1000 for every word) and a first and last row that can only be begin / end: [T + 2, C + 2]."""
        init = init_net
        low = -1000.0
        c = num_classes
        b_scores = init.GivenTensorFill([], "b_scores", shape=[1, c + 2], values=[low] * c + [0.0, low])
        e_scores = init.GivenTensorFill([], "e_scores", shape=[1, c + 2], values=[low] * c + [low, 0.0])
        zero = init.ConstantFill([], shape=[1], value=0, dtype=INT64)
        length = net.Cast(net.Gather([net.Shape([predictions]), zero]), to=INT32)
        t_range = net.LengthsRangeFill(length)
        padding = net.ExpandDims(net.ConstantFill([t_range], value=low, dtype=core.DataType.FLOAT), dims=[1])
        padded, _ = net.Concat([predictions, padding, padding], 2, axis=1)
        padded_all, _ = net.Concat([b_scores, padded, e_scores], 2, axis=0)
        return padded_all

    def _pad_labels(self, labels: Any) -> Any:
        net, init = self.model.net, self.model.param_init_net
        bos = init.ConstantFill([], shape=[1], value=self.num_classes, dtype=INT64)
        eos = init.ConstantFill([], shape=[1], value=self.num_classes + 1, dtype=INT64)
        labels = net.Cast([labels], to=INT64)
        padded, _ = net.Concat([bos, labels, eos], 2, axis=0)
        return padded

    def _path_binary_scores(self, labels: Any, transitions: Any) -> Any:
        net, init = self.model.net, self.model.param_init_net
        cols, _ = net.RemovePadding([labels], 2, padding_width=1, end_padding_width=0)
        rows, _ = net.RemovePadding([labels], 2, padding_width=0, end_padding_width=1)
        width = net.ConstantFill([rows], value=self.num_classes_padded, dtype=INT64)
        ids = net.Add([net.Mul([rows, width]), cols])
        size = init.ConstantFill([], shape=[1], value=self.num_classes_padded**2, dtype=INT64)
        counts = self.model.net.ReduceFrontSum([net.OneHot([ids, size])])  # times each transition is taken
        return net.ReduceFrontSum([net.DotProduct([counts, net.FlattenToVec([transitions])])])

    def _gather_entries_sum(self, in_data: Any, indices: Any, index_size: int) -> Any:
        net, init = self.model.net, self.model.param_init_net
        indices = net.Cast([indices], to=INT64)
        size = init.ConstantFill([], shape=[1], value=index_size, dtype=INT64)
        one_hot = net.OneHot([indices, size])
        scores = net.DotProduct([net.FlattenToVec(one_hot), net.FlattenToVec(in_data)])
        return net.ReduceFrontSum([scores])

    def _crf_forward(self, input_blob: Any, initial_state: Any, transitions_copy: Any) -> Any:
        net, init = self.model.net, self.model.param_init_net
        out_last = self.build_crf_net(input_blob, initial_state, transitions_copy)
        out_last, _ = net.Reshape([out_last], 2, shape=(self.num_classes_padded,))
        zero_seg = init.ConstantFill([], value=0, shape=[self.num_classes_padded], dtype=INT32)
        score = net.SortedSegmentRangeLogSumExp([out_last, zero_seg])
        score, _ = net.Reshape(score, 2, shape=())
        return score

    def build_crf_net(self, input_blob: Any, initial_state: Any, transitions: Any) -> Any:
        """The forward algorithm as a RecurrentNetwork (input T x 1 x C); returns the last scores."""
        scope = "crf_net"

        def s(name: str) -> str:
            return f"{scope}/{name}"

        c = self.num_classes_padded
        step = ModelHelper(name="crf_step", param_model=self.model)
        input_t, cell_t_prev, _ = step.net.AddExternalInputs("input_t", "cell_t_prev", transitions)
        zero_seg = step.param_init_net.ConstantFill([], [s("zero_segment_id")], value=0, shape=[c], dtype=INT32)
        prev_t = step.net.Transpose(cell_t_prev, [s("prev_transpose")], axes=(0, 2, 1))
        prev_tiled = step.net.Tile(prev_t, [s("prev_tiled")], tiles=c, axis=2)
        input_tiled = step.net.Tile(input_t, [s("input_t_tiled")], tiles=c, axis=1)
        with_prev = step.net.Add([prev_tiled, input_tiled], [s("input_with_prev")])
        with_trans = step.net.Add([with_prev, transitions], [s("prev_with_transitions")], broadcast=1)
        reshaped, _ = step.net.Reshape(
            with_trans, [s("all_with_transitions_reshaped"), s("all_with_transitions_orig")], shape=(c, c)
        )
        cell_2d = step.net.SortedSegmentRangeLogSumExp([reshaped, zero_seg], [s("cell_t_2d")])
        # the state is 1 x N(=1) x C: give the step output that shape (Caffe2 wrote the 1 x C output into it)
        cell_t, _ = step.net.Reshape(cell_2d, [s("cell_t"), s("cell_t_2d_shape")], shape=(1, 1, c))
        step.net.AddExternalOutputs(cell_t)
        _, out_last = recurrent.recurrent_net(
            net=self.model.net,
            cell_net=step.net,
            inputs=[(input_t, input_blob)],
            initial_cell_inputs=[(cell_t_prev, initial_state)],
            links={str(cell_t_prev): cell_t},
            scope=scope,
            outputs_with_grads=(1,),
        )
        return out_last

    def update_predictions(self, classes: Any) -> Any:
        """Predictions where the Viterbi path's class has the best score of each row."""
        net = self.model.net
        padded = self._pad_predictions(classes)
        path = net.ViterbiPath([padded, self.transitions], core.ScopedBlobReference("crf_viterbi_path"))
        swapped = net.SwapBestPath([padded, path], core.ScopedBlobReference("crf_swapped"))
        return net.Slice(
            [swapped], core.ScopedBlobReference("post_crf_classes"), starts=[1, 0], ends=[-2, self.num_classes]
        )
