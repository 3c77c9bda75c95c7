"""``caffe2.python.dyndep``: Caffe2 loaded C++ operator libraries (``.so``) with ctypes. This
framework runs Python operators only and never loads native code from a path: InitOpsLibrary
refuses a shared library with a clear error (ops are added by registering them in Python, see
framework/ops/README.md). A path that does not exist is ignored with Caffe2's message (Caffe2 defers the
failure to the first use of an op the library would have registered; here that op is unknown too)."""

from __future__ import annotations

import os

from framework.errors import FrameworkError

_loaded: list[str] = []


def InitOpsLibrary(name: str, trigger_lazy: bool = True) -> None:
    """Caffe2 dlopen()s ``name``; here an existing file is refused (FrameworkError) and never loaded. A path
    that does not exist prints ``Ignoring <name> as it is not a valid file.`` and returns None, as Caffe2
    (2018 and 2020) does."""
    if not os.path.exists(name):
        print(f"Ignoring {name} as it is not a valid file.")
        return
    raise FrameworkError(
        f"dyndep.InitOpsLibrary: cannot load the C++ operator library {name!r}: this framework runs operators "
        "written in Python (numpy) and never loads native code. Register the ops it provides in Python "
        "(framework/ops/README.md); `framework ops` lists the ones available"
    )


def GetImportedOpsLibraries() -> list[str]:
    return list(_loaded)
