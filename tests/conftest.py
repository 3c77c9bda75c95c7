import json
import os
import resource
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The CLI's first command would start `framework warmup` in the background; tests of that set it back.
os.environ.setdefault("FRAMEWORK_NO_AUTO_WARMUP", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "default",
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# FRAMEWORK_TEST_TIMES=path.jsonl appends one line per test phase: CPU seconds of this process and of the
# subprocesses it waited for. Wall time misleads on a shared machine; CPU time says where the suite's cost is.
_TIMES = os.environ.get("FRAMEWORK_TEST_TIMES")


def _cpu():
    return time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)


if _TIMES:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        cpu0, ch0 = _cpu()
        wall0 = time.perf_counter()
        yield
        cpu1, ch1 = _cpu()
        children = (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
        row = {"id": item.nodeid, "cpu": cpu1 - cpu0, "children": children, "wall": time.perf_counter() - wall0}
        with open(_TIMES, "a") as f:
            f.write(json.dumps(row) + "\n")
