"""Caffe2's ``attention`` module: attention over encoder outputs for one decoder step.

Shapes as Caffe2: encoder_outputs_transposed [batch, encoder_dim, encoder_length],
weighted_encoder_outputs [encoder_length, batch, encoder_dim], the decoder state
[1, batch, decoder_dim]. Returns (context [1, batch, encoder_dim], attention weights
[batch, encoder_length, 1], blobs that may be recomputed on backward).

- Regular: e_j = v^T tanh(W_s s_j + W_h h); Recurrent adds W_c c_{t-1} (arXiv 1601.03317, 4.1);
- Dot: e_j = s_j . h (h projected to the encoder dim when the dims differ).
Departure: ``encoder_lengths`` masking is not supported (every encoder position is attended).
"""

from __future__ import annotations

from typing import Any

from framework import brew

__all__ = ["AttentionType", "apply_dot_attention", "apply_recurrent_attention", "apply_regular_attention", "s"]


class AttentionType:
    Regular, Recurrent, Dot, SoftCoverage = range(4)


def s(scope: Any, name: str) -> str:
    return f"{scope}/{name}"


def _no_lengths(encoder_lengths: Any) -> None:
    if encoder_lengths is not None:
        raise NotImplementedError("attention with encoder_lengths (masked positions) is not supported")


def _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, attention_weights_3d, scope):
    ctx = model.net.BatchMatMul(
        [encoder_outputs_transposed, attention_weights_3d], s(scope, "attention_weighted_encoder_context")
    )
    ctx, _ = model.net.Reshape(
        ctx, [ctx, s(scope, "attention_weighted_encoder_context_old_shape")], shape=[1, -1, encoder_output_dim]
    )
    return ctx


def _calc_attention_weights(model, attention_logits_transposed, scope):
    return brew.softmax(model, attention_logits_transposed, s(scope, "attention_weights_3d"), axis=1)


def _calc_attention_logits_from_sum_match(model, summed, encoder_output_dim, scope):
    summed = model.net.Tanh(summed, summed)
    v = model.create_param(s(scope, "attention_v"), [1, encoder_output_dim], ("XavierFill", {}))
    zeros = model.param_init_net.ConstantFill([], s(scope, "attention_zeros"), value=0.0, shape=[1])
    logits = model.net.FC([summed, v, zeros], [s(scope, "attention_logits")], axis=2)
    return model.net.Transpose(logits, s(scope, "attention_logits_transposed"), axes=[1, 0, 2])


def _apply_fc_weight_for_sum_match(model, input, dim_in, dim_out, scope, name):  # noqa: A002
    out = brew.fc(model, input, s(scope, name), dim_in=dim_in, dim_out=dim_out, axis=2)
    return model.net.Squeeze(out, out, dims=[0])


def apply_recurrent_attention(
    model,
    encoder_output_dim,
    encoder_outputs_transposed,
    weighted_encoder_outputs,
    decoder_hidden_state_t,
    decoder_hidden_state_dim,
    attention_weighted_encoder_context_t_prev,
    scope,
    encoder_lengths=None,
):
    _no_lengths(encoder_lengths)
    prev = _apply_fc_weight_for_sum_match(
        model,
        attention_weighted_encoder_context_t_prev,
        encoder_output_dim,
        encoder_output_dim,
        scope,
        "weighted_prev_attention_context",
    )
    hid = _apply_fc_weight_for_sum_match(
        model,
        decoder_hidden_state_t,
        decoder_hidden_state_dim,
        encoder_output_dim,
        scope,
        "weighted_decoder_hidden_state",
    )
    tmp = model.net.Add([prev, hid], s(scope, "decoder_hidden_encoder_outputs_sum_tmp"))
    summed = model.net.Add([weighted_encoder_outputs, tmp], s(scope, "decoder_hidden_encoder_outputs_sum"), broadcast=1)
    logits = _calc_attention_logits_from_sum_match(model, summed, encoder_output_dim, scope)
    weights = _calc_attention_weights(model, logits, scope)
    ctx = _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, weights, scope)
    return ctx, weights, [summed]


def apply_regular_attention(
    model,
    encoder_output_dim,
    encoder_outputs_transposed,
    weighted_encoder_outputs,
    decoder_hidden_state_t,
    decoder_hidden_state_dim,
    scope,
    encoder_lengths=None,
):
    _no_lengths(encoder_lengths)
    hid = _apply_fc_weight_for_sum_match(
        model,
        decoder_hidden_state_t,
        decoder_hidden_state_dim,
        encoder_output_dim,
        scope,
        "weighted_decoder_hidden_state",
    )
    summed = model.net.Add([weighted_encoder_outputs, hid], s(scope, "decoder_hidden_encoder_outputs_sum"), broadcast=1)
    logits = _calc_attention_logits_from_sum_match(model, summed, encoder_output_dim, scope)
    weights = _calc_attention_weights(model, logits, scope)
    ctx = _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, weights, scope)
    return ctx, weights, [summed]


def apply_dot_attention(
    model,
    encoder_output_dim,
    encoder_outputs_transposed,
    decoder_hidden_state_t,
    decoder_hidden_state_dim,
    scope,
    encoder_lengths=None,
):
    _no_lengths(encoder_lengths)
    if decoder_hidden_state_dim != encoder_output_dim:
        hid = brew.fc(
            model,
            decoder_hidden_state_t,
            s(scope, "weighted_decoder_hidden_state"),
            dim_in=decoder_hidden_state_dim,
            dim_out=encoder_output_dim,
            axis=2,
        )
    else:
        hid = decoder_hidden_state_t
    sq = model.net.Squeeze(hid, s(scope, "squeezed_weighted_decoder_hidden_state"), dims=[0])
    sq = model.net.ExpandDims(sq, s(scope, "expanded_weighted_decoder_hidden_state"), dims=[2])
    logits = model.net.BatchMatMul([encoder_outputs_transposed, sq], s(scope, "attention_logits"), trans_a=1)
    weights = _calc_attention_weights(model, logits, scope)
    ctx = _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, weights, scope)
    return ctx, weights, []
