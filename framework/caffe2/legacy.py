"""Opt-in legacy mode of the caffe2 import hook: puts back, for old scripts, APIs that numpy, hypothesis,
scipy and Python removed after Caffe2's scripts and tests were written.

Off by default: ``framework.caffe2.install()`` patches nothing. ``install(legacy=True)``, the environment
variable ``FRAMEWORK_CAFFE2_LEGACY=1`` at ``install()``, or ``python -m framework.caffe2 --legacy`` call
``enable()``; ``framework.caffe2.uninstall()`` (or ``disable()``) puts every patched name back as it was.
It is opt-in because it changes third-party modules for the whole process: code that relies on the removal
(``hasattr(np, "float")``, a ``TypeError`` for an unknown hypothesis setting) sees the old API instead.

Each patch restores the removed API's documented behaviour, and only where the running library lacks it
(a name numpy still defines, such as numpy 2's own ``np.bool`` or ``np.long``, is left alone):

- numpy: the builtin-type aliases (``np.float`` is ``float``, ``np.int`` is ``int``, ``np.object``,
  ``np.str``, ``np.unicode``, ``np.complex``), the scalar-type aliases numpy 2.0 dropped (``np.float_`` is
  ``np.float64``, ``np.unicode_`` is ``np.str_``, ``np.string_`` is ``np.bytes_``...), the constants
  (``np.NaN``, ``np.Inf``, ``np.PINF``, ``np.NINF``...), the function aliases (``np.product``,
  ``np.cumproduct``, ``np.sometrue``, ``np.alltrue``, ``np.round_``) and ``np.asscalar(a)`` (``a.item()``);
  ``np.sum(generator)`` sums the generator with Python's ``sum`` (writing into ``out`` when given), as numpy
  1.x did; ``np.set_printoptions(threshold=np.nan)`` means "never summarize" (``sys.maxsize``), as it did.
- hypothesis: ``settings(...)`` accepts the removed settings ``timeout``, ``min_satisfying_examples``,
  ``max_iterations``, ``max_shrinks``, ``use_coverage``, ``strict``, ``buffer_size`` and ignores them
  (none changes which examples pass), and ``perform_health_check=False`` suppresses every health check;
  ``@settings`` on a function that ``@given`` does not wrap only records the settings, as before hypothesis'
  pytest plugin refused it; ``lists`` / ``sets`` / ``frozensets`` / ``text`` / ``binary`` /
  ``dictionaries`` accept and ignore ``average_size``, and take ``None`` for ``min_size`` / ``alphabet`` as
  "the default" (0 / any character), as they did; ``hypothesis.extra.numpy.arrays(dtype, shape,
  elements, fill, unique)`` takes its optional arguments positionally again; one ``@given`` test method
  run by several subclasses is not refused (the ``differing_executors`` health check hypothesis added
  later; Caffe2's tests inherit ``@given`` tests into device- or dtype-specific classes). Everything else
  about hypothesis is unchanged: the same ``settings`` class, the same strategies and health checks.
- Python: ``inspect.getargspec`` (Python 3.10's: ``ArgSpec(args, varargs, keywords, defaults)``, a
  ``ValueError`` for keyword-only parameters). One departure: annotations are ignored rather than refused,
  since this framework's versions of Caffe2's functions carry type hints that Caffe2's had not, and an
  annotation changes none of the four fields.
- scipy: ``scipy.misc.logsumexp`` (the alias of ``scipy.special.logsumexp`` it was) and
  ``scipy.interpolate.interp2d`` (scipy < 1.14's spline interpolation: ``framework.caffe2.legacy_interp2d``).

Numpy 2's scalar conversion rules (a size-1 array is no scalar, an out-of-range Python int is not wrapped)
are not changed: they are numpy's semantics, not a removed name.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.util
import inspect
import sys
import types
from collections import namedtuple
from typing import Any

_ABSENT = object()
# (owner, attribute, value before enable(); _ABSENT where the owner had none), in the order applied
_SAVED: list[tuple[Any, str, Any]] = []
# scipy.misc made up by enable() where scipy has none
_MADE_MODULES: list[str] = []

# hypothesis settings removed since Caffe2's tests were written; none changes which examples pass
_REMOVED_SETTINGS = (
    "timeout",
    "min_satisfying_examples",
    "max_iterations",
    "max_shrinks",
    "use_coverage",
    "strict",
    "buffer_size",
)
_AVERAGE_SIZE_STRATEGIES = ("lists", "sets", "frozensets", "text", "binary", "dictionaries")

ArgSpec = namedtuple("ArgSpec", "args varargs keywords defaults")


def enabled() -> bool:
    """Whether the legacy names are in place."""
    return bool(_SAVED)


def enable() -> None:
    """Put back the removed APIs listed in the module doc (idempotent)."""
    if _SAVED:
        return
    _patch_numpy()
    _patch_inspect()
    if importlib.util.find_spec("hypothesis") is not None:
        _patch_hypothesis()
    if importlib.util.find_spec("scipy") is not None:
        _patch_scipy()


def disable() -> None:
    """Undo ``enable()``: every patched name is as it was before (removed where it was absent)."""
    while _SAVED:
        owner, name, old = _SAVED.pop()
        if old is _ABSENT:
            if name in vars(owner):
                delattr(owner, name)
        else:
            setattr(owner, name, old)
    while _MADE_MODULES:
        name = _MADE_MODULES.pop()
        sys.modules.pop(name, None)


def _set(owner: Any, name: str, value: Any) -> None:
    _SAVED.append((owner, name, vars(owner).get(name, _ABSENT)))
    setattr(owner, name, value)


def _set_if_absent(owner: Any, name: str, value: Any) -> None:
    if name not in vars(owner):
        _set(owner, name, value)


# --- numpy ---------------------------------------------------------------------------------------------------


def _asscalar(a: Any) -> Any:
    """numpy's removed ``asscalar``: the array's single element as a Python scalar."""
    return a.item()


def _numpy_names(np: Any) -> dict[str, Any]:
    return {
        # builtin-type aliases (removed in numpy 1.24)
        "float": builtins.float,
        "int": builtins.int,
        "object": builtins.object,
        "str": builtins.str,
        "unicode": builtins.str,
        "complex": builtins.complex,
        # scalar-type aliases (removed in numpy 2.0)
        "float_": np.float64,
        "complex_": np.complex128,
        "cfloat": np.complex128,
        "singlecomplex": np.complex64,
        "longfloat": np.longdouble,
        "longcomplex": np.clongdouble,
        "clongfloat": np.clongdouble,
        "unicode_": np.str_,
        "string_": np.bytes_,
        "bool8": np.bool_,
        "int0": np.intp,
        "uint0": np.uintp,
        "object0": np.object_,
        "str0": np.str_,
        "bytes0": np.bytes_,
        "void0": np.void,
        # constants (removed in numpy 2.0)
        "NaN": np.nan,
        "NAN": np.nan,
        "Inf": np.inf,
        "Infinity": np.inf,
        "infty": np.inf,
        "PINF": np.inf,
        "NINF": -np.inf,
        "PZERO": 0.0,
        "NZERO": -0.0,
        # function aliases (removed in numpy 2.0)
        "product": np.prod,
        "cumproduct": np.cumprod,
        "sometrue": np.any,
        "alltrue": np.all,
        "round_": np.round,
        "asscalar": _asscalar,
    }


def _patch_numpy() -> None:
    import numpy as np

    for name, value in _numpy_names(np).items():
        _set_if_absent(np, name, value)

    numpy_sum = np.sum

    @functools.wraps(numpy_sum)
    def sum(a: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, types.GeneratorType):
            total = builtins.sum(a)
            out = kwargs.get("out", args[2] if len(args) > 2 else None)
            if out is not None:
                out[...] = total
                return out
            return total
        return numpy_sum(a, *args, **kwargs)

    _set(np, "sum", sum)

    numpy_set_printoptions = np.set_printoptions

    @functools.wraps(numpy_set_printoptions)
    def set_printoptions(*args: Any, **kwargs: Any) -> Any:
        threshold = kwargs.get("threshold", args[1] if len(args) > 1 else None)
        if isinstance(threshold, float) and threshold != threshold:  # nan: nothing is ever summarized
            if "threshold" in kwargs:
                kwargs["threshold"] = sys.maxsize
            else:
                args = (args[0], sys.maxsize, *args[2:])
        return numpy_set_printoptions(*args, **kwargs)

    _set(np, "set_printoptions", set_printoptions)


# --- inspect -------------------------------------------------------------------------------------------------


def _getargspec(func: Any) -> ArgSpec:
    """Python's removed ``inspect.getargspec``: a function's positional parameters, ``*args`` and ``**kwargs``
    names and defaults; refuses keyword-only parameters, which it cannot express (annotations: module doc)."""
    spec = inspect.getfullargspec(func)
    if spec.kwonlyargs:
        raise ValueError("Function has keyword-only parameters, use inspect.signature() API which can support them")
    return ArgSpec(spec.args, spec.varargs, spec.varkw, spec.defaults)


def _patch_inspect() -> None:
    _set_if_absent(inspect, "getargspec", _getargspec)


# --- hypothesis ----------------------------------------------------------------------------------------------


def _patch_hypothesis() -> None:
    import hypothesis
    import hypothesis.strategies as st
    from hypothesis import HealthCheck, settings

    settings_init = settings.__init__

    @functools.wraps(settings_init)
    def __init__(self: Any, parent: Any = None, **kwargs: Any) -> None:  # noqa: N807
        for name in _REMOVED_SETTINGS:
            kwargs.pop(name, None)
        if kwargs.pop("perform_health_check", True) is False:
            kwargs.setdefault("suppress_health_check", list(HealthCheck))
        settings_init(self, parent, **kwargs)

    _set(settings, "__init__", __init__)

    settings_call = settings.__call__

    @functools.wraps(settings_call)
    def __call__(self: Any, test: Any) -> Any:  # noqa: N807
        result = settings_call(self, test)
        if not inspect.isclass(result) and not getattr(result, "is_hypothesis_test", False):
            # a later @given reads _hypothesis_internal_use_settings; only the "applied" flag, which the
            # pytest plugin refuses on a test @given does not wrap, is dropped
            try:
                del result._hypothesis_internal_settings_applied
            except AttributeError:
                pass
        return result

    _set(settings, "__call__", __call__)

    differing = getattr(HealthCheck, "differing_executors", None)
    core = importlib.import_module("hypothesis.core")
    core_fail = getattr(core, "fail_health_check", None)
    if differing is not None and core_fail is not None:

        @functools.wraps(core_fail)
        def fail_health_check(settings: Any, message: str, health_check: Any) -> None:
            if health_check is not differing:
                core_fail(settings, message, health_check)

        _set(core, "fail_health_check", fail_health_check)

    for name in _AVERAGE_SIZE_STRATEGIES:
        strategy = getattr(st, name, None)
        if strategy is not None:
            _set(st, name, _without_average_size(strategy))

    if importlib.util.find_spec("hypothesis.extra.numpy") is not None:
        import hypothesis.extra.numpy as hnp

        numpy_arrays = hnp.arrays

        @functools.wraps(numpy_arrays)
        def arrays(
            dtype: Any, shape: Any, elements: Any = None, fill: Any = None, unique: bool = False, **kwargs: Any
        ) -> Any:
            return numpy_arrays(dtype, shape, elements=elements, fill=fill, unique=unique, **kwargs)

        _set(hnp, "arrays", arrays)
    del hypothesis


def _without_average_size(strategy: Any) -> Any:
    @functools.wraps(strategy)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("average_size", None)
        for name in ("min_size", "alphabet"):  # None meant the default
            if name in kwargs and kwargs[name] is None:
                del kwargs[name]
        return strategy(*args, **kwargs)

    return wrapper


# --- scipy ---------------------------------------------------------------------------------------------------


def _patch_scipy() -> None:
    import scipy
    import scipy.special

    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            misc = importlib.import_module("scipy.misc")
    except ImportError:
        misc = types.ModuleType("scipy.misc")
        misc.__doc__ = "scipy.misc: made up by framework.caffe2's legacy mode (this scipy has none)"
        sys.modules["scipy.misc"] = misc
        _MADE_MODULES.append("scipy.misc")
        _set(scipy, "misc", misc)
    _set_if_absent(misc, "logsumexp", scipy.special.logsumexp)

    import scipy.interpolate

    from framework.caffe2 import legacy_interp2d

    if legacy_interp2d.removed(scipy.interpolate):
        _set(scipy.interpolate, "interp2d", legacy_interp2d.interp2d)


__all__ = ["ArgSpec", "disable", "enable", "enabled"]
