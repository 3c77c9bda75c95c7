"""Helpers shared by the subcommands: loading nets and inputs, printing arrays."""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace


class CLIError(FrameworkError):
    """A command-line mistake, with a hint for the next step."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def read_net(path: str) -> Any:
    """A NetDef from a text or binary protobuf file (named in errors)."""
    from framework.proto.io import read_net as _read

    if not os.path.exists(path):
        raise CLIError(f"net file not found: {path}", "pass the path of a .pbtxt or .pb NetDef")
    net = _read(path)
    if not net.name:
        net.name = os.path.splitext(os.path.basename(path))[0]
    return net


def parse_inputs(specs: Iterable[str], default_names: list[str] | None = None) -> dict[str, np.ndarray]:
    """``NAME=FILE.npy`` pairs (or bare FILE.npy for the next default name) -> arrays."""
    out: dict[str, np.ndarray] = {}
    defaults = list(default_names or [])
    for spec in specs:
        if "=" in spec:
            name, path = spec.split("=", 1)
        else:
            if not defaults:
                raise CLIError(f"input '{spec}' has no blob name", "write it as NAME=FILE.npy")
            name, path = defaults.pop(0), spec
        out[name] = load_npy(path)
        if defaults and defaults[0] == name:
            defaults.pop(0)
    return out


def load_npy(path: str) -> np.ndarray:
    if not os.path.exists(path):
        raise CLIError(f"input file not found: {path}", "inputs are .npy files written by numpy.save")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        raise CLIError(f"cannot read {path} as a .npy array: {e}", "object arrays are refused (no pickle)") from e


def summarize(name: str, value: Any, limit: int = 8) -> str:
    """One or two lines describing a fetched blob."""
    if isinstance(value, bytes):
        return f"{name}: string ({len(value)} bytes) {value[:60]!r}"
    if not isinstance(value, np.ndarray):
        return f"{name}: {type(value).__name__}"
    head = f"{name}: shape {list(value.shape)} {value.dtype}"
    if value.size == 0:
        return head + " (empty)"
    if value.dtype.kind in "fiub":
        v = value.astype(np.float64)
        stats = f" min {v.min():.6g} max {v.max():.6g} mean {v.mean():.6g}"
    else:
        stats = ""
    flat = value.reshape(-1)[:limit]
    more = " ..." if value.size > limit else ""
    values = np.array2string(flat, precision=5, separator=", ", max_line_width=200)
    return f"{head}{stats}\n  {values}{more}"


def new_workspace(root_folder: str = ".") -> Workspace:
    return Workspace(root_folder=root_folder, name="cli")


def load_checkpoint(ws: Workspace, path: str) -> list[str]:
    from framework import checkpoint

    if not os.path.exists(path):
        raise CLIError(f"checkpoint not found: {path}", "train first (framework train ... --checkpoint PATH)")
    return checkpoint.load(ws, path)
