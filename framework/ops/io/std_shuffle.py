"""``std::shuffle(first, last, std::default_random_engine())`` as the GNU C++ library of Caffe2's
builds computes it, so ops that shuffle that way give Caffe2's exact permutation.

- ``std::default_random_engine`` is ``minstd_rand0``: x <- 16807 x mod (2**31 - 1), seeded with 1;
  it yields values in [1, 2**31 - 2].
- ``uniform_int_distribution(0, k)`` on it (the engine's range is wider than k + 1) downscales:
  draw r = x - 1 until r < (k + 1) * s with s = (2**31 - 2) // (k + 1), and return r // s.
- ``shuffle`` swaps element i (i = 1 .. n-1) with element uniform(0, i), one draw each (the GNU
  library before GCC 9, which built Caffe2's releases; later ones draw two positions at a time).
"""

from __future__ import annotations

import numpy as np

_MODULUS = 2**31 - 1
_MULTIPLIER = 16807
_RANGE = _MODULUS - 2  # engine max - min


class MinstdRand0:
    """C++'s ``minstd_rand0`` (``std::default_random_engine`` in the GNU library)."""

    def __init__(self, seed: int = 1) -> None:
        self.state = seed % _MODULUS or 1

    def __call__(self) -> int:
        self.state = self.state * _MULTIPLIER % _MODULUS
        return self.state

    def uniform(self, high: int) -> int:
        """An integer in [0, high], as ``uniform_int_distribution`` draws it from this engine."""
        span = high + 1
        scaling = _RANGE // span
        past = span * scaling
        while True:
            r = self() - 1
            if r < past:
                return r // scaling


def std_shuffle(values: np.ndarray) -> None:
    """Shuffle the 1-D ``values`` in place as ``std::shuffle`` with a fresh default engine."""
    g = MinstdRand0()
    for i in range(1, len(values)):
        j = g.uniform(i)
        values[i], values[j] = values[j], values[i]
