"""``caffe2.python.onnx.tests.test_utils``: ``TestCase`` for ONNX conversion tests.

``setUp`` seeds numpy's global generator with 0; ``assertSameOutputs(a, b, decimal=7)`` checks two
output lists pairwise for equal length, dtype and values (to ``decimal`` places);
``add_test_case(name, fn)`` adds a ``test_*`` method, refusing other names and duplicates.
"""

from __future__ import annotations

import unittest
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["TestCase"]


class TestCase(unittest.TestCase):
    def setUp(self) -> None:
        np.random.seed(seed=0)

    def assertSameOutputs(self, outputs1: Sequence[Any], outputs2: Sequence[Any], decimal: int = 7) -> None:
        self.assertEqual(len(outputs1), len(outputs2))
        for first, second in zip(outputs1, outputs2):
            self.assertEqual(np.asarray(first).dtype, np.asarray(second).dtype)
            np.testing.assert_almost_equal(first, second, decimal=decimal)

    def add_test_case(self, name: str, test_func: Callable) -> None:
        if not name.startswith("test_"):
            raise ValueError(f"Test name must start with test_: {name}")
        if hasattr(self, name):
            raise ValueError(f"Duplicated test name: {name}")
        setattr(self, name, test_func)
