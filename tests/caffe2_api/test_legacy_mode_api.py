"""framework.caffe2's opt-in legacy mode: each removed API it restores behaves as the old library's did, the
default install patches nothing, and disabling it puts every name back."""

import importlib
import inspect
import os
import subprocess
import sys
import textwrap

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import scipy.special
from hypothesis import HealthCheck, given, settings

import framework.caffe2 as hook
from framework.caffe2 import legacy

ENV = {k: v for k, v in os.environ.items() if k != hook.LEGACY_ENV}
ENV.update(OPENBLAS_NUM_THREADS="1")


@pytest.fixture
def legacy_mode():
    assert not legacy.enabled()
    legacy.enable()
    try:
        yield
    finally:
        legacy.disable()


def _patched_names():
    """Every name the legacy mode may touch, with what it is now."""
    import hypothesis.strategies

    return {
        "numpy": {
            n: vars(np).get(n) for n in ("float", "int", "asscalar", "unicode_", "NaN", "sum", "set_printoptions")
        },
        "inspect": vars(inspect).get("getargspec"),
        "settings": (vars(settings)["__init__"], vars(settings)["__call__"]),
        "health": vars(importlib.import_module("hypothesis.core"))["fail_health_check"],
        "strategies": [vars(hypothesis.strategies)[n] for n in ("lists", "sets", "text")],
        "arrays": hnp.arrays,
    }


def test_numpy_aliases_are_the_old_types(legacy_mode):
    assert np.float is float and np.int is int and np.object is object and np.str is str and np.unicode is str
    assert (
        np.float_ is np.float64 and np.unicode_ is np.str_ and np.string_ is np.bytes_ and np.complex_ is np.complex128
    )
    assert np.zeros(2, dtype=np.float).dtype == np.float64 and np.array([1], dtype=np.int).dtype == np.dtype(int)
    assert np.isnan(np.NaN) and np.NINF == -np.inf and np.product([2, 3]) == 6 and np.alltrue([True, True])
    # what numpy 2 still defines is numpy 2's
    assert np.bool is np.bool_ and np.long is vars(np)["long"]


def test_asscalar_is_item(legacy_mode):
    value = np.asscalar(np.array([[2.5]], dtype=np.float32))
    assert type(value) is float and value == 2.5
    assert type(np.asscalar(np.int64(7))) is int
    with pytest.raises(ValueError):  # as a.item(): only one element
        np.asscalar(np.zeros(2))


def test_sum_of_a_generator_is_pythons_sum(legacy_mode):
    assert np.sum(x * x for x in range(4)) == 14
    out = np.zeros((), dtype=np.float64)
    assert np.sum((x for x in (0.5, 1.0)), None, None, out) is out and out == 1.5
    # anything else is numpy's own sum
    a = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(np.sum(a, axis=0), [3, 5, 7])


def test_printoptions_threshold_nan_means_never_summarize(legacy_mode):
    before = np.get_printoptions()
    try:
        np.set_printoptions(threshold=np.nan)
        assert np.get_printoptions()["threshold"] == sys.maxsize
        assert "..." not in repr(np.arange(2000))
        np.set_printoptions(None, np.nan)
        assert np.get_printoptions()["threshold"] == sys.maxsize
        np.set_printoptions(threshold=5)
        assert np.get_printoptions()["threshold"] == 5
    finally:
        np.set_printoptions(**before)


def test_getargspec_as_python_3_10(legacy_mode):
    def f(a, b=2, *rest, **named):
        pass

    spec = inspect.getargspec(f)
    assert spec == (["a", "b"], "rest", "named", (2,)) and spec.keywords == "named"

    def g(a, *, b):
        pass

    with pytest.raises(ValueError, match="keyword-only"):
        inspect.getargspec(g)

    def annotated(self, x: int, threshold: float = 1e-4) -> None:
        pass

    assert inspect.getargspec(annotated) == (["self", "x", "threshold"], None, None, (1e-4,))


def test_settings_accepts_removed_keywords(legacy_mode):
    s = settings(timeout=10, max_examples=7, min_satisfying_examples=1, max_iterations=5, max_shrinks=0)
    assert s.max_examples == 7
    assert set(settings(perform_health_check=False).suppress_health_check) == set(HealthCheck)
    assert settings(perform_health_check=True).suppress_health_check == settings().suppress_health_check
    # still the one settings class: isinstance and profiles work
    assert isinstance(s, settings)
    with pytest.raises(TypeError):  # an unknown keyword is still refused
        settings(no_such_setting=1)


def test_settings_without_given_only_records(legacy_mode):
    calls = []

    @settings(max_examples=4, timeout=1)
    def plain(self):
        calls.append(1)

    assert plain._hypothesis_internal_use_settings.max_examples == 4
    assert not hasattr(plain, "_hypothesis_internal_settings_applied")

    # below @given, the settings still apply
    @given(st.integers())
    @settings(max_examples=4, derandomize=True, database=None)
    def counted(n):
        calls.append(n)

    counted()
    assert len(calls) == 4


