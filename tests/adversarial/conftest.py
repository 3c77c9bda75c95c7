"""Shared set-up of the adversarial tests: a low allocation limit, so a hostile shape is refused
long before it could hurt the machine (and quickly)."""

from __future__ import annotations

import pytest

from framework.memory import set_allocation_limit

LIMIT = 256 << 20


@pytest.fixture(autouse=True)
def small_allocation_limit():
    old = set_allocation_limit(LIMIT)
    try:
        yield LIMIT
    finally:
        set_allocation_limit(old)
