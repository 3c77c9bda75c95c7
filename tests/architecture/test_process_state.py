"""Every module-level mutable holder in ``framework/`` is listed here with its kind.

A holder is a module-level name bound to a dict / list / set (literal, comprehension or constructor call,
``defaultdict``, ``OrderedDict``, ``deque``, weak dictionaries and sets, ``threading.local()``) that the module
itself mutates (a method like ``append``/``add``/``update``, an item or attribute assignment), and any
module-level name a function rebinds (``global``), and any module-level function memoized by
``functools.lru_cache`` / ``functools.cache``.
The kinds (see "Process state" in ``docs/architecture.md``):

- ``registry``: filled when its module loads (or its family loads), read-only after;
- ``caffe2-global``: state Caffe2's own Python API keeps for the process (its API says so);
- ``thread``: per-thread state of a call in progress (a recording, a nesting depth, a scope stack);
- ``memo``: a pure memo no reset would change (its values depend only on its keys and the installed libraries):
  ``errors``' mixed exception classes (below ``RUNTIME``'s layer), the installed onnxruntime's newest opset;
- ``lazy-import``: a handle on an optional module imported on first use (``sys.modules`` owns the module).

Every other cache or setting is made by ``RUNTIME.held`` (``framework/runtime/state.py``), which this scan
does not count as a holder, so ``RUNTIME.reset()`` clears it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "framework"

_CONTAINERS = {
    "dict",
    "list",
    "set",
    "defaultdict",
    "OrderedDict",
    "deque",
    "Counter",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "WeakSet",
    "local",
}
_MUTATORS = {
    "append",
    "appendleft",
    "extend",
    "insert",
    "pop",
    "popitem",
    "clear",
    "update",
    "setdefault",
    "add",
    "discard",
    "remove",
    "move_to_end",
}

# path (under framework/) -> {name: kind}
ALLOWED: dict[str, dict[str, str]] = {
    # registries
    "memory/typemeta.py": dict.fromkeys(["_BY_DTYPE", "_BY_PROTO", "_BY_NAME", "_BY_PYTYPE"], "registry"),
    "memory/serialize.py": dict.fromkeys(["_SERIALIZERS", "_DESERIALIZERS", "_TYPE_LOADERS"], "registry"),
    "db/base.py": {"_REGISTRY": "registry"},
    "ops/registry.py": {"_SCHEMAS": "registry", "_ENGINE_TYPES": "registry"},
    # the families loaded so far, and whether the family index is being generated: the registry's bookkeeping
    "ops/families.py": {"_complete": "registry", "_generating": "registry"},
    "ops/onnx/linear_regex.py": {"_REFUSED": "registry"},
    "net/base.py": {"NET_TYPES": "registry"},
    "onnx/context.py": {"CONVERTERS": "registry"},
    "onnx/importer.py": {"TRANSLATORS": "registry"},
    "onnx/import_math.py": {"_REDUCE": "registry"},
    "caffe2/python/brew.py": {"_HELPERS": "registry", "_SCOPES": "caffe2-global"},
    "caffe2/python/layers/layers.py": {"_LAYER_REGISTRY": "registry"},
    # Caffe2's own process-wide state
    "caffe2/legacy.py": {"_SAVED": "caffe2-global", "_MADE_MODULES": "caffe2-global"},
    "caffe2/python/workspace.py": dict.fromkeys(
        ["_workspaces", "_current", "_immediate", "_immediate_root_folder"], "caffe2-global"
    ),
    "caffe2/python/core.py": {"_GLOBAL_INIT_ARGS": "caffe2-global", "_ENGINE_PREF": "caffe2-global"},
    "caffe2/python/builder/net_builder.py": {"_net_names": "caffe2-global"},
    "caffe2/python/control.py": {"_used_step_names": "caffe2-global", "_current_idx": "caffe2-global"},
    "caffe2/python/lazy.py": {"_import_lazy_calls": "caffe2-global"},
    "caffe2/python/lazy_dyndep.py": {"_LAZY_IMPORTED_DYNDEPS": "caffe2-global", "_error_handler": "caffe2-global"},
    "caffe2/python/optimizers/base.py": {"optimizer_instance_count": "caffe2-global"},
    "caffe2/python/serialized_test/serialized_test_util.py": {"_output_context": "caffe2-global"},
    "ops/tensor/python_op.py": {"_FUNCTIONS": "caffe2-global"},
    "ops/training/stats.py": {"_DEFAULT": "caffe2-global"},
    # per-thread state of a call in progress
    "caffe2/python/net_builder.py": {"_local": "thread"},
    "caffe2/python/optimizer_context.py": {"_local": "thread"},
    "caffe2/python/scope.py": {"_local": "thread"},
    "kernels/conv_nchw.py": {"_REGISTRY": "thread"},
    "kernels/window_jit.py": {"_RECORD": "thread", "_kernels": "lazy-import"},
    "kernels/winograd.py": {"_kernels": "lazy-import"},
    "kernels/activation_jit.py": {"_k": "lazy-import"},
    "kernels/bn_train.py": {"_kernels": "lazy-import"},
    "kernels/conv_grad_filter.py": {"_kernels": "lazy-import"},
    "kernels/native_pool.py": {"_kernels": "lazy-import"},
    "kernels/native_gemm.py": {"_kernels": "lazy-import", "_blas": "memo"},
    "kernels/recurrent.py": {"_cells": "lazy-import"},
    "ops/distributed/world.py": {"_MPI": "lazy-import"},
    "ops/subnet.py": {"_DEPTH": "thread"},
    "runtime/cancel.py": {"_local": "thread"},
    "runtime/parallel.py": {"_local": "thread"},
    # below RUNTIME's layer
    "errors.py": {"_MIXED": "memo"},
    "onnx/ort_opset.py": {"ort_max_opset": "memo"},
}
KINDS = {"registry", "caffe2-global", "thread", "memo", "lazy-import"}


def _is_container(value: ast.AST) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        return name in _CONTAINERS
    return False


def _module_statements(body: list[ast.stmt]):
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for part in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(node, part, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_statements(handler.body)


def holders(source: str) -> set[str]:
    """The module-level mutable holders of one module's source (see the module doc)."""
    tree = ast.parse(source)
    names, rebound = set(), set()
    for node in _module_statements(tree.body):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if _is_container(value):
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    mutated = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in names and node.func.attr in _MUTATORS:
                mutated.add(owner.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete, ast.AnnAssign)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name):
                    if t.value.id in names:
                        mutated.add(t.value.id)
        elif isinstance(node, ast.Global):
            rebound.update(node.names)
    memoized = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any(_is_memo(d) for d in node.decorator_list)
    }
    return (names & mutated) | rebound | memoized


