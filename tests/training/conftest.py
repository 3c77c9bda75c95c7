"""Fixtures shared by the training tests."""

import pytest

from framework import workspace


@pytest.fixture
def fresh_workspace():
    """An empty default workspace for the test, emptied again after it.

    Files whose every test needs it say ``pytestmark = pytest.mark.usefixtures("fresh_workspace")``.
    """
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()
