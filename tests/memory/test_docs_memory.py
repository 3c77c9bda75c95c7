"""The examples in docs/memory.md are doctests and must hold."""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "memory.md"


def test_memory_doc_examples():
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0
