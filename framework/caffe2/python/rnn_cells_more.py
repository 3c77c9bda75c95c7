"""More of ``rnn_cell``: MultiRNNCell, MILSTM and LayerNorm LSTM cells, and the network builders
(``LSTM``, ``MILSTM``, ``LayerNormLSTM``, ``BasicRNN``, ``cudnn_LSTM``) with Caffe2's signatures."""

from __future__ import annotations

import functools
from typing import Any

from framework import core
from framework.caffe2.python import brew
from framework.caffe2.python.rnn_cell import BasicRNNCell, LSTMCell, RNNCell
from framework.caffe2.python.scope import NameScope


def _rectify(name: Any) -> Any:
    """A blob named by a string is taken under the current NameScope, once (Caffe2's _RectifyName)."""
    if name is None or isinstance(name, core.BlobReference):
        return name
    return core.ScopedBlobReference(str(name))


class MultiRNNCell(RNNCell):
    """Stack of cells: layer i's output is layer i+1's input (``residual_output_layers`` add it).

    As Caffe2's: layer i runs under NameScope ``<name>/layer_<i>`` (the builders leave the layer cells
    unnamed), its states are named ``<name>/layer_<i>/<state>``, the first layer's input projection is
    made under ``<name>`` only, and the initializer makes layer i's states under ``layer_<i>/<cell name>``."""

    def __init__(self, cells: list, residual_output_layers: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cells = cells
        self.residual_output_layers = list(residual_output_layers or [])
        self.state_names = [f"{self.name}/layer_{i}/{n}" for i, c in enumerate(cells) for n in c.get_state_names()]
        per_layer, base = [], 0
        for c in cells:
            per_layer.append(base + c.get_output_state_index())
            base += len(c.get_state_names())
        self.output_connected_layers, self.output_indices = [], []
        for i in range(len(cells) - 1):
            if i + 1 in self.residual_output_layers:
                self.output_connected_layers.append(i)
                self.output_indices.append(per_layer[i])
            else:
                self.output_connected_layers, self.output_indices = [], []
        self.output_connected_layers.append(len(cells) - 1)
        self.output_indices.append(per_layer[-1])
        self.initializer = MultiRNNCellInitializer(cells)

    def prepare_input(self, model: Any, input_blob: Any) -> Any:
        input_blob = _rectify(input_blob)
        with NameScope(self.name or ""):
            return self.cells[0].prepare_input(model, input_blob)

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        input_t, seq_lengths, timestep = _rectify(input_t), _rectify(seq_lengths), _rectify(timestep)
        states = [_rectify(b) for b in states]
        counts = [len(c.get_state_names()) for c in self.cells]
        if len(states) != sum(counts):
            raise ValueError(f"{len(states)} states for cells holding {sum(counts)}")
        out, k, layer_input = [], 0, input_t
        for i, cell in enumerate(self.cells):
            with NameScope(self.name or ""), NameScope(f"layer_{i}"):
                layer_states = states[k : k + counts[i]]
                k += counts[i]
                prepared = cell.prepare_input(model, layer_input) if i > 0 else layer_input
                nxt = cell._apply(
                    model, prepared, seq_lengths, layer_states, timestep, extra_inputs=None if i > 0 else extra_inputs
                )
                if i != len(self.cells) - 1:
                    layer_output = cell._prepare_output(model, nxt)
                    if i > 0 and i in self.residual_output_layers:
                        layer_input = brew.sum(model, [layer_output, layer_input], self.scope(f"residual_output_{i}"))
                    else:
                        layer_input = layer_output
                out.extend(nxt)
        return out

    def get_state_names(self):
        return self.state_names

    def get_output_state_index(self):
        return sum(len(c.get_state_names()) for c in self.cells[:-1]) + self.cells[-1].get_output_state_index()

    def get_output_dim(self):
        return self.cells[-1].get_output_dim()

    def _prepare_output(self, model, states):
        return self._connected_output(model, states, 1, "_prepare_output", "residual_output")

    def _prepare_output_sequence(self, model, state_outputs):
        return self._connected_output(model, state_outputs, 2, "_prepare_output_sequence", "residual_output_sequence")

    def _connected_output(self, model, states, per_state, method, name):
        """Each output-connected layer's own output (its cell's ``method`` over its slice of ``states``,
        ``per_state`` blobs per state), summed when there are several: by layer, as Caffe2 (not by
        ``output_indices``, which callers may extend)."""
        connected, k = [], 0
        for i, cell in enumerate(self.cells):
            n = per_state * len(cell.get_state_names())
            if i in self.output_connected_layers:
                connected.append(getattr(cell, method)(model, states[k : k + n]))
            k += n
        if len(connected) > 1:
            return brew.sum(model, connected, self.scope(name))
        return connected[0]


class MultiRNNCellInitializer:
    def __init__(self, cells: list) -> None:
        self.cells = cells

    def create_states(self, model: Any) -> list:
        states = []
        for i, c in enumerate(self.cells):
            if c.initializer is None:
                raise ValueError("Either initial states or initializer have to be set")
            with NameScope(f"layer_{i}"), NameScope(c.name or ""):
                states.extend(c.initializer.create_states(model))
        return states


class MILSTMCell(LSTMCell):
    """LSTM with multiplicative integration: gates = (alpha * x + beta_h) * (W h) + beta_i * x + b."""

    _layer_norm = False

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        fc_input, dim = self._fc_input(model, states[0], extra_inputs)
        h4 = 4 * self.hidden_size
        prev_t = brew.fc(model, fc_input, self.scope("prev_t"), dim_in=dim, dim_out=h4, axis=2)
        alpha = model.create_param(self.scope("alpha"), [h4], ("ConstantFill", {"value": 1.0}))
        beta_h = model.create_param(self.scope("beta1"), [h4], ("ConstantFill", {"value": 1.0}))
        beta_i = model.create_param(self.scope("beta2"), [h4], ("ConstantFill", {"value": 1.0}))
        b = model.create_param(self.scope("b"), [h4], ("ConstantFill", {"value": 0.0}))
        a_x = model.net.ElementwiseLinear([input_t, alpha, beta_h], self.scope("alpha_by_input_t_plus_beta_h"), axis=2)
        a_x_h = model.net.Mul([a_x, prev_t], self.scope("alpha_by_input_t_plus_beta_h_by_prev_t"))
        b_x = model.net.ElementwiseLinear([input_t, beta_i, b], self.scope("beta_i_by_input_t_plus_b"), axis=2)
        gates_t = brew.sum(model, [a_x_h, b_x], self.scope("gates_t"))
        if self._layer_norm:
            gates_t = _gates_layer_norm(self, model, gates_t)
        names = [self.scope("hidden_t_intermediate"), self.scope("cell_t")]
        return self._unit(model, states, gates_t, seq_lengths, timestep, names, "ch")


def _gates_layer_norm(cell: Any, model: Any, gates_t: Any) -> Any:
    """brew.layer_norm over the last axis of the gates (the LayerNorm cells' only difference)."""
    return brew.layer_norm(model, gates_t, cell.scope("gates_t_norm"), dim_in=4 * cell.hidden_size, axis=-1)[0]


class LayerNormLSTMCell(LSTMCell):
    """LSTMCell whose gates (recurrent FC + input projection) are layer-normalized with a learned
    scale and bias (``<scope>/gates_t_norm_scale``/``_bias``), as Caffe2's LayerNormLSTMCell."""

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        gates_t = _gates_layer_norm(self, model, self._gates(model, states[0], input_t, extra_inputs))
        return self._unit(model, states, gates_t, seq_lengths, timestep, list(self.get_state_names()), "hc")


class LayerNormMILSTMCell(MILSTMCell):
    """MILSTMCell with its gates layer-normalized (Caffe2's LayerNormMILSTMCell)."""

    _layer_norm = True


def _LSTM(
    cell_class: type,
    model: Any,
    input_blob: Any,
    seq_lengths: Any,
    initial_states: Any,
    dim_in: int,
    dim_out: Any,
    scope: str | None = None,
    outputs_with_grads: Any = (0,),
    return_params: bool = False,
    memory_optimization: bool = False,
    forget_bias: float = 0.0,
    forward_only: bool = False,
    drop_states: bool = False,
    return_last_layer_only: bool = True,
    static_rnn_unroll_size: Any = None,
    **cell_kwargs: Any,
) -> tuple:
    """Caffe2's rnn_cell.LSTM: (output, last_output, all_states, last_state)[, params]."""
    dims = list(dim_out) if isinstance(dim_out, (list, tuple)) else [dim_out]
    n = len(dims)
    cells = [
        cell_class(
            input_size=dim_in if i == 0 else dims[i - 1],
            hidden_size=dims[i],
            forget_bias=forget_bias,
            memory_optimization=memory_optimization,
            drop_states=drop_states,
            forward_only=forward_only,
            name=scope if n == 1 else None,  # a layer's blobs are scoped by MultiRNNCell
            **cell_kwargs,
        )
        for i in range(n)
    ]
    cell = MultiRNNCell(cells, name=scope, forward_only=forward_only) if n > 1 else cells[0]
    if static_rnn_unroll_size is not None:  # the steps written into the net (no RecurrentNetwork)
        from framework.caffe2.python.rnn_cell_wrappers import UnrolledCell

        cell = UnrolledCell(cell, static_rnn_unroll_size)
    per_layer = 2 * len(cells[-1].get_state_names())
    outputs_with_grads = [per_layer * (n - 1) + i for i in outputs_with_grads]
    _, result = cell.apply_over_sequence(
        model=model,
        inputs=input_blob,
        seq_lengths=seq_lengths,
        initial_states=initial_states,
        outputs_with_grads=outputs_with_grads,
    )
    if return_last_layer_only:
        result = result[per_layer * (n - 1) :]
    if return_params:
        result = list(result) + [{"input": cells[0].get_input_params(), "recurrent": cells[0].get_recurrent_params()}]
    return tuple(result)


LSTM = functools.partial(_LSTM, LSTMCell)
MILSTM = functools.partial(_LSTM, MILSTMCell)
LayerNormLSTM = functools.partial(_LSTM, LayerNormLSTMCell)
LayerNormMILSTM = functools.partial(_LSTM, LayerNormMILSTMCell)


def BasicRNN(
    model: Any,
    input_blob: Any,
    seq_lengths: Any,
    initial_states: Any,
    dim_in: int,
    dim_out: int,
    scope: str | None = None,
    outputs_with_grads: Any = (0,),
    forward_only: bool = False,
    drop_states: bool = False,
    activation: str | None = None,
) -> tuple:
    """Caffe2's rnn_cell.BasicRNN: (output, last_output)."""
    cell = BasicRNNCell(
        input_size=dim_in,
        hidden_size=dim_out,
        drop_states=drop_states,
        forward_only=forward_only,
        activation=activation,
        name=scope,
    )
    _, result = cell.apply_over_sequence(
        model=model,
        inputs=input_blob,
        seq_lengths=seq_lengths,
        initial_states=initial_states,
        outputs_with_grads=list(outputs_with_grads),
    )
    return tuple(result)


def cudnn_LSTM(
    model: Any,
    input_blob: Any,
    initial_states: Any,
    dim_in: int,
    dim_out: int,
    scope: str,
    recurrent_params: Any = None,
    input_params: Any = None,
    num_layers: int = 1,
    return_params: bool = False,
) -> tuple:
    """Caffe2's cudnn_LSTM on the CPU path: a RecurrentNetwork LSTM with num_layers layers and
    cuDNN's interface: initial states and the returned hidden/cell outputs are
    (num_layers, N, H); returns (output, hidden_output, cell_output[, params]). Departure: the
    parameters are the per-layer FC weights of rnn_cell.LSTM, not cuDNN's packed blob."""
    h0, c0 = initial_states
    if num_layers > 1:
        hs = model.net.Split(h0, [f"{scope}/h0_{i}" for i in range(num_layers)], axis=0)
        cs = model.net.Split(c0, [f"{scope}/c0_{i}" for i in range(num_layers)], axis=0)
        init = [b for pair in zip(hs, cs) for b in pair]
    else:
        init = [h0, c0]
    res = _LSTM(
        LSTMCell,
        model,
        input_blob,
        None,
        init,
        dim_in,
        [dim_out] * num_layers,
        scope=scope,
        return_params=True,
        return_last_layer_only=False,
    )
    *states, params = res
    output = states[-4]
    lasts_h = [states[4 * i + 1] for i in range(num_layers)]
    lasts_c = [states[4 * i + 3] for i in range(num_layers)]
    if num_layers > 1:
        last_h = model.net.Concat(lasts_h, [f"{scope}/hidden_output", f"{scope}/hidden_output_dims"], axis=0)[0]
        last_c = model.net.Concat(lasts_c, [f"{scope}/cell_output", f"{scope}/cell_output_dims"], axis=0)[0]
    else:
        last_h, last_c = lasts_h[0], lasts_c[0]
    out = (output, last_h, last_c)
    return out + (params,) if return_params else out


def _layered_LSTM(
    model: Any,
    input_blob: Any,
    seq_lengths: Any,
    initial_states: Any,
    dim_in: int,
    dim_out: Any,
    scope: str,
    outputs_with_grads: Any = (0,),
    return_params: bool = False,
    memory_optimization: bool = False,
    forget_bias: float = 0.0,
    forward_only: bool = False,
    drop_states: bool = False,
    create_lstm: Any = None,
) -> tuple:
    """Caffe2's layered_LSTM: one LSTM network per layer (scopes ``<scope>``, ``<scope>_layer_2``...),
    each started from the previous layer's last states."""
    params = dict(
        model=model,
        input_blob=input_blob,
        seq_lengths=seq_lengths,
        initial_states=initial_states,
        dim_in=dim_in,
        dim_out=dim_out,
        scope=scope,
        outputs_with_grads=outputs_with_grads,
        return_params=return_params,
        memory_optimization=memory_optimization,
        forget_bias=forget_bias,
        forward_only=forward_only,
        drop_states=drop_states,
    )
    if not isinstance(dim_out, list):
        return create_lstm(**params)
    if len(dim_out) == 0:
        raise ValueError("dim_out list can't be empty")
    if len(dim_out) == 1:
        return create_lstm(**{**params, "dim_out": dim_out[0]})
    if return_params:
        raise ValueError("return_params not supported for layering")
    for i, output_dim in enumerate(dim_out):
        params["dim_out"] = output_dim
        output, last_output, all_states, last_state = create_lstm(**params)
        params.update(
            input_blob=output,
            dim_in=output_dim,
            initial_states=(last_output, last_state),
            scope=f"{scope}_layer_{i + 1}",
        )
    return output, last_output, all_states, last_state


layered_LSTM = functools.partial(_layered_LSTM, create_lstm=LSTM)


def InitFromLSTMParams(lstm_pblobs: dict, param_values: dict) -> None:
    """Set an LSTM's packed FC parameters (current workspace) from per-gate values:
    param_values[input_type][name] for the names of GetLSTMParamNames(), input_type 'input' or
    'recurrent'; lstm_pblobs[input_type] = {'weights': blob, 'biases': blob} (return_params)."""
    import numpy as np

    from framework import workspace

    names = GetLSTMParamNames()
    for input_type, values in param_values.items():
        for kind in ("weights", "biases"):
            blob = lstm_pblobs[input_type][kind]
            cur = workspace.FetchBlob(blob)
            flat = np.concatenate([np.asarray(values[n], dtype=np.float64).ravel() for n in names[kind]])
            workspace.FeedBlob(blob, flat.reshape(cur.shape).astype(np.float32))


def GetLSTMParamNames() -> dict:
    return {
        "weights": ["input_gate_w", "forget_gate_w", "output_gate_w", "cell_w"],
        "biases": ["input_gate_b", "forget_gate_b", "output_gate_b", "cell_b"],
    }
