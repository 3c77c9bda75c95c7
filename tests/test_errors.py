"""Every framework error is a RuntimeError (Caffe2 code catches RuntimeError for a failed
enforce) and keeps its own second base."""

import inspect

import numpy as np
import pytest

import framework
from framework import core, errors, workspace

ERRORS = [c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, errors.FrameworkError)]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_is_a_runtime_error(cls):
    assert issubclass(cls, RuntimeError)
    e = cls("message")
    assert isinstance(e, RuntimeError) and "message" in str(e)


def test_second_bases_kept():
    assert issubclass(errors.ShapeError, ValueError)
    assert issubclass(errors.ArgumentError, ValueError)
    assert issubclass(errors.TypeMismatchError, TypeError)
    assert issubclass(errors.BlobNotFoundError, KeyError)
    assert issubclass(errors.UnknownOperatorError, KeyError)
    assert issubclass(errors.DBError, OSError)


def test_subclasses_elsewhere_are_runtime_errors_too():
    from framework.cli.common import CLIError
    from framework.ops.distributed.world import DistributedError

    assert issubclass(CLIError, RuntimeError) and issubclass(DistributedError, RuntimeError)


def test_caffe2_style_enforce_catch():
    ws = framework.Workspace()
    ws.feed_blob("X", np.zeros((2, 3), np.float32))
    ws.feed_blob("W", np.zeros((4, 5), np.float32))
    ws.feed_blob("b", np.zeros(4, np.float32))
    with pytest.raises(RuntimeError):
        ws.run_operator_once(core.CreateOperator("FC", ["X", "W", "b"], ["Y"]))
    with pytest.raises(RuntimeError):
        workspace.FetchBlob("no such blob anywhere")


def test_add_note_keeps_notes_on_every_supported_python(monkeypatch):
    err = errors.OperatorError("first")
    errors.add_note(err, "secondary error from op 2")
    assert err.__notes__ == ["secondary error from op 2"]

    class Py310:
        version_info = (3, 10, 13)

    monkeypatch.setattr(errors, "sys", Py310)
    old = errors.NetError("first")
    errors.add_note(old, "one")
    errors.add_note(old, "two")
    assert old.__notes__ == ["one", "two"]
