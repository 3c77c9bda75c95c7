"""Caffe2's ``attention`` module: attention over encoder outputs for one decoder step.

Shapes as Caffe2: encoder_outputs_transposed [batch, encoder_dim, encoder_length],
weighted_encoder_outputs [encoder_length, batch, encoder_dim], the decoder state
[1, batch, decoder_dim]. Each ``apply_*`` returns (context [1, batch, encoder_dim],
attention weights [batch, encoder_length, 1], blobs that may be recomputed on backward)
and SoftCoverage also the new coverage [1, batch, encoder_length].

- Regular: e_j = v^T tanh(W_s s_j + W_h h); Recurrent adds W_c c_{t-1} (arXiv 1601.03317, 4.1);
- Dot: e_j = s_j . h (h projected to the encoder dim when the dims differ);
- SoftCoverage: Regular plus the coverage (sum of the previous steps' weights) times a
  separate projection of the encoder outputs.
``v`` is the FC ``<scope>/attention_logits`` (dim_out 1, bias frozen at 0). With
``encoder_lengths`` ([batch] int32) the logits of positions j >= length are masked
(SequenceMask, -inf) before the softmax, so those positions get weight 0.
Departure: SoftCoverage writes the match plus coverage to
``<scope>/decoder_hidden_encoder_outputs_sum_with_coverage`` instead of back into
``<scope>/decoder_hidden_encoder_outputs_sum`` (an in-place Add whose input the AddGradient still
reads could not be differentiated).
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import brew

__all__ = [
    "AttentionType",
    "apply_dot_attention",
    "apply_recurrent_attention",
    "apply_regular_attention",
    "apply_soft_coverage_attention",
    "s",
]


class AttentionType:
    Regular, Recurrent, Dot, SoftCoverage = tuple(range(4))


def s(scope: Any, name: str) -> str:
    return f"{scope}/{name}"


def _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, attention_weights_3d, scope):
    # [batch, encoder_dim, 1] -> [1, batch, encoder_dim]
    ctx = brew.batch_mat_mul(
        model, [encoder_outputs_transposed, attention_weights_3d], s(scope, "attention_weighted_encoder_context")
    )
    ctx, _ = model.net.Reshape(
        ctx, [ctx, s(scope, "attention_weighted_encoder_context_old_shape")], shape=[1, -1, encoder_output_dim]
    )
    return ctx


def _calc_attention_weights(model, attention_logits_transposed, scope, encoder_lengths=None):
    if encoder_lengths is not None:  # Caffe2's blob name (not scoped)
        attention_logits_transposed = model.net.SequenceMask(
            [attention_logits_transposed, encoder_lengths], ["masked_attention_logits"], mode="sequence"
        )
    return brew.softmax(model, attention_logits_transposed, s(scope, "attention_weights_3d"), axis=1)


def _calc_attention_logits_from_sum_match(model, summed, encoder_output_dim, scope):
    summed = model.net.Tanh(summed, summed)  # [encoder_length, batch, encoder_dim]
    logits = brew.fc(
        model, summed, s(scope, "attention_logits"), dim_in=encoder_output_dim, dim_out=1, axis=2, freeze_bias=True
    )
    return brew.transpose(model, logits, s(scope, "attention_logits_transposed"), axes=[1, 0, 2])


def _apply_fc_weight_for_sum_match(model, input, dim_in, dim_out, scope, name):
    out = brew.fc(model, input, s(scope, name), dim_in=dim_in, dim_out=dim_out, axis=2)
    return model.net.Squeeze(out, out, dims=[0])


def _weighted_hidden(model, decoder_hidden_state_t, decoder_hidden_state_dim, encoder_output_dim, scope):
    return _apply_fc_weight_for_sum_match(
        model,
        decoder_hidden_state_t,
        decoder_hidden_state_dim,
        encoder_output_dim,
        scope,
        "weighted_decoder_hidden_state",
    )


def _finish(model, summed, encoder_outputs_transposed, encoder_output_dim, scope, encoder_lengths):
    """logits from the summed match, masked softmax, weighted context: (context, weights)."""
    logits = _calc_attention_logits_from_sum_match(model, summed, encoder_output_dim, scope)
    weights = _calc_attention_weights(model, logits, scope, encoder_lengths)
    ctx = _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, weights, scope)
    return ctx, weights


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
    prev = _apply_fc_weight_for_sum_match(
        model,
        attention_weighted_encoder_context_t_prev,
        encoder_output_dim,
        encoder_output_dim,
        scope,
        "weighted_prev_attention_context",
    )
    hid = _weighted_hidden(model, decoder_hidden_state_t, decoder_hidden_state_dim, encoder_output_dim, scope)
    tmp = model.net.Add([prev, hid], s(scope, "decoder_hidden_encoder_outputs_sum_tmp"))
    summed = model.net.Add([weighted_encoder_outputs, tmp], s(scope, "decoder_hidden_encoder_outputs_sum"), broadcast=1)
    ctx, weights = _finish(model, summed, encoder_outputs_transposed, encoder_output_dim, scope, encoder_lengths)
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
    hid = _weighted_hidden(model, decoder_hidden_state_t, decoder_hidden_state_dim, encoder_output_dim, scope)
    summed = model.net.Add(  # use_grad_hack=1 as in Caffe2's call
        [weighted_encoder_outputs, hid], s(scope, "decoder_hidden_encoder_outputs_sum"), broadcast=1, use_grad_hack=1
    )
    ctx, weights = _finish(model, summed, encoder_outputs_transposed, encoder_output_dim, scope, encoder_lengths)
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
    sq = model.net.ExpandDims(sq, sq, dims=[2])  # [batch, encoder_dim, 1]
    logits = model.net.BatchMatMul([encoder_outputs_transposed, sq], s(scope, "attention_logits"), trans_a=1)
    weights = _calc_attention_weights(model, logits, scope, encoder_lengths)
    ctx = _calc_weighted_context(model, encoder_outputs_transposed, encoder_output_dim, weights, scope)
    return ctx, weights, []


def apply_soft_coverage_attention(
    model,
    encoder_output_dim,
    encoder_outputs_transposed,
    weighted_encoder_outputs,
    decoder_hidden_state_t,
    decoder_hidden_state_dim,
    scope,
    encoder_lengths,
    coverage_t_prev,
    coverage_weights,
):
    """Regular attention whose match adds coverage_weights [encoder_length, batch, encoder_dim]
    scaled by the coverage so far (coverage_t_prev [1, batch, encoder_length]); returns also
    coverage_t = coverage_t_prev + this step's weights."""
    hid = _weighted_hidden(model, decoder_hidden_state_t, decoder_hidden_state_dim, encoder_output_dim, scope)
    summed = model.net.Add([weighted_encoder_outputs, hid], s(scope, "decoder_hidden_encoder_outputs_sum"), broadcast=1)
    cov_2d = model.net.Squeeze(coverage_t_prev, s(scope, "coverage_t_prev_2d"), dims=[0])
    cov_t = brew.transpose(model, cov_2d, s(scope, "coverage_t_prev_transposed"))
    scaled = model.net.Mul([coverage_weights, cov_t], s(scope, "scaled_coverage_weights"), broadcast=1, axis=0)
    summed = model.net.Add([summed, scaled], s(scope, "decoder_hidden_encoder_outputs_sum_with_coverage"))
    ctx, weights = _finish(model, summed, encoder_outputs_transposed, encoder_output_dim, scope, encoder_lengths)
    weights_2d = model.net.Squeeze(weights, s(scope, "attention_weights_2d"), dims=[2])
    coverage_t = model.net.Add([coverage_t_prev, weights_2d], s(scope, "coverage_t"), broadcast=1)
    return ctx, weights, [summed], coverage_t