class _Inherited:
    @given(st.integers(0, 3))
    @settings(max_examples=3, derandomize=True, database=None)
    def test_values(self, n):
        assert 0 <= n <= 3


class _First(_Inherited):
    pass


class _Second(_Inherited):
    pass


def test_one_given_method_run_by_several_subclasses(legacy_mode):
    _First().test_values()
    _Second().test_values()  # hypothesis' differing_executors health check would refuse this one


def test_other_health_checks_still_apply(legacy_mode):
    from hypothesis.errors import FailedHealthCheck

    @given(st.integers().filter(lambda n: False))
    @settings(max_examples=5, database=None, derandomize=True)
    def never_satisfied(n):
        pass

    with pytest.raises(FailedHealthCheck, match="filter"):
        never_satisfied()


def test_average_size_accepted_and_ignored(legacy_mode):
    strategy = st.lists(st.integers(0, 3), min_size=1, average_size=10, max_size=2)

    @given(strategy)
    @settings(max_examples=20, derandomize=True, database=None)
    def sizes(xs):
        assert 1 <= len(xs) <= 2

    sizes()
    assert repr(st.sets(st.integers(), average_size=2)) == repr(st.sets(st.integers()))
    assert repr(st.text(average_size=2)) == repr(st.text())
    # None meant "the default" for the alphabet and the minimum size
    assert repr(st.text(alphabet=None, min_size=None)) == repr(st.text())
    assert repr(st.lists(st.integers(), min_size=None)) == repr(st.lists(st.integers()))


def test_arrays_takes_elements_positionally(legacy_mode):
    @given(hnp.arrays(np.int32, 5, st.integers(0, 1)))
    @settings(max_examples=10, derandomize=True, database=None)
    def zeros_and_ones(a):
        assert a.dtype == np.int32 and a.shape == (5,) and set(a.tolist()) <= {0, 1}

    zeros_and_ones()


def test_scipy_misc_logsumexp(legacy_mode):
    from scipy.misc import logsumexp

    assert logsumexp is scipy.special.logsumexp
    assert np.isclose(logsumexp([0.0, 0.0]), np.log(2.0))


def test_disable_restores_every_name():
    before = _patched_names()
    assert "float" not in vars(np) and not hasattr(inspect, "getargspec")
    legacy.enable()
    legacy.enable()  # idempotent: the originals are recorded once
    assert legacy.enabled() and _patched_names() != before
    legacy.disable()
    assert not legacy.enabled() and _patched_names() == before
    with pytest.raises(TypeError):
        settings(timeout=1)
    with pytest.raises(AttributeError):
        np.asscalar


def _run(code, **env):
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env={**ENV, **env}, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


PROBE = """
import inspect, sys
import numpy as np
from hypothesis import settings
import framework.caffe2 as hook
numpy_sum = np.sum
hook.install({args})
try:
    settings(timeout=1)
    timeout = "accepted"
except TypeError:
    timeout = "refused"
print(hasattr(np, "float"), hasattr(np, "asscalar"), hasattr(inspect, "getargspec"), timeout,
      np.sum is numpy_sum, "framework.caffe2.legacy" in sys.modules)
hook.uninstall()
print(hasattr(np, "float"), np.sum is numpy_sum)
"""


def test_default_install_patches_nothing():
    assert _run(PROBE.format(args="")) == ["False", "False", "False", "refused", "True", "False", "False", "True"]


def test_install_legacy_by_argument_or_environment():
    expected = ["True", "True", "True", "accepted", "False", "True", "False", "True"]
    assert _run(PROBE.format(args="legacy=True")) == expected
    assert _run(PROBE.format(args=""), FRAMEWORK_CAFFE2_LEGACY="1") == expected
    # an explicit False wins over the environment
    assert _run(PROBE.format(args="legacy=False"), FRAMEWORK_CAFFE2_LEGACY="1")[:4] == [
        "False",
        "False",
        "False",
        "refused",
    ]


def test_runner_legacy_flag(tmp_path):
    script = tmp_path / "old_script.py"
    script.write_text("import numpy as np\nfrom caffe2.python import core\nprint(np.asscalar(np.array([4])) + 1)\n")
    cmd = [sys.executable, "-m", "framework.caffe2"]
    plain = subprocess.run([*cmd, str(script)], env=ENV, capture_output=True, text=True, timeout=120)
    assert plain.returncode != 0 and "asscalar" in plain.stderr
    old = subprocess.run([*cmd, "--legacy", str(script)], env=ENV, capture_output=True, text=True, timeout=120)
    assert old.returncode == 0, old.stderr
    assert old.stdout.split() == ["5"]
    cli = [sys.executable, "-m", "framework", "exec"]
    plain = subprocess.run([*cli, str(script)], env=ENV, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "asscalar" in plain.stderr
    old = subprocess.run([*cli, "--legacy", str(script)], env=ENV, capture_output=True, text=True, timeout=120)
    assert old.returncode == 0 and old.stdout.split() == ["5"], old.stderr
