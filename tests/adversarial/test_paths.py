"""(c) Path escapes: ops that write files write only inside the root folder or allowed folders.

Every op writing a file (Save, Checkpoint/Snapshot, Print and Summarize with to_file) is tried
with relative '..' escapes, symlink escapes and absolute paths, on a confined workspace (as the
CLI builds: ``allow_paths=()``) and with an allowed folder. Nothing may appear outside, even when
the op fails; a refusal is a PathNotAllowedError naming the op, the argument and the path. A
generic sweep also runs every registered op having a path-like string argument.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from framework import core
from framework.errors import FrameworkError, PathNotAllowedError
from framework.memory.paths import safe_file_name
from framework.memory.workspace import Workspace
from framework.ops import all_schemas
from framework.ops.schema import STRING


def _tree(folder) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, n), folder))
    return out


@pytest.fixture
def sandbox(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "link")  # a symlink inside the root pointing out
    ws = Workspace(root_folder=str(root), allow_paths=())
    ws.feed_blob("w", np.ones((2, 3), np.float32))
    ws.feed_blob("iter", np.array(4, np.int64))
    return ws, tmp_path, root, outside


def _only_root_changed(tmp_path, before_outside):
    assert _tree(tmp_path / "outside") == before_outside
    assert set(os.listdir(tmp_path)) == {"root", "outside"}


SAVE_LIKE = [
    ("Save", ["w"], {}),
    ("Checkpoint", ["iter", "w"], {}),
    ("Snapshot", ["iter", "w"], {}),
]
ESCAPES = [
    ("../outside/x_%d.minidb", 0),
    ("../x_%d.minidb", 0),
    ("link/x_%d.minidb", 0),
    ("a/../../outside/x_%d.minidb", 0),
    ("{outside}/x_%d.minidb", 1),
    ("{outside}/x_%d.minidb", 0),
    ("{tmp}/x_%d.minidb", 1),
    ("{root}/link/x_%d.minidb", 1),
]


@pytest.mark.parametrize("db_type", ["minidb", "lmdb"])
@pytest.mark.parametrize("op_type,inputs,extra", SAVE_LIKE)
@pytest.mark.parametrize("path,absolute", ESCAPES)
def test_save_like_ops_refuse_paths_outside_the_allowed_folders(
    sandbox, op_type, inputs, extra, path, absolute, db_type
):
    ws, tmp_path, root, outside = sandbox
    path = path.format(outside=outside, tmp=tmp_path, root=root)
    before = _tree(outside)
    op = core.CreateOperator(op_type, inputs, [], db=path, db_type=db_type, absolute_path=absolute, **extra)
    with pytest.raises(FrameworkError) as ei:
        ws.run_operator_once(op)
    cause = ei.value.__cause__ if ei.value.__cause__ is not None else ei.value
    assert isinstance(cause, PathNotAllowedError), repr(cause)
    text = str(cause)
    shown = path if op_type == "Save" else path % 4
    assert op_type in text and "'db'" in text and shown in text
    _only_root_changed(tmp_path, before)


@pytest.mark.parametrize("op_type,inputs,extra", SAVE_LIKE)
def test_save_like_ops_write_inside_the_root_and_in_allowed_folders(tmp_path, op_type, inputs, extra):
    root, allowed = tmp_path / "root", tmp_path / "allowed"
    root.mkdir()
    allowed.mkdir()
    ws = Workspace(root_folder=str(root), allow_paths=[str(allowed)])
    ws.feed_blob("w", np.ones((2, 3), np.float32))
    ws.feed_blob("iter", np.array(4, np.int64))
    ws.run_operator_once(core.CreateOperator(op_type, inputs, [], db="ok_%d.minidb", db_type="minidb"))
    assert list(root.glob("ok_*.minidb"))
    target = str(allowed / "ok_%d.minidb")
    ws.run_operator_once(core.CreateOperator(op_type, inputs, [], db=target, db_type="minidb", absolute_path=1))
    assert list(allowed.glob("ok_*.minidb"))


def test_python_default_keeps_caffe2_absolute_paths(tmp_path):
    ws = Workspace(root_folder=str(tmp_path / "nowhere"))  # default policy: absolute paths allowed
    ws.feed_blob("w", np.ones((2,), np.float32))
    target = tmp_path / "abs.minidb"
    ws.run_operator_once(core.CreateOperator("Save", ["w"], [], db=str(target), db_type="minidb", absolute_path=1))
    assert target.exists()
    with pytest.raises(FrameworkError):  # relative escapes are refused even there
        ws.run_operator_once(core.CreateOperator("Save", ["w"], [], db="../../x.minidb", db_type="minidb"))


@pytest.mark.parametrize("op_type,suffix", [("Print", ".log"), ("Summarize", ".summary")])
@pytest.mark.parametrize("blob", ["../../escape", "/etc/evil", "..", "a/../../b", "link/x", "ok"])
def test_to_file_names_made_from_blob_names_stay_in_the_root(sandbox, op_type, suffix, blob):
    ws, tmp_path, root, outside = sandbox
    before = _tree(outside)
    ws.feed_blob(blob, np.ones((3,), np.float32))
    op = core.CreateOperator(op_type, [blob], [], to_file=1)
    ws.run_operator_once(op)
    _only_root_changed(tmp_path, before)
    name = safe_file_name(blob, suffix)
    assert "/" not in name and name not in (".", "..")
    assert (root / name).exists()


def test_child_workspaces_inherit_the_write_policy(sandbox):
    ws, tmp_path, root, outside = sandbox
    child = Workspace(parent=ws)
    with pytest.raises(PathNotAllowedError):
        child.resolve_write_path(str(outside / "x"), True, "op Save: argument 'db'")


def _path_args(schema) -> list[str]:
    keys = ("db", "path", "file", "folder", "dir", "source")
    return [a.name for a in schema.args.values() if a.kind == STRING and any(k in a.name for k in keys)]


PATH_OPS = [s for s in all_schemas() if _path_args(s)]


@pytest.mark.parametrize("schema", PATH_OPS, ids=[s.type for s in PATH_OPS])
def test_every_op_with_a_path_argument_creates_nothing_outside(sandbox, schema):
    """Any op with a path-like argument, given escaping paths: nothing is created outside."""
    ws, tmp_path, root, outside = sandbox
    before = _tree(outside)
    n_in = next(n for n in range(8) if schema.input_count_ok(n))
    n_out = next(n for n in range(8) if schema.output_count_ok(n))
    inputs = (["iter"] + ["w"] * (n_in - 1)) if n_in else []
    for value, absolute in (("../outside/e", 0), (str(outside / "e"), 1), ("link/e", 0), (str(tmp_path / "e"), 1)):
        kwargs = {name: value for name in _path_args(schema)}
        if "db_type" in schema.args:
            kwargs["db_type"] = "minidb"
        if "absolute_path" in schema.args:
            kwargs["absolute_path"] = absolute
        op = core.CreateOperator(schema.type, inputs, [f"o{k}" for k in range(n_out)], **kwargs)
        try:
            ws.run_operator_once(op)
        except FrameworkError:
            pass
        _only_root_changed(tmp_path, before)
