"""rnn_cell's AttentionCell and LSTMWithAttention (Caffe2's, over RecurrentNetwork).

The decoder cell's recurrent FC also reads the previous attention context; after each step the
attention (framework.attention) gives the new context, a recurrent state of the cell. Outputs:
the decoder states and the context per step; the output sequence concatenates the decoder
output and the context.
"""

from __future__ import annotations

from typing import Any

from framework import brew
from framework.attention import (
    AttentionType,
    apply_dot_attention,
    apply_recurrent_attention,
    apply_regular_attention,
)
from framework.rnn_cell import LSTMCell, RNNCell

__all__ = ["AttentionCell", "LSTMWithAttention"]


def _concat(model: Any, blobs: list, out: str) -> Any:
    return model.net.Concat(blobs, [out, out + "_concat_dims"], axis=2)[0]


class AttentionCell(RNNCell):
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
        if attention_type not in (AttentionType.Regular, AttentionType.Recurrent, AttentionType.Dot):
            raise NotImplementedError(f"attention type {attention_type} (SoftCoverage) is not supported")
        self.encoder_output_dim = encoder_output_dim
        self.encoder_lengths = encoder_lengths
        self.encoder_outputs = encoder_outputs
        self.decoder_cell = decoder_cell
        self.decoder_state_dim = decoder_state_dim
        self.weighted_encoder_outputs = weighted_encoder_outputs
        self.encoder_outputs_transposed = None
        self.attention_type = attention_type
        self.attention_memory_optimization = attention_memory_optimization

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        decoder_prev, ctx_prev = states[:-1], states[-1]
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
        else:
            ctx, self.attention_weights_3d, blobs = apply_dot_attention(**common)
        if self.attention_memory_optimization:
            self.recompute_blobs.extend(blobs)
        output = list(decoder_states) + [ctx]
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
            self.weighted_encoder_outputs = brew.fc(
                model,
                self.encoder_outputs,
                self.scope("weighted_encoder_outputs"),
                dim_in=self.encoder_output_dim,
                dim_out=self.encoder_output_dim,
                axis=2,
            )
        return self.decoder_cell.prepare_input(model, input_blob)

    def get_state_names(self):
        names = list(self.decoder_cell.get_state_names())
        names[self.get_output_state_index()] = self.scope("hidden_t_external")
        names.append(self.scope("attention_weighted_encoder_context_t"))
        return names

    def get_output_dim(self):
        return self.decoder_state_dim + self.encoder_output_dim

    def get_output_state_index(self):
        return self.decoder_cell.get_output_state_index()

    def _prepare_output(self, model, states):
        return _concat(model, [self.hidden_t_intermediate, states[-1]], self.scope("states_and_context_combination"))

    def _prepare_output_sequence(self, model, state_outputs):
        decoder_output = self.decoder_cell._prepare_output_sequence(model, state_outputs[:-2])
        ctx_index = 2 * (len(self.get_state_names()) - 1)
        return _concat(model, [decoder_output, state_outputs[ctx_index]], self.scope("states_and_context_combination"))


def LSTMWithAttention(  # noqa: N802
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
    cell = AttentionCell(
        encoder_output_dim=encoder_output_dim,
        encoder_outputs=encoder_outputs,
        encoder_lengths=encoder_lengths,
        decoder_cell=LSTMCell(
            input_size=decoder_input_dim,
            hidden_size=decoder_state_dim,
            forget_bias=forget_bias,
            memory_optimization=lstm_memory_optimization,
            name=f"{scope}/decoder",
            forward_only=False,
        ),
        decoder_state_dim=decoder_state_dim,
        name=f"{scope}/attention_decoder",
        attention_type=attention_type,
        weighted_encoder_outputs=weighted_encoder_outputs,
        attention_memory_optimization=attention_memory_optimization,
        forward_only=forward_only,
    )
    initial = [initial_decoder_hidden_state, initial_decoder_cell_state, initial_attention_weighted_encoder_context]
    _, result = cell.apply_over_sequence(
        model=model,
        inputs=decoder_inputs,
        seq_lengths=decoder_input_lengths,
        initial_states=initial,
        outputs_with_grads=outputs_with_grads,
    )
    return result
