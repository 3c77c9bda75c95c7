"""``caffe2.python.test_util``: the base TestCase of Caffe2's tests and small helpers.

``TestCase.setUp`` gives each test an empty current workspace and ``self.ws``, a fresh
``workspace.C.Workspace()``, as Caffe2's does; tests marked ``@caffe2_flaky`` are skipped unless
``CAFFE2_RUN_FLAKY_TESTS=1``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest
from pathlib import Path
from typing import Any, Callable

import numpy as np

from framework import workspace


def rand_array(*dims: int) -> np.ndarray:
    """Uniform values in [-0.5, 0.5) as float32 (a 0-d array without dims)."""
    return np.array(np.random.rand(*dims) - 0.5).astype(np.float32)


def randBlob(name: str, type: Any, *dims: int, **kwargs: Any) -> None:
    """Feed blob ``name`` uniform values in [offset, offset + 1) of numpy type ``type`` (``offset=`` keyword,
    default 0), as Caffe2's test_util."""
    offset = kwargs.get("offset", 0.0)
    workspace.FeedBlob(name, np.random.rand(*dims).astype(type) + offset)


def randBlobFloat32(name: str, *dims: int, **kwargs: Any) -> None:
    randBlob(name, np.float32, *dims, **kwargs)


def randBlobsFloat32(names: Any, *dims: int, **kwargs: Any) -> None:
    for name in names:
        randBlobFloat32(name, *dims, **kwargs)


def numOps(net: Any) -> int:
    return len(net.Proto().op)


def str_compare(a: Any, b: Any, encoding: str = "utf8") -> bool:
    if isinstance(a, bytes):
        a = a.decode(encoding)
    if isinstance(b, bytes):
        b = b.decode(encoding)
    return a == b


def get_default_test_flags() -> list[str]:
    return [
        "caffe2",
        "--caffe2_log_level=0",
        "--caffe2_cpu_allocator_do_zero_fill=0",
        "--caffe2_cpu_allocator_do_junk_fill=1",
    ]


def caffe2_flaky(test_method: Callable) -> Callable:
    """Mark a test as flaky: it runs only with CAFFE2_RUN_FLAKY_TESTS=1."""
    test_method.__caffe2_flaky__ = True  # type: ignore[attr-defined]
    return test_method


def is_flaky_test_mode() -> bool:
    return os.getenv("CAFFE2_RUN_FLAKY_TESTS", "0") == "1"


class TestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        from framework import core

        workspace.GlobalInit(get_default_test_flags())
        core.SetEnginePref({}, {})  # as Caffe2: tests start without engine preferences

    def setUp(self) -> None:
        method = getattr(self, self._testMethodName)
        if getattr(method, "__caffe2_flaky__", False) and not is_flaky_test_mode():
            raise unittest.SkipTest("Flaky test")
        self.ws = workspace.C.Workspace()
        workspace.ResetWorkspace()

    def tearDown(self) -> None:
        workspace.ResetWorkspace()

    def make_tempdir(self) -> Path:
        folder = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, folder)
        return folder

    def assertApproxEqual(self, a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> None:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
