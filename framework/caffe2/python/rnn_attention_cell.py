"""rnn_cell's AttentionCell and LSTMWithAttention (Caffe2's, over RecurrentNetwork).

The decoder cell's recurrent FC also reads the previous attention context; after each step the
attention (framework.caffe2.python.attention) gives the new context, a recurrent state of the cell. Outputs:
the decoder states, the context and (SoftCoverage) the coverage per step; the output sequence
concatenates the decoder output and the context. ``encoder_lengths`` masks the encoder positions
past each row's length (framework.caffe2.python.attention).
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import brew
from framework.caffe2.python.attention import (
    AttentionType,
    apply_dot_attention,
    apply_recurrent_attention,
    apply_regular_attention,
    apply_soft_coverage_attention,
)
from framework.caffe2.python.rnn_cell import LSTMCell, RNNCell
from framework.caffe2.python.rnn_cells_more import MILSTMCell

__all__ = ["AttentionCell", "LSTMWithAttention", "LSTMWithAttentionCell", "MILSTMWithAttentionCell"]

_TYPES = (AttentionType.Regular, AttentionType.Recurrent, AttentionType.Dot, AttentionType.SoftCoverage)


def _concat(model: Any, blobs: list, out: str) -> Any:
    return model.net.Concat(blobs, [out, out + "_concat_dims"], axis=2)[0]


class AttentionCell(RNNCell):
    """A decoder cell whose recurrent FC also reads the previous attention context; its states
    are the decoder's, the context and (SoftCoverage) the coverage."""

    def __init__(
        self,
        encoder_output_dim: int,
        encoder_outputs: Any,
        encoder_lengths: Any,
        decoder_cell: Any,
        decoder_state_dim: int,
        attention_type: int,
        weighted_encoder_outputs: Any,
        attention_memory_optimization: bool,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if attention_type not in _TYPES:
            raise ValueError(f"unknown attention type {attention_type} (AttentionType: 0..3)")
        self.encoder_output_dim = encoder_output_dim
        self.encoder_lengths = encoder_lengths
        self.encoder_outputs = encoder_outputs
        self.decoder_cell = decoder_cell
        self.decoder_state_dim = decoder_state_dim
        self.weighted_encoder_outputs = weighted_encoder_outputs
        self.encoder_outputs_transposed = None
        self.attention_type = attention_type
        self.attention_memory_optimization = attention_memory_optimization
        self.coverage_weights = None

    @property
    def _coverage(self) -> bool:
        return self.attention_type == AttentionType.SoftCoverage

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        n_extra = 2 if self._coverage else 1
        decoder_prev, ctx_prev = states[:-n_extra], states[-n_extra]
        if extra_inputs is not None:
            raise ValueError("AttentionCell takes no extra inputs")
        decoder_states = self.decoder_cell._apply(
            model, input_t, seq_lengths, decoder_prev, timestep, extra_inputs=[(ctx_prev, self.encoder_output_dim)]
        )
        self.hidden_t_intermediate = self.decoder_cell._prepare_output(model, decoder_states)
        common = dict(
            model=model,
            encoder_output_dim=self.encoder_output_dim,
            encoder_outputs_transposed=self.encoder_outputs_transposed,
            decoder_hidden_state_t=self.hidden_t_intermediate,
            decoder_hidden_state_dim=self.decoder_state_dim,
            scope=self.name,
            encoder_lengths=self.encoder_lengths,
        )
        extra = []
        if self.attention_type == AttentionType.Recurrent:
            ctx, self.attention_weights_3d, blobs = apply_recurrent_attention(
                weighted_encoder_outputs=self.weighted_encoder_outputs,
                attention_weighted_encoder_context_t_prev=ctx_prev,
                **common,
            )
        elif self.attention_type == AttentionType.Regular:
            ctx, self.attention_weights_3d, blobs = apply_regular_attention(
                weighted_encoder_outputs=self.weighted_encoder_outputs, **common
            )
        elif self.attention_type == AttentionType.Dot:
            ctx, self.attention_weights_3d, blobs = apply_dot_attention(**common)
        else:
            if self.coverage_weights is None:
                raise ValueError("SoftCoverage attention: call build_initial_coverage(model) first")
            ctx, self.attention_weights_3d, blobs, coverage_t = apply_soft_coverage_attention(
                weighted_encoder_outputs=self.weighted_encoder_outputs,
                coverage_t_prev=states[-1],
                coverage_weights=self.coverage_weights,
                **common,
            )
            extra = [coverage_t]
        if self.attention_memory_optimization:
            self.recompute_blobs.extend(blobs)
        output = list(decoder_states) + [ctx] + extra
        k = self.decoder_cell.get_output_state_index()
        output[k] = model.net.Copy(output[k], self.scope("hidden_t_external"))
        model.net.AddExternalOutputs(*output)
        return output

    def get_attention_weights(self):
        return self.attention_weights_3d

    def prepare_input(self, model, input_blob):
        if self.encoder_outputs_transposed is None:
            self.encoder_outputs_transposed = brew.transpose(
                model, self.encoder_outputs, self.scope("encoder_outputs_transposed"), axes=[1, 2, 0]
            )
        if self.weighted_encoder_outputs is None and self.attention_type != AttentionType.Dot:
            self.weighted_encoder_outputs = self._encoder_fc(model, "weighted_encoder_outputs")
        return self.decoder_cell.prepare_input(model, input_blob)

    def _encoder_fc(self, model, name):
        d = self.encoder_output_dim
        return brew.fc(model, self.encoder_outputs, self.scope(name), dim_in=d, dim_out=d, axis=2)

    def build_initial_coverage(self, model):
        """SoftCoverage: makes ``coverage_weights`` (an FC of the encoder outputs) and returns the
        initial coverage, zeros of shape [encoder_length] (RecurrentNetwork repeats it per row)."""
        if not self._coverage:
            raise ValueError("build_initial_coverage is for AttentionType.SoftCoverage")
        self.coverage_weights = self._encoder_fc(model, "coverage_weights")
        shape = model.net.Shape(self.encoder_outputs, self.scope("encoder_outputs_shape"))
        length = model.net.Slice(shape, self.scope("encoder_length"), starts=[0], ends=[1])
        return model.net.ConstantFill(length, self.scope("initial_coverage"), value=0.0, input_as_shape=1)

    def get_state_names(self):
        names = list(self.decoder_cell.get_state_names())
        names[self.get_output_state_index()] = self.scope("hidden_t_external")
        names.append(self.scope("attention_weighted_encoder_context_t"))
        if self._coverage:
            names.append(self.scope("coverage_t"))
        return names

    def get_output_dim(self):
        return self.decoder_state_dim + self.encoder_output_dim

    def get_output_state_index(self):
        return self.decoder_cell.get_output_state_index()

    def _prepare_output(self, model, states):
        ctx = states[-2] if self._coverage else states[-1]
        return _concat(model, [self.hidden_t_intermediate, ctx], self.scope("states_and_context_combination"))

    def _prepare_output_sequence(self, model, state_outputs):
        n_extra = 2 if self._coverage else 1
        decoder_output = self.decoder_cell._prepare_output_sequence(model, state_outputs[: -2 * n_extra])
        ctx_index = 2 * (len(self.get_state_names()) - n_extra)
        return _concat(model, [decoder_output, state_outputs[ctx_index]], self.scope("states_and_context_combination"))


class LSTMWithAttentionCell(AttentionCell):
    """AttentionCell over an LSTMCell decoder named ``<name>/decoder``."""

    _decoder_class = LSTMCell

    def __init__(
        self,
        encoder_output_dim,
        encoder_outputs,
        encoder_lengths=None,
        decoder_input_dim=None,
        decoder_state_dim=None,
        name=None,
        attention_type=AttentionType.Regular,
        weighted_encoder_outputs=None,
        forget_bias=0.0,
        lstm_memory_optimization=False,
        attention_memory_optimization=False,
        forward_only=False,
    ):
        decoder_cell = self._decoder_class(
            input_size=decoder_input_dim,
            hidden_size=decoder_state_dim,
            forget_bias=forget_bias,
            memory_optimization=lstm_memory_optimization,
            name=f"{name}/decoder",
            forward_only=False,
            drop_states=False,
        )
        super().__init__(
            encoder_output_dim=encoder_output_dim,
            encoder_outputs=encoder_outputs,
            encoder_lengths=encoder_lengths,
            decoder_cell=decoder_cell,
            decoder_state_dim=decoder_state_dim,
            name=name,
            attention_type=attention_type,
            weighted_encoder_outputs=weighted_encoder_outputs,
            attention_memory_optimization=attention_memory_optimization,
            forward_only=forward_only,
        )


class MILSTMWithAttentionCell(LSTMWithAttentionCell):
    """AttentionCell over an MILSTMCell decoder (Caffe2 leaves encoder_lengths out: None here)."""

    _decoder_class = MILSTMCell


def LSTMWithAttention(
    model,
    decoder_inputs,
    decoder_input_lengths,
    initial_decoder_hidden_state,
    initial_decoder_cell_state,
    initial_attention_weighted_encoder_context,
    encoder_output_dim,
    encoder_outputs,
    encoder_lengths,
    decoder_input_dim,
    decoder_state_dim,
    scope,
    attention_type=AttentionType.Regular,
    outputs_with_grads=(0, 4),
    weighted_encoder_outputs=None,
    lstm_memory_optimization=False,
    attention_memory_optimization=False,
    forget_bias=0.0,
    forward_only=False,
):
    """Caffe2's rnn_cell.LSTMWithAttention: (hidden_all, hidden_last, cell_all, cell_last, context_all,
    context_last)."""
    cell = LSTMWithAttentionCell(
        encoder_output_dim=encoder_output_dim,
        encoder_outputs=encoder_outputs,
        encoder_lengths=encoder_lengths,
        decoder_input_dim=decoder_input_dim,
        decoder_state_dim=decoder_state_dim,
        name=scope,
        attention_type=attention_type,
        weighted_encoder_outputs=weighted_encoder_outputs,
        forget_bias=forget_bias,
        lstm_memory_optimization=lstm_memory_optimization,
        attention_memory_optimization=attention_memory_optimization,
        forward_only=forward_only,
    )
    initial = [initial_decoder_hidden_state, initial_decoder_cell_state, initial_attention_weighted_encoder_context]
    if attention_type == AttentionType.SoftCoverage:
        initial.append(cell.build_initial_coverage(model))
    _, result = cell.apply_over_sequence(
        model=model,
        inputs=decoder_inputs,
        seq_lengths=decoder_input_lengths,
        initial_states=initial,
        outputs_with_grads=outputs_with_grads,
    )
    return result
