"""rnn_cell's wrapping cells: ``DropoutCell`` (dropout on a cell's output) and ``UnrolledCell``
(``static_rnn_unroll_size``: the step written out T times into the outer net, no RecurrentNetwork).

UnrolledCell builds the cell's step once in a scratch step net, then copies its ops into the
outer net once per time step t: blobs the step writes are renamed ``timestep_<t>/<name>``
(Caffe2's NameScope per step), the step input reads the t-th slice of the projected input
sequence (Split on axis 0), the previous states read step t-1's states, the timestep a
``timestep_<t>/<timestep>`` int32 constant made in the param init net, and everything else
(parameters, sequence lengths, encoder outputs) is shared by all steps, as Caffe2's
ParameterSharing({"timestep_<t>": ""}) does. Outputs, as RecurrentNetwork's:
(state_1 for all steps (Concat on axis 0, ``<state>_concat``), state_1 at the last step, ...).
Outputs not in ``outputs_with_grads`` get a ZeroGradient op (their gradient is zeros), as Caffe2's.
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.caffe2.python.rnn_cell import RNNCell

__all__ = ["DropoutCell", "UnrolledCell"]


class DropoutCell(RNNCell):
    """Wraps a cell and applies dropout to its output (not to the recurrent connection)."""

    def __init__(self, internal_cell: Any, dropout_ratio: Any = None, use_cudnn: bool = False, **kwargs: Any) -> None:
        if "is_test" not in kwargs:
            raise ValueError("Argument 'is_test' is required")
        self.internal_cell = internal_cell
        self.dropout_ratio = dropout_ratio
        self.is_test = kwargs.pop("is_test")
        self.use_cudnn = use_cudnn
        super().__init__(**kwargs)
        self.prepare_input = internal_cell.prepare_input
        self.get_output_state_index = internal_cell.get_output_state_index
        self.get_state_names = internal_cell.get_state_names
        self.get_output_dim = internal_cell.get_output_dim
        self.initializer = internal_cell.initializer
        self.mask = 0

    def _apply(self, model, input_t, seq_lengths, states, timestep, extra_inputs=None):
        return self.internal_cell._apply(model, input_t, seq_lengths, states, timestep, extra_inputs)

    def _prepare_output(self, model, states):
        return self._apply_dropout(model, self.internal_cell._prepare_output(model, states))

    def _prepare_output_sequence(self, model, state_outputs):
        return self._apply_dropout(model, self.internal_cell._prepare_output_sequence(model, state_outputs))

    def _apply_dropout(self, model, output):
        if self.dropout_ratio and not self.forward_only:
            name = f"{output}_with_dropout_mask{self.mask}"
            output = brew.dropout(
                model,
                output,
                self.scope(name) if self.name else name,
                ratio=float(self.dropout_ratio),
                is_test=self.is_test,
            )
            self.mask += 1
        return output


class UnrolledCell(RNNCell):
    """Runs ``cell`` over exactly T steps written into the outer net (see the module doc)."""

    def __init__(self, cell: Any, T: int) -> None:  # noqa: N803
        super().__init__(name=cell.name, forward_only=cell.forward_only, initializer=cell.initializer)
        if int(T) < 1:
            raise ValueError(f"static_rnn_unroll_size must be at least 1, got {T}")
        self.T, self.cell = int(T), cell

    def get_state_names(self):
        return self.cell.get_state_names()

    def get_output_state_index(self):
        return self.cell.get_output_state_index()

    def get_output_dim(self):
        return self.cell.get_output_dim()

    def __getattr__(self, name: str) -> Any:  # get_input_params, get_recurrent_params... of the cell
        if name == "cell":
            raise AttributeError(name)
        return getattr(self.cell, name)

    def apply_over_sequence(self, model, inputs, seq_lengths=None, initial_states=None, outputs_with_grads=None):
        if initial_states is None:
            if self.cell.initializer is None:
                raise ValueError("Either initial states or initializer have to be set")
            initial_states = self.cell.initializer.create_states(model)
        names = list(self.cell.get_state_names())
        if len(initial_states) != len(names):
            raise ValueError(f"{len(initial_states)} initial states for {len(names)} cell states {names}")
        inputs = self.cell.prepare_input(model, inputs)
        split = model.net.Split(inputs, [f"{inputs}_timestep_{i}" for i in range(self.T)], axis=0)
        split = [split] if self.T == 1 else list(split)
        step_ops, input_t, timestep, states_prev, step_states = self._step(model, seq_lengths)
        states = [str(b) for b in initial_states]
        all_states = []
        for t in range(self.T):
            prefix = f"timestep_{t}/"
            ts = model.param_init_net.ConstantFill([], prefix + timestep, value=t, shape=[1], dtype=core.DataType.INT32)
            cur = {input_t: str(split[t]), timestep: str(ts), **dict(zip(states_prev, states))}
            for op in step_ops:
                new = core.OperatorDef()
                new.CopyFrom(op)
                new.input[:] = [cur.get(b, b) for b in op.input]
                for j, b in enumerate(op.output):
                    cur[b] = prefix + b
                    new.output[j] = prefix + b
                model.net.Proto().op.extend([new])
            states = [cur[s] for s in step_states]
            all_states.append(states)
        outputs = []
        for i, per_step in enumerate(zip(*all_states)):
            base = str(step_states[i])
            full = model.net.Concat(list(per_step), [base + "_concat", base + "_concat_info"], axis=0)[0]
            outputs += [full, core.BlobReference(per_step[-1])]
        with_grads = set(range(len(outputs))) if outputs_with_grads is None else set(outputs_with_grads)
        for i in sorted(set(range(len(outputs))) - with_grads):
            model.net.ZeroGradient(outputs[i], [])
        return self.cell._prepare_output_sequence(model, outputs), outputs

    def _step(self, model, seq_lengths):
        """The cell's step built once: (ops, input_t, timestep, state inputs, state outputs) by name."""
        step_model = ModelHelper(name=self.name or "rnn_step", param_model=model)
        input_t, timestep = step_model.net.AddExternalInputs(self.cell.scope("input_t"), self.cell.scope("timestep"))
        states_prev = step_model.net.AddExternalInputs(*[s + "_prev" for s in self.cell.get_state_names()])
        if not isinstance(states_prev, (list, tuple)):
            states_prev = [states_prev]
        states = self.cell._apply(
            model=step_model, input_t=input_t, seq_lengths=seq_lengths, states=states_prev, timestep=timestep
        )
        return (
            list(step_model.net.Proto().op),
            str(input_t),
            str(timestep),
            [str(s) for s in states_prev],
            [str(s) for s in states],
        )
