"""Caffe2's ``rnn_cell``: recurrent cells over RecurrentNetwork, as ``caffe2.python.rnn_cell``.

A cell describes one time step (``_apply``) and how its input sequence is
projected once for all steps (``prepare_input``: the ``i2h`` FC with
``axis=2``); ``apply_over_sequence`` builds the step net and the
RecurrentNetwork op (``framework.caffe2.python.recurrent.recurrent_net``), returning the
output sequence and ``(state_1_all, state_1_last, state_2_all, ...)``.
``LSTM``/``BasicRNN``/``MILSTM``/``LayerNormLSTM`` (and ``cudnn_LSTM``, on the
CPU path) build multi-layer networks and return Caffe2's tuples.

Parameter names follow Caffe2: ``<scope>/i2h_w``, ``<scope>/i2h_b`` (input
projection, 4H x D for the LSTM with gates in the order i, f, o, g),
``<scope>/gates_t_w``, ``<scope>/gates_t_b`` (recurrent projection).
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

from framework import core
from framework.caffe2.python import brew, recurrent
from framework.caffe2.python.model_helper import ModelHelper
from framework.caffe2.python.scope import NameScope

__all__ = [
    "AttentionCell",
    "AttentionType",
    "BasicRNN",
    "BasicRNNCell",
    "LSTM",
    "LSTMCell",
    "LSTMInitializer",
    "LSTMWithAttention",
    "LayerNormLSTM",
    "LayerNormLSTMCell",
    "MILSTM",
    "MILSTMCell",
    "MultiRNNCell",
    "RNNCell",
    "cudnn_LSTM",
    "GetLSTMParamNames",
    "DropoutCell",
    "InitFromLSTMParams",
    "LSTMWithAttentionCell",
    "LayerNormMILSTM",
    "LayerNormMILSTMCell",
    "MILSTMWithAttentionCell",
    "MultiRNNCellInitializer",
    "UnrolledCell",
    "layered_LSTM",
]


class LSTMInitializer:
    """Zero initial hidden and cell states made in the param init net (needs a batch-size source)."""

    def __init__(self, hidden_size: int) -> None:
        self.hidden_size = hidden_size

    def create_states(self, model: Any) -> list:
        return [
            model.create_param(
                param_name=f"initial_{s}_state", shape=[self.hidden_size], initializer=("ConstantFill", {"value": 0.0})
            )
            for s in ("hidden", "cell")
        ]


class RNNCell:
    """Base class: a cell's step (``_apply``), input projection and state names."""

    def __init__(self, name: str | None = None, forward_only: bool = False, initializer: Any = None) -> None:
        self.name = name
        self.recompute_blobs: list = []
        self.forward_only = forward_only
        self._initializer = initializer

    @property
    def initializer(self) -> Any:
        return self._initializer

    @initializer.setter
    def initializer(self, value: Any) -> None:
        self._initializer = value

    def scope(self, name: str) -> str:
        return f"{self.name}/{name}" if self.name is not None else name

    def apply_over_sequence(
        self,
        model: Any,
        inputs: Any,
        seq_lengths: Any = None,
        initial_states: Any = None,
        outputs_with_grads: Any = None,
    ) -> tuple[Any, list]:
        if initial_states is None:
            if self.initializer is None:
                raise ValueError("Either initial states or initializer have to be set")
            with NameScope(self.name or ""):
                initial_states = self.initializer.create_states(model)
        preprocessed = self.prepare_input(model, inputs)
        step_model = ModelHelper(name=self.name or "rnn_step", param_model=model)
        input_t, timestep = step_model.net.AddExternalInputs(self.scope("input_t"), self.scope("timestep"))
        names = self.get_state_names()
        if len(initial_states) != len(names):
            raise ValueError(f"{len(initial_states)} initial states for {len(names)} cell states {names}")
        states_prev = step_model.net.AddExternalInputs(*[s + "_prev" for s in names])
        if not isinstance(states_prev, (list, tuple)):
            states_prev = [states_prev]
        states = self._apply(
            model=step_model, input_t=input_t, seq_lengths=seq_lengths, states=states_prev, timestep=timestep
        )
        external = set(step_model.net.Proto().external_output)
        for st in states:
            if str(st) not in external:
                step_model.net.AddExternalOutput(st)
        if outputs_with_grads is None:
            outputs_with_grads = [self.get_output_state_index() * 2]
        all_steps = recurrent.recurrent_net(
            net=model.net,
            cell_net=step_model.net,
            inputs=[(input_t, preprocessed)],
            initial_cell_inputs=list(zip(states_prev, initial_states)),
            links={str(p): s for p, s in zip(states_prev, states)},
            timestep=timestep,
            scope=self.name,
            forward_only=self.forward_only,
            outputs_with_grads=outputs_with_grads,
            recompute_blobs_on_backward=self.recompute_blobs or None,
        )
        return self._prepare_output_sequence(model, all_steps), all_steps

    def apply(
        self, model: Any, input_t: Any, seq_lengths: Any, states: Any, timestep: Any, extra_inputs: Any = None
    ) -> tuple[Any, Any]:
        input_t = self.prepare_input(model, input_t)
        states = self._apply(model, input_t, seq_lengths, states, timestep, extra_inputs=extra_inputs)
        return self._prepare_output(model, states), states

    def _apply(
        self, model: Any, input_t: Any, seq_lengths: Any, states: Any, timestep: Any, extra_inputs: Any = None
    ) -> Any:
        """One step. Cells override this, or (Caffe2's newer API) ``apply_override``, which runs
        under the cell's NameScope with the given blobs kept as full names."""
        if type(self).apply_override is RNNCell.apply_override:
            raise NotImplementedError("Abstract method: a cell defines _apply or apply_override")

        def ref(b: Any) -> Any:
            if b is None or isinstance(b, core.BlobReference):
                return b
            return core.BlobReference(str(b))

        args = [ref(input_t), ref(seq_lengths), [ref(b) for b in states], ref(timestep)]
        if "extra_inputs" in inspect.signature(self.apply_override).parameters:
            args.append(None if extra_inputs is None else [(ref(b), dim) for b, dim in extra_inputs])
        with NameScope(self.name or ""):
            return self.apply_override(model, *args)

    def apply_override(
        self, model: Any, input_t: Any, seq_lengths: Any, states: Any, timestep: Any, extra_inputs: Any = None
    ) -> Any:
        """A single step of a custom cell (Caffe2's RNNCell.apply_override): returns the new states."""
        raise NotImplementedError("Abstract method")

    def get_state_names_override(self) -> Sequence[str]:
        """The recurrent state names of a custom cell, without the cell's scope."""
        raise NotImplementedError("Abstract method")

    def prepare_input(self, model: Any, input_blob: Any) -> Any:
        return input_blob

    def get_output_state_index(self) -> int:
        return 0

    def get_state_names(self) -> Sequence[str]:
        return [self.scope(n) for n in self.get_state_names_override()]

    def get_output_dim(self) -> int:
        raise NotImplementedError("Abstract method")

    def _prepare_output(self, model: Any, states: Any) -> Any:
        return states[self.get_output_state_index()]

    def _prepare_output_sequence(self, model: Any, state_outputs: Any) -> Any:
        return state_outputs[2 * self.get_output_state_index()]


