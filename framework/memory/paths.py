"""Where ops may write files: the workspace's root folder, and folders the user allowed.

- A relative path must resolve (symlinks followed) inside the root folder: ``..`` and
  symlinks pointing out are refused.
- An absolute path needs the op's ``absolute_path: 1`` argument *and* a workspace policy that
  allows it: ``Workspace(allow_paths=None)`` (the Python default, Caffe2's behaviour for code
  the user wrote) allows any absolute path; ``Workspace(allow_paths=[dir, ...])`` (what the
  CLI builds for a net read from disk, ``--allow-write DIR``) allows only paths inside those
  folders or the root folder.
- File names made from blob names go through ``safe_file_name`` (one sanitizer everywhere).

Checks happen before anything is created, so a refused write creates nothing (no folder, no
temporary file, no lock file).
"""

from __future__ import annotations

import os
import re

from framework.errors import PathNotAllowedError

_UNSAFE = re.compile(r"[^A-Za-z0-9._#+=@,-]")


def safe_file_name(blob_name: str, suffix: str = "") -> str:
    """A file name (no folder part) made from a blob name: '/' becomes '#' (as Caffe2's
    Summarize), other characters outside [A-Za-z0-9._#+=@,-] become '_', and names made only of
    dots ('.', '..') get a leading '_'."""
    name = _UNSAFE.sub("_", str(blob_name).replace("/", "#"))[:200] or "_"
    if set(name) == {"."}:
        name = "_" + name
    return name + suffix


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives
        return False


def check_write_path(
    path: str, root_folder: str, allow_paths: tuple[str, ...] | None, absolute: bool, what: str
) -> str:
    """The path to write for ``path`` (as the op gave it); PathNotAllowedError naming ``what``
    (op and argument) and the path when the policy refuses it."""
    root = os.path.realpath(root_folder)
    if "\x00" in path:
        raise PathNotAllowedError(f"{what}: path {path!r} contains a NUL byte")
    if absolute or os.path.isabs(path):
        if allow_paths is None:
            return path  # Caffe2's behaviour: code the user wrote may write anywhere
        if not absolute:
            raise PathNotAllowedError(
                f"{what}: absolute path '{path}' needs the argument absolute_path: 1 "
                f"(and a folder the workspace allows; allowed: {_allowed_text(root, allow_paths)})"
            )
        real = os.path.realpath(path)
        if not any(_inside(real, f) for f in (root, *allow_paths)):
            raise PathNotAllowedError(
                f"{what}: writing '{path}' is not allowed: it is outside the allowed folders "
                f"{_allowed_text(root, allow_paths)} (the CLI's --allow-write DIR, or Workspace(allow_paths=[...]))"
            )
        return path
    real = os.path.realpath(os.path.join(root, path))
    if not _inside(real, root) and not any(_inside(real, f) for f in allow_paths or ()):
        raise PathNotAllowedError(
            f"{what}: relative path '{path}' resolves to '{real}', outside the workspace root folder '{root}' "
            "('..' or a symlink leads out); write inside the root folder, or give an absolute path with "
            "absolute_path: 1 in a folder the workspace allows"
        )
    return os.path.join(root_folder, path)


def _allowed_text(root: str, allow_paths: tuple[str, ...]) -> str:
    return "[" + ", ".join(repr(p) for p in (root, *allow_paths)) + "]"


def normalize_allow_paths(paths: object) -> tuple[str, ...] | None:
    """``None`` stays None (unconfined absolute paths); folders become their real paths."""
    if paths is None:
        return None
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    return tuple(os.path.realpath(os.fsdecode(p)) for p in paths)  # type: ignore[attr-defined]
