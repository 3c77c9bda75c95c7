"""A numpy LSTM over a sequence, gates in Caffe2's order (input, forget, output, cell), for the rnn tests."""

import numpy as np


def sig(x):
    return 1 / (1 + np.exp(-x))


def lstm_loop(x, h, c, wx, bx, wh, bh, lengths=None):
    """(hidden states, cell states), each (T, N, H), of an LSTM reading x (T, N, D) from states h, c (N, H);
    with ``lengths``, rows whose sequence has ended carry their states over."""
    n_hidden = wh.shape[1]
    hs, cs = [], []
    for t in range(x.shape[0]):
        g = x[t] @ wx.T + bx + h @ wh.T + bh
        i, f = sig(g[:, :n_hidden]), sig(g[:, n_hidden : 2 * n_hidden])
        o, gg = sig(g[:, 2 * n_hidden : 3 * n_hidden]), np.tanh(g[:, 3 * n_hidden :])
        c2 = f * c + i * gg
        h2 = o * np.tanh(c2)
        if lengths is not None:
            keep = (t >= lengths)[:, None]
            h2, c2 = np.where(keep, h, h2), np.where(keep, c, c2)
        h, c = h2, c2
        hs.append(h)
        cs.append(c)
    return np.stack(hs), np.stack(cs)
