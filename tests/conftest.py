import json
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The CLI's first command would start `framework warmup` in the background; tests of that set it back.
os.environ.setdefault("FRAMEWORK_NO_AUTO_WARMUP", "1")
# Passes that rewrite a net through its dataflow view check the view after every rewrite (net/dataflow.py).
os.environ.setdefault("FRAMEWORK_CHECK_DATAFLOW", "1")


def _bytecode_outside_the_tree() -> None:
    """Under PYTHONDONTWRITEBYTECODE (set by some CI images), every test subprocess would compile the
    framework from source (0.2 s of CPU per `framework` command) and every xdist worker would rewrite and
    compile each test module again. The suite keeps that bytecode instead in the user cache folder
    (``$FRAMEWORK_CACHE_DIR``, else ``$XDG_CACHE_HOME/framework`` or ``~/.cache/framework``, as the
    kernels' cache), ``pycache/``: still nothing written into the source tree."""
    if not (sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return
    forced = os.environ.get("FRAMEWORK_CACHE_DIR", "")
    base = (
        Path(forced) if forced else Path(os.environ.get("XDG_CACHE_HOME", "") or Path.home() / ".cache") / "framework"
    )
    prefix = str(base / "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix  # the test subprocesses
    sys.pycache_prefix, sys.dont_write_bytecode = prefix, False  # this process: the test modules from here on


_bytecode_outside_the_tree()

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Two hypothesis profiles. "default" (the README's test command, CI): derandomized, so every run draws the
# examples CI drew and a failure replays on any machine, and at most DEFAULT_MAX_EXAMPLES examples a test,
# also where a test's own @settings asks for more. "full" (HYPOTHESIS_PROFILE=full): fresh random
# examples each run and every test's own count; run it after changing an op's maths.
DEFAULT_MAX_EXAMPLES = 10
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("default", max_examples=DEFAULT_MAX_EXAMPLES, derandomize=True, database=None, **_COMMON)
settings.register_profile("full", max_examples=40, **_COMMON)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
settings.load_profile(PROFILE)


def pytest_collection_modifyitems(items):
    """Under the default profile, cap the examples of tests whose @settings ask for more than it allows."""
    if PROFILE != "default":
        return
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and (own.max_examples > DEFAULT_MAX_EXAMPLES or not own.derandomize):
            capped = settings(own, max_examples=min(own.max_examples, DEFAULT_MAX_EXAMPLES), derandomize=True)
            test._hypothesis_internal_use_settings = capped


# FRAMEWORK_TEST_TIMES=path.jsonl appends one line per test: CPU seconds of this process and of the
# subprocesses it waited for, the xdist worker and the end time. Wall time misleads on a shared machine;
# CPU time says where the suite's cost is.
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
        # the worker and the end time show whether the workers finish together
        row |= {"worker": os.environ.get("PYTEST_XDIST_WORKER", ""), "end": time.time()}
        with open(_TIMES, "a") as f:
            f.write(json.dumps(row) + "\n")


@pytest.fixture(autouse=True)
def _kernel_families_stay_enabled():
    """A compiled kernel family disabled during a test (a compile that failed in this process: framework/kernels/
    kernel_support.py) would stay disabled for every later test of the process, which would then fail for a kernel
    they never get: that test fails here instead, naming the families, and they are enabled again for the rest.
    Tests that disable families on purpose do it on a monkeypatched ``_DISABLED``, undone before this runs. So
    is the host's feature set: a test that changed the process's own list fails, and the list is put back."""
    from framework.kernels import kernel_support

    disabled, features = kernel_support._DISABLED, kernel_support._FEATURES
    before, had = dict(disabled), list(features)
    yield
    new = {k: v for k, v in disabled.items() if k not in before}
    # an emptied list (RUNTIME.reset) is read again from the host on next use: only a different set is a change
    changed = bool(features) and bool(had) and features != had
    for k in new:
        del disabled[k]
    if changed:
        features[:] = had
    if new or changed:
        pytest.fail(f"kernel families disabled during this test: {new}; host features changed: {changed}")