class _SizedCell(RNNCell):
    """The constructor Caffe2's BasicRNN/LSTM/GRU cells share: sizes, forget bias, memory
    optimization (recompute the gates on backward) and drop_states."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        forget_bias: float = 0.0,
        memory_optimization: bool = False,
        drop_states: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.forget_bias = float(forget_bias)
        self.memory_optimization = memory_optimization
        self.drop_states = drop_states

    def get_output_dim(self) -> int:
        return self.hidden_size


class BasicRNNCell(_SizedCell):
    """h_t = activation(i2h(x_t) + gates_t(h_{t-1})), activation 'tanh' or 'relu'."""

    def __init__(self, input_size: int, hidden_size: int, *args: Any, activation: str | None = None, **kwargs: Any):
        kwargs.pop("initializer", None)
        super().__init__(input_size, hidden_size, *args, **kwargs)
        self.activation = activation or "tanh"
        if self.activation not in ("relu", "tanh"):
            raise RuntimeError("BasicRNNCell with unknown activation function (%s)" % self.activation)

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        hidden_t_prev = states[0]
        gates_t = brew.fc(
            model, hidden_t_prev, self.scope("gates_t"), dim_in=self.hidden_size, dim_out=self.hidden_size, axis=2
        )
        brew.sum(model, [gates_t, input_t], gates_t)
        act = model.net.Tanh if self.activation == "tanh" else model.net.Relu
        hidden_t = act(gates_t, self.scope("hidden_t" if seq_lengths is None else "hidden_t_raw"))
        if seq_lengths is not None:  # variable lengths: finished rows keep their state (zeros: drop_states)
            lengths_f = model.net.Cast(seq_lengths, self.scope("seq_lengths_float"), to=core.DataType.FLOAT)
            timestep_f = model.net.Cast(timestep, self.scope("timestep_float"), to=core.DataType.FLOAT)
            valid = model.net.Cast(
                model.net.GT([lengths_f, timestep_f], self.scope("valid_b"), broadcast=1),
                self.scope("valid"),
                to=core.DataType.FLOAT,
            )
            invalid = model.net.Cast(
                model.net.LE([lengths_f, timestep_f], self.scope("invalid_b"), broadcast=1),
                self.scope("invalid"),
                to=core.DataType.FLOAT,
            )
            # masks carry no gradient (Caffe2 would ask Cast for one and fail without from_type)
            valid = model.net.StopGradient(valid, valid)
            invalid = model.net.StopGradient(invalid, invalid)
            hidden_valid = model.net.Mul([hidden_t, valid], self.scope("hidden_valid"), broadcast=1, axis=1)
            if self.drop_states:
                hidden_t = hidden_valid
            else:
                hidden_invalid = model.net.Mul(
                    [hidden_t_prev, invalid], self.scope("hidden_invalid"), broadcast=1, axis=1
                )
                hidden_t = model.net.Add([hidden_valid, hidden_invalid], self.scope("hidden_t"))
        model.net.AddExternalOutputs(hidden_t)
        return (hidden_t,)

    def prepare_input(self, model, input_blob):
        return brew.fc(model, input_blob, self.scope("i2h"), dim_in=self.input_size, dim_out=self.hidden_size, axis=2)

    def get_state_names(self):
        return (self.scope("hidden_t"),)


class LSTMCell(_SizedCell):
    """The standard LSTM step: gates = i2h(x_t) + gates_t(h_{t-1}); LSTMUnit."""

    def __init__(self, input_size: int, hidden_size: int, *args: Any, initializer: Any = None, **kwargs: Any):
        super().__init__(input_size, hidden_size, *args, initializer=initializer, **kwargs)
        self.initializer = initializer or LSTMInitializer(hidden_size=hidden_size)

    def _fc_input(self, model, hidden_t_prev, extra_inputs):
        """The recurrent FC's input: h_{t-1}, with extra inputs (e.g. an attention context) concatenated."""
        if extra_inputs is None:
            return hidden_t_prev, self.hidden_size
        extra_blobs, extra_dims = zip(*extra_inputs)
        name = self.scope("gates_concatenated_input_t")
        fc_input = model.net.Concat([hidden_t_prev, *extra_blobs], [name, name + "_concat_dims"], axis=2)[0]
        return fc_input, self.hidden_size + sum(extra_dims)

    def _gates(self, model, hidden_t_prev, input_t, extra_inputs=None):
        fc_input, dim = self._fc_input(model, hidden_t_prev, extra_inputs)
        gates_t = brew.fc(model, fc_input, self.scope("gates_t"), dim_in=dim, dim_out=4 * self.hidden_size, axis=2)
        brew.sum(model, [gates_t, input_t], gates_t)
        return gates_t

    def _unit(self, model, states, gates_t, seq_lengths, timestep, names, external):
        """LSTMUnit over (h_{t-1}, c_{t-1}, gates); ``external``: (h, c) order of AddExternalOutputs."""
        ins = [*states, gates_t] + ([seq_lengths] if seq_lengths is not None else []) + [timestep]
        hidden_t, cell_t = model.net.LSTMUnit(
            ins,
            names,
            forget_bias=self.forget_bias,
            drop_states=self.drop_states,
            sequence_lengths=seq_lengths is not None,
        )
        model.net.AddExternalOutputs(*((hidden_t, cell_t) if external == "hc" else (cell_t, hidden_t)))
        if self.memory_optimization:
            self.recompute_blobs = [gates_t]
        return hidden_t, cell_t

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        gates_t = self._gates(model, states[0], input_t, extra_inputs)
        names = [self.scope("hidden_state"), self.scope("cell_state")]
        return self._unit(model, states, gates_t, seq_lengths, timestep, names, "hc")

    def get_input_params(self):
        return {"weights": self.scope("i2h") + "_w", "biases": self.scope("i2h") + "_b"}

    def get_recurrent_params(self):
        return {"weights": self.scope("gates_t") + "_w", "biases": self.scope("gates_t") + "_b"}

    def prepare_input(self, model, input_blob):
        return brew.fc(
            model, input_blob, self.scope("i2h"), dim_in=self.input_size, dim_out=4 * self.hidden_size, axis=2
        )

    def get_state_names(self):
        return (self.scope("hidden_t"), self.scope("cell_t"))


from framework.caffe2.python.attention import AttentionType  # noqa: E402
from framework.caffe2.python.rnn_attention_cell import (  # noqa: E402
    AttentionCell,
    LSTMWithAttention,
    LSTMWithAttentionCell,
    MILSTMWithAttentionCell,
)
from framework.caffe2.python.rnn_cell_wrappers import DropoutCell, UnrolledCell  # noqa: E402
from framework.caffe2.python.rnn_cells_more import (  # noqa: E402  (MultiRNNCell, MILSTM, LayerNorm LSTM and the builders)
    LSTM,
    MILSTM,
    BasicRNN,
    GetLSTMParamNames,
    InitFromLSTMParams,
    LayerNormLSTM,
    LayerNormLSTMCell,
    LayerNormMILSTM,
    LayerNormMILSTMCell,
    MILSTMCell,
    MultiRNNCell,
    MultiRNNCellInitializer,
    cudnn_LSTM,
    layered_LSTM,
)
