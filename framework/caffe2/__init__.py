"""Run Caffe2 code unchanged: an import hook that maps ``caffe2.python.*`` and ``caffe2.proto.*``
onto this framework's modules, for one process.

- ``python -m framework.caffe2 script.py [args]`` (or ``framework exec script.py [args]``) runs a
  Caffe2 script with the hook installed; ``framework.caffe2.install()`` installs it in a notebook.
- ``caffe2.python.X`` is ``framework.caffe2.python.X`` when that package holds ``X`` (the home of
  Caffe2's Python API: docs/architecture.md), else ``framework.X`` (``caffe2.python.a.b`` is then
  ``framework.a.b``), so modules added later are found without touching this hook;
  ``caffe2.proto.X`` is ``framework.proto.X``. ``_ALIASES`` lists the few names that live elsewhere.
- The alias is the framework's own module object (``caffe2.python.core is framework.core``), so
  state such as the current workspace is shared whichever name the code imports.
- No top-level ``caffe2`` package is installed: without ``install()`` ``import caffe2`` fails.
  If a real Caffe2 is importable, the hook still wins while installed (``uninstall()`` undoes it).
- ``install(legacy=True)`` (or ``FRAMEWORK_CAFFE2_LEGACY=1``) also puts back APIs that numpy, hypothesis,
  scipy and Python removed since Caffe2's scripts were written (``np.float``, ``settings(timeout=)``...;
  ``framework.caffe2.legacy`` lists every patch). Off by default: plain ``install()`` patches nothing.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

# Caffe2 names whose framework module is not framework.<same dotted name>.
_ALIASES = {
    "caffe2.python._import_c_extension": "framework.caffe2.c_extension",
    "caffe2.python.caffe2_pybind11_state": "framework.caffe2.c_extension",
}
# Synthetic packages (no framework module of their own).
_PACKAGES = ("caffe2", "caffe2.python", "caffe2.proto")


def target_of(name: str) -> str | None:
    """The framework module that stands for the Caffe2 module ``name`` (None: not a Caffe2 name
    this hook handles, or one of the synthetic packages)."""
    if name in _ALIASES:
        return _ALIASES[name]
    if name.startswith("caffe2.python."):
        rest = name[len("caffe2.python.") :]
        return ("framework.caffe2.python." if _in_api_package(rest.split(".", 1)[0]) else "framework.") + rest
    if name.startswith("caffe2.proto."):
        return "framework.proto." + name[len("caffe2.proto.") :]
    return None


def _in_api_package(top: str) -> bool:
    """Whether framework/caffe2/python/ holds the module or package ``top`` (found without importing it)."""
    import framework.caffe2.python as api

    return importlib.machinery.PathFinder.find_spec(top, list(api.__path__)) is not None


class _AliasLoader(importlib.abc.Loader):
    """Hands out the framework's module itself under the Caffe2 name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target)
        self._own_spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system set the alias spec on the shared module; give it back its own
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


class _PackageLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        module.__doc__ = f"{module.__name__}: provided by framework.caffe2 (this framework's modules)"


class Caffe2Finder(importlib.abc.MetaPathFinder):
    """Resolves ``caffe2`` names to framework modules (see the module doc)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in _PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, _PackageLoader(), is_package=True)
        real = target_of(fullname)
        if real is None:
            return None
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: framework.caffe2 maps it to {real!r}, which this framework "
                "does not provide",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(real), is_package=found.submodule_search_locations is not None
        )


_FINDER = Caffe2Finder()


def installed() -> bool:
    return _FINDER in sys.meta_path


LEGACY_ENV = "FRAMEWORK_CAFFE2_LEGACY"


def install(legacy: bool | None = None) -> None:
    """Make ``import caffe2.python.X`` / ``caffe2.proto.X`` resolve to this framework (idempotent).

    ``legacy=True`` also restores the removed numpy/hypothesis/scipy/Python APIs that old Caffe2 scripts
    use (``framework.caffe2.legacy``); ``None`` asks the environment (``FRAMEWORK_CAFFE2_LEGACY=1``).
    Without either, nothing outside the hook is changed."""
    if not installed():
        sys.meta_path.insert(0, _FINDER)
    if legacy is None:
        legacy = os.environ.get(LEGACY_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    if legacy:
        from framework.caffe2 import legacy as legacy_mode

        legacy_mode.enable()


def uninstall() -> None:
    """Remove the hook and forget the ``caffe2`` names it created (framework modules stay); legacy
    patches, if any, are undone."""
    if installed():
        sys.meta_path.remove(_FINDER)
    legacy_mode = sys.modules.get("framework.caffe2.legacy")
    if legacy_mode is not None:
        legacy_mode.disable()
    for name in [n for n in sys.modules if n == "caffe2" or n.startswith("caffe2.")]:
        del sys.modules[name]


__all__ = ["LEGACY_ENV", "Caffe2Finder", "install", "installed", "target_of", "uninstall"]
