"""``caffe2.python.tt_core``: tensor-train (TT) decompositions of fully connected weights, as
Caffe2's TT layer takes them.

- ``init_tt_cores(inp_sizes, out_sizes, tt_ranks, seed)``: random orthogonalised cores (float32),
  scaled Glorot-style: Caffe2's initialisation.
- ``tt_svd(W, sizes, tt_ranks)``: TT-SVD of the tensor ``W`` (shape ``sizes``) into the cores
  ``[r_i, sizes_i, r_{i+1}]`` flattened one after another.
- ``matrix_to_tt(W, inp_sizes, out_sizes, tt_ranks)``: an FC weight ``W`` of shape (prod(inp), prod(out))
  in TT form. As in Caffe2, ``W`` is transposed first (the FC layer computes ``X W^T``), and ``W^T``'s
  elements, read in row-major order as a (prod(inp), prod(out)) tensor, are decomposed: for a square ``W``
  the TT op with these cores computes the FC's ``X W^T``. Each core ``[r_i, inp_i, out_i, r_{i+1}]`` is
  transposed to ``[inp_i, r_{i+1}, r_i, out_i]`` and the cores are stored last first (the TT layer's layout).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def init_tt_cores(
    inp_sizes: Sequence[int], out_sizes: Sequence[int], tt_ranks: Sequence[int], seed: int = 1234
) -> np.ndarray:
    np.random.seed(seed)
    inp_sizes, out_sizes, tt_ranks = np.array(inp_sizes), np.array(out_sizes), np.array(tt_ranks)
    cores = np.zeros(int(np.sum(inp_sizes * out_sizes * tt_ranks[1:] * tt_ranks[:-1])))
    idx = 0
    rv: Any = 1
    for i in range(inp_sizes.shape[0]):
        shape = [tt_ranks[i], inp_sizes[i], out_sizes[i], tt_ranks[i + 1]]
        tall = (int(np.prod(shape[:3])), int(shape[3]))
        core = np.dot(rv, np.random.normal(0, 1, size=(shape[0], int(np.prod(shape[1:])))))
        core = core.reshape(tall)
        if i < inp_sizes.shape[0] - 1:
            core, rv = np.linalg.qr(core)
        cores[idx : idx + core.size] = core.flatten()
        idx += core.size
    glorot = (np.prod(inp_sizes) * np.prod(tt_ranks)) ** (1.0 / inp_sizes.shape[0])
    # float32 as in Caffe2 (under numpy's old value-based casting the product stayed float32)
    return ((0.1 / glorot) * np.array(cores).astype(np.float32)).astype(np.float32)


def tt_svd(W: np.ndarray, sizes: Sequence[int], tt_ranks: Sequence[int]) -> np.ndarray:
    """Successive truncated SVDs of ``W`` (a tensor of shape ``sizes``): core i holds U of the
    i-th unfolding, truncated to rank ``tt_ranks[i+1]``; the last core holds the remainder."""
    sizes, tt_ranks = np.asarray(sizes), np.asarray(tt_ranks)
    assert len(tt_ranks) == len(sizes) + 1, "need one more rank than sizes"
    c = np.array(W, dtype=np.float64, copy=True)
    n = sizes.size
    core = np.zeros(int(np.sum(tt_ranks[:-1] * sizes * tt_ranks[1:])), dtype=np.float32)
    pos = 0
    for i in range(n - 1):
        c = c.reshape(int(tt_ranks[i] * sizes[i]), -1)
        u, s, v = np.linalg.svd(c, full_matrices=False)
        r = int(tt_ranks[i + 1])
        u, s, v = u[:, :r], s[:r], v[:r, :]
        size = int(tt_ranks[i] * sizes[i] * r)
        core[pos : pos + size] = u.ravel()
        pos += size
        c = np.dot(np.diag(s), v)
    core[pos : pos + int(tt_ranks[n - 1] * sizes[n - 1] * tt_ranks[n])] = c.ravel()
    return core


def matrix_to_tt(
    W: np.ndarray, inp_sizes: Sequence[int], out_sizes: Sequence[int], tt_ranks: Sequence[int]
) -> np.ndarray:
    """The cores of ``W^T`` (see the module docstring); Caffe2's argument checks are asserts, kept."""
    W = np.asarray(W)
    assert W.ndim == 2, "W must be a 2-D matrix"
    assert len(inp_sizes) == len(out_sizes) and len(tt_ranks) == len(inp_sizes) + 1
    assert tt_ranks[0] == tt_ranks[-1] == 1, "the first and last TT ranks must be 1"
    assert W.shape[0] == int(np.prod(inp_sizes)), f"prod(inp_sizes) must equal W.shape[0] ({W.shape[0]})"
    assert W.shape[1] == int(np.prod(out_sizes)), f"prod(out_sizes) must equal W.shape[1] ({W.shape[1]})"
    W = W.transpose()  # the FC layer multiplies by W^T
    inp, out, ranks = np.array(inp_sizes), np.array(out_sizes), np.array(tt_ranks)
    d = inp.size
    t = W.reshape(np.concatenate((inp, out)))
    order = np.repeat(np.arange(0, d), 2) + np.tile([0, d], d)  # inp_0, out_0, inp_1, out_1, ...
    t = np.transpose(t, axes=order).reshape(inp * out)
    cores = tt_svd(t, inp * out, ranks)
    new_cores = np.zeros(cores.shape, dtype=np.float32)
    idx = 0
    for i in range(d):
        shape = (ranks[i], inp[i], out[i], ranks[i + 1])
        size = int(np.prod(shape))
        core = cores[idx : idx + size].reshape(shape).transpose((1, 3, 0, 2))
        new_cores[new_cores.size - idx - size : new_cores.size - idx] = core.flatten()
        idx += size
    return new_cores
