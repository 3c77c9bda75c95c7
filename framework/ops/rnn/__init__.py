"""Recurrent networks: LSTM/GRU units, RecurrentNetwork over a step net, sequence ops."""

from framework.ops.rnn import (  # noqa: F401
    decoders,
    inference_lstm,
    links,
    padding,
    recurrent_network,
    units,
    zero_gradient,
)
