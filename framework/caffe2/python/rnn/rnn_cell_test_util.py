"""``caffe2.python.rnn.rnn_cell_test_util``: numpy activations and the net set-up shared by Caffe2's
RNN cell tests (LSTM, GRU, basic RNN).

``_prepare_rnn(t, n, dim_in, create_rnn, outputs_with_grads, forget_bias, ...)`` builds a model named
``external`` whose net runs ``create_rnn`` (an ``rnn_cell`` builder such as ``LSTM``) over the
external inputs ``input_blob`` and ``seq_lengths`` (scoped under name scope ``test_name_scope``),
with ``num_states`` initial states per layer (``state_<i>/layer_<l>``, fed random, of shape
``(n, d)`` when ``two_d_initial_states`` else ``(1, n, d)``; random choice when None), runs the
param init net, feeds random sequence lengths in ``[1, t]``, and returns ``(outputs, net, states +
[input_blob])``. The builder gets ``scope="external/recurrent"`` and ``static_rnn_unroll_size=T``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework import workspace
from framework.caffe2.python import scope
from framework.caffe2.python.model_helper import ModelHelper


def sigmoid(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def tanh(x: Any) -> Any:
    # written through sigmoid, as Caffe2's reference cells compute it
    return 2.0 * sigmoid(2.0 * x) - 1


def _prepare_rnn(
    t: int,
    n: int,
    dim_in: int,
    create_rnn: Callable[..., Any],
    outputs_with_grads: Any,
    forget_bias: float,
    memory_optim: bool = False,
    forward_only: bool = False,
    drop_states: bool = False,
    T: int | None = None,
    two_d_initial_states: Any = None,
    dim_out: list[int] | None = None,
    num_states: int = 2,
    **kwargs: Any,
) -> tuple[Any, Any, list]:
    dim_out = [dim_in] if dim_out is None else dim_out
    model = ModelHelper(name="external")
    if two_d_initial_states is None:
        two_d_initial_states = np.random.randint(2)
    states = []
    for layer, d in enumerate(dim_out):
        for i in range(num_states):
            states.append(model.net.AddExternalInput(f"state_{i}/layer_{layer}"))
            shape = (n, d) if two_d_initial_states else (1, n, d)
            workspace.FeedBlob(states[-1], np.random.randn(*shape).astype(np.float32))
    # the RNN helpers must also work from inside a name scope
    with scope.NameScope("test_name_scope"):
        input_blob, seq_lengths = model.net.AddScopedExternalInputs("input_blob", "seq_lengths")
        outputs = create_rnn(
            model,
            input_blob,
            seq_lengths,
            states,
            dim_in=dim_in,
            dim_out=dim_out,
            scope="external/recurrent",
            outputs_with_grads=outputs_with_grads,
            memory_optimization=memory_optim,
            forget_bias=forget_bias,
            forward_only=forward_only,
            drop_states=drop_states,
            static_rnn_unroll_size=T,
            **kwargs,
        )
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob(seq_lengths, np.random.randint(1, t + 1, size=(n,)).astype(np.int32))
    return outputs, model.net, states + [input_blob]
