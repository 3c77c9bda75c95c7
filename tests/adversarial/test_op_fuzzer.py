"""(a') The op fuzzer over every registered op type (see op_fuzzer.py): a seed input each op accepts,
built from its schema, then hostile one-change variants of it.

By default a fixed sample runs (no randomness: the same cases every run; every op type gets its seed
search and, when a seed is found, ``SAMPLE_VARIANTS`` variants). ``FRAMEWORK_FUZZ_FULL=1`` runs the whole
search and every variant. Violations fail the test with one line each; the reach (op types with an
accepted input and at least one hostile input) must not fall below what the fuzzer reached when this
test was written, so a schema or error-message change that blinds the fuzzer is noticed.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from framework.ops import all_schemas
from tests.adversarial.op_fuzzer import fuzz_op

# Op types that end the process on purpose (their job), and fixtures other test modules register.
EXCLUDED = {"Crash"}
FULL = os.environ.get("FRAMEWORK_FUZZ_FULL") == "1"
MIN_REACHED = 710  # op types reached by the fixed sample (an accepted input, then hostile ones)


def _fuzz_all():
    schemas = [s for s in all_schemas() if s.type not in EXCLUDED and not s.type.startswith("_")]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [fuzz_op(s, full=FULL) for s in schemas]


def test_op_fuzzer_finds_no_violation_and_reaches_the_op_types(capfd):
    reports = _fuzz_all()
    capfd.readouterr()  # ops such as Print write to stdout; keep the report readable
    violations = [f"{r.op_type} {v}" for r in reports for v in r.violations]
    reached = sum(r.reached for r in reports)
    cases = sum(r.cases for r in reports)
    assert all(r.cases > 0 for r in reports), "an op type was not run at all"
    assert not violations, f"{len(violations)} violations in {cases} cases:\n" + "\n".join(violations)
    assert reached >= MIN_REACHED, f"the fuzzer reached {reached} op types of {len(reports)}, fewer than {MIN_REACHED}"
    print(f"op fuzzer: {cases} cases, {reached} of {len(reports)} op types reached, 0 violations")


def test_the_hang_alarm_knows_when_a_kernel_compiles():
    """The alarm waits while this thread is inside numba's compiler (see op_fuzzer.compiling)."""
    from tests.adversarial.op_fuzzer import compiling

    numba_lock = pytest.importorskip("numba.core.compiler_lock").global_compiler_lock
    assert not compiling()
    with numba_lock:
        assert compiling()
    assert not compiling()
