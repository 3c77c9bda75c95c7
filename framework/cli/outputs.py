"""Saving arrays as the file suffix says: ``.npz`` (every array), ``.npy`` (one), ``.csv`` (one 2-D or 1-D).

Shared by ``framework run --save`` and ``framework predict --save``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from framework.cli.common import CLIError

SUFFIXES = (".npz", ".npy", ".csv")
HELP = "save to OUT.npz (every output), OUT.npy (one output) or OUT.csv (one 1-D or 2-D output)"


def check_suffix(path: str) -> str:
    """The lower-case suffix of ``path``, or a CLIError if it is not one we write."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise CLIError(f"--save {path}: unknown suffix {suffix or '(none)'}", f"use one of {', '.join(SUFFIXES)}")
    return suffix


def save_arrays(path: str, arrays: dict[str, np.ndarray], header: list[str] | None = None) -> str:
    """Write ``arrays`` to ``path`` in the format its suffix names; returns a one-line description."""
    suffix = check_suffix(path)
    if suffix == ".npz":
        np.savez(path, **arrays)
        return f"saved {len(arrays)} arrays to {path}"
    if len(arrays) != 1:
        raise CLIError(
            f"--save {path}: a {suffix} file holds one array, the net has {len(arrays)} outputs ({', '.join(arrays)})",
            "pick one with --output NAME, or save to a .npz file",
        )
    ((name, value),) = arrays.items()
    if suffix == ".npy":
        np.save(path, value)
        return f"saved '{name}' {list(value.shape)} to {path}"
    if value.ndim > 2:
        raise CLIError(
            f"--save {path}: '{name}' has shape {list(value.shape)}; a .csv holds 1-D or 2-D arrays",
            "save it to a .npy or .npz file",
        )
    table = value.reshape(len(value), -1) if value.ndim else value.reshape(1, 1)
    fmt = "%d" if table.dtype.kind in "biu" else "%.8g"
    columns = header or ([name] if table.shape[1] == 1 else [f"{name}_{j}" for j in range(table.shape[1])])
    np.savetxt(path, table, delimiter=",", fmt=fmt, header=",".join(columns), comments="")
    return f"saved '{name}' {list(value.shape)} to {path}"


def numeric(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: v for k, v in outputs.items() if isinstance(v, np.ndarray) and v.dtype != object}
