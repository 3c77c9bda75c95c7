"""Caffe2's ``gru_cell``: GRUCell over RecurrentNetwork and the ``GRU`` builder.

The reset gate feeds the output gate's input, so the cell computes it in the step net:
r = sigmoid(gates_r(h) + x_r), then with ``linear_before_reset`` (cuDNN's and PyTorch's GRU)
x_h + r * output_gate_t(h), else x_h + output_gate_t(r * h); GRUUnit does the rest
(z and the blend). Input projection ``<scope>/i2h`` is 3H wide (r, z, h).
"""

from __future__ import annotations

import functools
from typing import Any

from framework.caffe2.python import brew
from framework.caffe2.python.rnn_cell import _SizedCell
from framework.caffe2.python.rnn_cells_more import _LSTM

__all__ = ["GRU", "GRUCell"]


class GRUCell(_SizedCell):
    """GRU step; ``linear_before_reset`` applies the reset gate after the output FC."""

    def __init__(self, input_size: int, hidden_size: int, *args: Any, linear_before_reset: bool = False, **kw: Any):
        super().__init__(input_size, hidden_size, *args, **kw)
        self.linear_before_reset = linear_before_reset

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        h_prev = states[0]
        H = self.hidden_size
        x_r, x_z, x_h = model.net.Split(
            [input_t],
            [self.scope("input_t_reset"), self.scope("input_t_update"), self.scope("input_t_output")],
            axis=2,
        )
        reset = brew.fc(model, h_prev, self.scope("reset_gate_t"), dim_in=H, dim_out=H, axis=2)
        update = brew.fc(model, h_prev, self.scope("update_gate_t"), dim_in=H, dim_out=H, axis=2)
        reset = model.net.Sum([reset, x_r], self.scope("reset_gate_t"))
        reset_sig = model.net.Sigmoid(reset, self.scope("reset_gate_t_sigmoid"))
        if self.linear_before_reset:
            out_fc = brew.fc(model, h_prev, self.scope("output_gate_t"), dim_in=H, dim_out=H, axis=2)
            output = model.net.Mul([reset_sig, out_fc], self.scope("output_gate_t_mul"))
        else:
            modified = model.net.Mul([reset_sig, h_prev], self.scope("modified_hidden_t_prev"))
            output = brew.fc(model, modified, self.scope("output_gate_t"), dim_in=H, dim_out=H, axis=2)
        update = model.net.Sum([update, x_z], self.scope("update_gate_t"))
        output = model.net.Sum([output, x_h], self.scope("output_gate_t_summed"))
        gates, _ = model.net.Concat(
            [reset, update, output], [self.scope("gates_t"), self.scope("_gates_t_concat_dims")], axis=2
        )
        ins = [h_prev, gates] + ([seq_lengths] if seq_lengths is not None else []) + [timestep]
        hidden_t = model.net.GRUUnit(
            ins, list(self.get_state_names()), drop_states=self.drop_states, sequence_lengths=seq_lengths is not None
        )
        model.net.AddExternalOutputs(hidden_t)
        return (hidden_t,)

    def prepare_input(self, model, input_blob):
        return brew.fc(
            model, input_blob, self.scope("i2h"), dim_in=self.input_size, dim_out=3 * self.hidden_size, axis=2
        )

    def get_state_names(self):
        return (self.scope("hidden_t"),)


GRU = functools.partial(_LSTM, GRUCell)