def _is_memo(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return name in ("lru_cache", "cache")


def _inventory() -> dict[str, set[str]]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        names = holders(path.read_text(encoding="utf-8"))
        if names:
            found[path.relative_to(ROOT).as_posix()] = names
    return found


def test_every_module_level_holder_is_listed_with_its_kind():
    found = _inventory()
    new = sorted(
        f"framework/{path}: {name}" for path, names in found.items() for name in names - ALLOWED.get(path, {}).keys()
    )
    assert not new, (
        "new module-level mutable state: " + ", ".join(new) + ". A cache or setting goes on the runtime object: "
        "`X = RUNTIME.held('<module>.<what>', dict)` (framework/runtime/state.py; RUNTIME.reset() clears it). "
        "A registry filled at import, Caffe2's own global state or per-thread state goes in ALLOWED here with its kind "
        "(see 'Process state' in docs/architecture.md)."
    )
    stale = sorted(
        f"{path}: {name}" for path, names in ALLOWED.items() for name in names if name not in found.get(path, ())
    )
    assert not stale, "listed but no longer a module-level holder (remove from ALLOWED): " + ", ".join(stale)
    assert {kind for names in ALLOWED.values() for kind in names.values()} <= KINDS


@pytest.mark.parametrize(
    "source, expected",
    [
        ("_C = {}\ndef f(k):\n    _C[k] = 1\n", {"_C"}),
        ("_C: list = []\ndef f():\n    _C.append(1)\n", {"_C"}),
        ("import threading\n_L = threading.local()\ndef f():\n    _L.depth = 1\n", {"_L"}),
        ("from collections import OrderedDict\n_C = OrderedDict()\ndef f(k):\n    _C.move_to_end(k)\n", {"_C"}),
        ("_N = 0\ndef f():\n    global _N\n    _N = 1\n", {"_N"}),  # a value rebound
        ("try:\n    _T = set()\nexcept ImportError:\n    pass\n_T.add(1)\n", {"_T"}),
        ("_TABLE = {'a': 1}\ndef f(k):\n    return _TABLE[k]\n", set()),  # read-only: a constant
        ("_C = RUNTIME.held('x', dict)\ndef f(k):\n    _C[k] = 1\n", set()),  # the runtime's holder
        ("def f():\n    c = {}\n    c[1] = 2\n", set()),  # not module level
        ("import functools\n@functools.lru_cache(maxsize=2)\ndef f(k):\n    return k\n", {"f"}),
        ("from functools import cache\n@cache\ndef f(k):\n    return k\n", {"f"}),
    ],
)
def test_the_scan_finds_what_it_says(source, expected):
    assert holders(source) == expected


def test_reset_refills_every_runtime_holder_in_place():
    probe = (
        "from framework.runtime.state import RUNTIME\n"
        "from framework.memory import allocator\n"
        "from framework.ops import arguments\n"
        "from framework.kernels import kernel_support, window_jit\n"
        "from framework.cli import common\n"
        "from framework.memory import serialize\n"
        "limit = allocator.allocation_limit(); warned = arguments._warned; default = allocator.get_cpu_allocator()\n"
        "allocator.set_allocation_limit(7); warned.add(('Op', 'arg')); kernel_support._DISABLED['x'] = 'why'\n"
        "window_jit._COMPILE['seconds'] = 3.0; common.set_write_policy('/r', ['/w'])\n"
        "serialize.set_default_chunk_size(4)\n"
        "RUNTIME.reset()\n"
        "print(allocator.allocation_limit() == limit, arguments._warned is warned, len(warned),\n"
        "      kernel_support._DISABLED, window_jit._COMPILE, common._WRITE_POLICY,\n"
        "      type(allocator.get_cpu_allocator()) is type(default),\n"
        "      'memory.allocation_limit' in RUNTIME.held_names(),\n"
        "      serialize.record_keys('x', __import__('numpy').zeros(5)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "True",
        "True",
        "0",
        "{}",
        "{'seconds':",
        "0.0}",
        "[None,",
        "()]",
        "True",
        "True",
        "['x#%0']",
    ]


def test_held_returns_one_holder_per_name_and_refuses_what_it_cannot_refill():
    from framework.runtime.state import Runtime

    rt = Runtime()
    first = rt.held("t.cache", dict)
    assert rt.held("t.cache", dict) is first
    first["k"] = 1
    setting = rt.held("t.setting", lambda: [5])
    setting[0] = 9
    rt.reset()
    assert first == {} and rt.held("t.cache", dict) is first and setting == [5]
    with pytest.raises(TypeError, match="t.bad"):
        rt.held("t.bad", object)


def test_a_settings_object_gets_its_defaults_back():
    from framework.memory.tensor import OPTIONS, TensorOptions
    from framework.runtime.state import RUNTIME, Runtime

    rt = Runtime()
    options = rt.held("t.options", TensorOptions)
    options.keep_on_shrink, options.max_keep_on_shrink_bytes = False, 10
    rt.reset()
    assert rt.held("t.options", TensorOptions) is options
    assert (options.keep_on_shrink, options.max_keep_on_shrink_bytes) == (True, None)
    assert RUNTIME.held("memory.tensor_options", TensorOptions) is OPTIONS  # the tensors' policy is RUNTIME's


def test_each_runtime_holder_name_is_made_in_one_place():
    """``RUNTIME.held`` returns the same holder for the same name: two modules must not share one by accident."""
    places: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "held"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "RUNTIME"
            ):
                name = node.args[0]
                assert isinstance(name, ast.Constant), f"{path}:{node.lineno}: name a RUNTIME holder with a literal"
                places.setdefault(name.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    shared = {name: where for name, where in places.items() if len(where) > 1}
    assert not shared, f"RUNTIME holder names made in more than one place: {shared}"
    assert len(places) >= 15  # the caches and settings moved onto RUNTIME
