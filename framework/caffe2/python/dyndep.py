"""``caffe2.python.dyndep``: Caffe2 loaded C++ operator libraries (``.so``) with ctypes. This
framework runs Python operators only and never loads native code from a path: InitOpsLibrary
refuses a shared library with a clear error (ops are added by registering them in Python, see
framework/ops/README.md)."""

from __future__ import annotations

import os

from framework.errors import FrameworkError

_loaded: list[str] = []


def InitOpsLibrary(name: str, trigger_lazy: bool = True) -> None:  # noqa: N802
    """Caffe2 dlopen()s ``name``; here a shared library is refused (FrameworkError), a missing
    file is a clear error, as in Caffe2."""
    if not os.path.exists(name):
        raise FrameworkError(
            f"dyndep.InitOpsLibrary: {name!r} does not exist (Caffe2 loads C++ operator libraries; "
            "this framework registers operators in Python)"
        )
    raise FrameworkError(
        f"dyndep.InitOpsLibrary: cannot load the C++ operator library {name!r}: this framework runs operators "
        "written in Python (numpy) and never loads native code. Register the ops it provides in Python "
        "(framework/ops/README.md); `framework ops` lists the ones available"
    )


def GetImportedOpsLibraries() -> list[str]:  # noqa: N802
    return list(_loaded)
