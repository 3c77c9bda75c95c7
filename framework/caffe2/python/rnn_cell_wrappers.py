"""rnn_cell's wrapping cells: ``DropoutCell`` (dropout on a cell's output) and ``UnrolledCell``
(``static_rnn_unroll_size``: the step written out T times into the outer net, no RecurrentNetwork).

UnrolledCell applies the cell once per time step t to the outer model, as Caffe2 does: under
NameScope ``timestep_<t>`` (the blobs each step writes are its own) and
ParameterSharing({"timestep_<t>": ""}) (every step uses the same parameters); the step input
is the t-th slice of the projected input sequence (Split on axis 0), the timestep a
``timestep_<t>/timestep`` int32 constant made in the param init net. Outputs, as
RecurrentNetwork's: (state_1 for all steps (Concat on axis 0, named after step 0's state with
its first 11 characters cut, as Caffe2 names it), state_1 at the last step, ...).
Outputs not in ``outputs_with_grads`` get a ZeroGradient op (their gradient is zeros), as Caffe2's.
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import brew, scope
from framework.caffe2.python.modeling.parameter_sharing import ParameterSharing
from framework.caffe2.python.rnn_cell import RNNCell
from framework.proto import caffe2_pb2

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


def _rectify(name: Any) -> Any:
    return (
        core.ScopedBlobReference(name) if isinstance(name, str) and not isinstance(name, core.BlobReference) else name
    )


class UnrolledCell(RNNCell):
    """Runs ``cell`` over exactly T steps written into the outer net (see the module doc)."""

    def __init__(self, cell: Any, T: int) -> None:
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
            with scope.NameScope(self.cell.name or ""):
                initial_states = self.cell.initializer.create_states(model)
        # names given as strings are read under the caller's scope, not under each step's (as
        # apply_over_sequence of the RecurrentNetwork form reads them); Caffe2 would read them per step
        initial_states, seq_lengths = [_rectify(s) for s in initial_states], _rectify(seq_lengths)
        inputs = self.cell.prepare_input(model, inputs)
        split = model.net.Split(inputs, [f"{inputs}_timestep_{i}" for i in range(self.T)], axis=0)
        split = [split] if self.T == 1 else list(split)
        states = list(initial_states)
        all_states = []
        for t in range(self.T):
            step_scope = f"timestep_{t}"
            with ParameterSharing({step_scope: ""}), scope.NameScope(step_scope):
                timestep = model.param_init_net.ConstantFill(
                    [],
                    "timestep",
                    value=t,
                    shape=[1],
                    dtype=core.DataType.INT32,
                    device_option=core.DeviceOption(caffe2_pb2.CPU),
                )
                states = self.cell._apply(
                    model=model, input_t=split[t], seq_lengths=seq_lengths, states=states, timestep=timestep
                )
            all_states.append(states)
        cut = len("timestep_0/")  # Caffe2 cuts this many characters off step 0's name, scope or not
        outputs = []
        for per_step, last in zip(zip(*all_states), states):
            base = str(per_step[0])[cut:]
            full = model.net.Concat(list(per_step), [base + "_concat", base + "_concat_info"], axis=0)[0]
            outputs += [full, last]
        with_grads = set(range(len(outputs))) if outputs_with_grads is None else set(outputs_with_grads)
        for i in sorted(set(range(len(outputs))) - with_grads):
            model.net.ZeroGradient(outputs[i], [])
        return self.cell._prepare_output_sequence(model, outputs), tuple(outputs)
