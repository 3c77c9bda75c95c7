"""Relative paths in Caffe2's workspace: data sources (CreateDB, CreateTextFileReader) open them as given,
relative to the working directory, as Caffe2's CreateDB does; Save/Load resolve them under the root folder
(Caffe2's ``RootFolder() + "/" + db``) and writes stay confined to it."""

import os

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2 import c_extension as C
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops.io.db_input import write_tensor_protos_db


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    workspace.ResetWorkspace(".")
    yield tmp_path
    monkeypatch.chdir(os.path.dirname(os.path.abspath(__file__)))
    workspace.ResetWorkspace(".")


def _records(n=4):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return x, np.arange(n, dtype=np.int32)


def test_create_db_opens_relative_path_from_working_directory(in_tmp):
    x, y = _records()
    os.makedirs("data")
    write_tensor_protos_db("data/train", [x, y], db_type="minidb")
    # the MNIST tutorial's layout: a relative root folder, and a db path that already includes it
    workspace.ResetWorkspace("model")
    assert workspace.RootFolder() == "model"
    workspace.RunOperatorOnce(core.CreateOperator("CreateDB", [], ["reader"], db="data/train", db_type="minidb"))
    workspace.RunOperatorOnce(core.CreateOperator("TensorProtosDBInput", ["reader"], ["X", "Y"], batch_size=4))
    np.testing.assert_array_equal(workspace.FetchBlob("X"), x)
    np.testing.assert_array_equal(workspace.FetchBlob("Y"), y)


def test_text_file_reader_relative_to_working_directory(in_tmp):
    (in_tmp / "rows.tsv").write_text("1.5\n2.5\n")
    workspace.ResetWorkspace("elsewhere")
    workspace.RunOperatorOnce(
        core.CreateOperator("CreateTextFileReader", [], ["r"], filename="rows.tsv", field_types=[1])
    )
    workspace.RunOperatorOnce(core.CreateOperator("TextFileReaderRead", ["r"], ["v"], batch_size=2))
    np.testing.assert_array_equal(workspace.FetchBlob("v"), np.array([1.5, 2.5], np.float32))


def test_save_load_stay_under_root_folder(in_tmp):
    workspace.ResetWorkspace("model")
    workspace.FeedBlob("w", np.array([1.0, 2.0], np.float32))
    workspace.RunOperatorOnce(core.CreateOperator("Save", ["w"], [], db="params", db_type="minidb"))
    assert os.path.exists(os.path.join("model", "params")) and not os.path.exists("params")
    workspace.ResetWorkspace()
    workspace.RunOperatorOnce(core.CreateOperator("Load", [], ["w"], db="params", db_type="minidb"))
    np.testing.assert_array_equal(workspace.FetchBlob("w"), [1.0, 2.0])
    # a relative write that leaves the root folder is still refused, and creates nothing
    with pytest.raises(FrameworkError, match="PathNotAllowedError.*outside the workspace root folder"):
        workspace.RunOperatorOnce(core.CreateOperator("Save", ["w"], [], db="../escaped", db_type="minidb"))
    assert not os.path.exists(in_tmp / "escaped")


def test_c_workspace_and_named_workspaces_read_as_caffe2(in_tmp):
    x, y = _records(2)
    write_tensor_protos_db("d", [x, y], db_type="minidb")
    ws = C.Workspace()
    ws.root_folder = "sub"
    assert ws.resolve_read_path("d") == "d" and ws.resolve_read_path(str(in_tmp / "d")) == str(in_tmp / "d")
    run_operator_once(ws, core.CreateOperator("CreateDB", [], ["reader"], db="d", db_type="minidb"))
    workspace.SwitchWorkspace("h36c_other", True)
    try:
        assert workspace.C().resolve_read_path("d") == "d"
    finally:
        workspace.SwitchWorkspace("default")


def test_framework_workspace_keeps_reading_under_its_root(tmp_path):
    # this framework's own Workspace (and `framework --root DIR`) serve relative data paths from the root
    x, y = _records(2)
    write_tensor_protos_db(tmp_path / "d", [x, y], db_type="minidb")
    ws = Workspace(root_folder=str(tmp_path))
    assert ws.read_folder == str(tmp_path)
    run_operator_once(ws, core.CreateOperator("CreateDB", [], ["reader"], db="d", db_type="minidb"))
    run_operator_once(ws, core.CreateOperator("TensorProtosDBInput", ["reader"], ["X", "Y"], batch_size=2))
    np.testing.assert_array_equal(ws.fetch_blob("X"), x)
    child = Workspace(parent=Workspace(root_folder=str(tmp_path), read_folder=""))
    assert child.resolve_read_path("d") == "d"
