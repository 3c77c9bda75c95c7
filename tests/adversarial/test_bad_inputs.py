"""(a) The bad-input matrix over every registered op type (see matrix.py).

One test per op type, found in the registry at collection time: an op registered by anyone is
covered without touching this file. Each runs every case of its matrix and fails listing the
cases that broke the rules (a raw numpy/Python error, or a workspace changed by a failed op).
A case that hangs past ``TIMEOUT_S`` counts as a violation too. By default each op runs a fixed
sample of its matrix (``matrix.MAX_CASES_PER_OP``) to keep the landing gate fast;
``FRAMEWORK_ADVERSARIAL_FULL=1`` runs all of it.
"""

from __future__ import annotations

import signal
import threading
import warnings

import numpy as np
import pytest

from framework.ops import all_schemas
from tests.adversarial.matrix import Case, cases, run_case
from tests.adversarial.op_fuzzer import compiling

TIMEOUT_S = 10

# Op types that end the process on purpose (their job): not run here.
EXCLUDED = {"Crash": "aborts the process by design, as Caffe2's Crash op"}
# Types starting with "_" are registered by other test modules as fixtures (not part of the framework).
OP_TYPES = [s.type for s in all_schemas() if s.type not in EXCLUDED and not s.type.startswith("_")]
_SCHEMAS = {s.type: s for s in all_schemas()}


class _Hang(Exception):
    pass


def _run_with_alarm(schema, case: Case) -> str | None:
    if threading.current_thread() is not threading.main_thread():
        return run_case(schema, case)

    def on_alarm(*_):
        if compiling():  # a kernel's first-use compile is not the op's time, and must not be interrupted
            signal.alarm(TIMEOUT_S)
            return
        raise _Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TIMEOUT_S)
    try:
        return run_case(schema, case)
    except _Hang:
        return f"did not finish within {TIMEOUT_S} s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_bad_inputs_raise_framework_errors_and_change_nothing(op_type, capfd):
    schema = _SCHEMAS[op_type]
    violations = []
    n = 0
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in cases(schema):
            n += 1
            bad = _run_with_alarm(schema, case)
            if bad:
                violations.append(f"  [{case.label}] {bad.splitlines()[0][:300]}")
    capfd.readouterr()  # ops such as Print write to stdout; keep the report readable
    assert n > 0, f"{op_type}: the matrix generated no case"
    assert not violations, f"{op_type}: {len(violations)} of {n} bad-input cases broke the rules:\n" + "\n".join(
        violations
    )


def test_the_matrix_covers_every_registered_op_type():
    """Counts for the report: cases, op types (every registered one), each op with >= 5 cases
    (the full matrix with FRAMEWORK_ADVERSARIAL_FULL=1, else the sample the gate runs)."""
    counts = {t: sum(1 for _ in cases(_SCHEMAS[t])) for t in OP_TYPES}
    assert set(counts) | set(EXCLUDED) == {s.type for s in all_schemas() if not s.type.startswith("_")} | set(EXCLUDED)
    few = {t: n for t, n in counts.items() if n < 5}
    assert not few, f"op types with fewer than 5 bad-input cases: {few}"
    print(f"bad-input matrix: {sum(counts.values())} cases over {len(counts)} op types")
