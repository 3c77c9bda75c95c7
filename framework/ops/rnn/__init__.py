"""Recurrent networks: LSTM/GRU units, RecurrentNetwork over a step net, sequence ops."""

from framework.ops.rnn import links, recurrent_network, units  # noqa: F401
