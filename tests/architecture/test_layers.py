"""The tree's layers (docs/architecture.md), read from the code's own imports: the top level of
``framework/`` holds only packages and the entry modules, and every import points down the layers."""

from __future__ import annotations

import ast
from pathlib import Path

import framework

ROOT = Path(framework.__file__).parent

# docs/architecture.md, bottom to top; a module may import its own layer and the layers below it.
LAYERS = [
    ("errors", "proto"),
    ("memory", "runtime"),
    ("db", "checkpoint"),
    ("kernels",),
    ("ops",),
    ("net",),
    ("onnx", "distributed", "predictor"),
    ("caffe2", "core", "workspace"),
    ("cli",),
    ("__init__", "__main__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
TOP_LEVEL_FILES = {"__init__.py", "__main__.py", "errors.py", "core.py", "workspace.py", "checkpoint.py", "py.typed"}

# Imports that still point up, each with the reason it is still there. The test fails when one is gone
# (remove it from this list) as well as when a new one appears.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "framework":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(path: Path) -> bool:
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            if node.module == "framework":  # submodules only; other names are the package's own attributes
                yield from ("framework." + a.name for a in node.names if _is_module(ROOT / a.name))


def upward_imports() -> set[tuple[str, str]]:
    found = set()
    for path in ROOT.rglob("*.py"):
        if path.name.endswith("_pb2.py"):
            continue
        src = _module_name(path)
        for target in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            a, b = _layer(src), _layer(target)
            if b is None or target == "framework":
                continue
            assert a in RANK, f"{path}: layer '{a}' is not in docs/architecture.md's list"
            assert b in RANK, f"{src} imports {target}: layer '{b}' is not in docs/architecture.md's list"
            if RANK[b] > RANK[a]:
                found.add((src, target))
    return found


def test_top_level_holds_only_packages_and_entry_modules():
    files = {p.name for p in ROOT.iterdir() if p.is_file()}
    assert files <= TOP_LEVEL_FILES, f"modules at framework/'s top level: {sorted(files - TOP_LEVEL_FILES)}"
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages <= set(RANK), f"packages without a layer: {sorted(packages - set(RANK))}"


def test_imports_point_down_the_layers():
    found = upward_imports()
    new = sorted(found - set(KNOWN_UPWARD))
    assert not new, "imports that point up the layers (docs/architecture.md):\n" + "\n".join(
        f"{a} -> {b}" for a, b in new
    )
    gone = sorted(set(KNOWN_UPWARD) - found)
    assert not gone, f"no longer imported upward, remove from KNOWN_UPWARD: {gone}"


def test_entry_modules_are_the_api_modules():
    import framework.caffe2.python.core
    import framework.caffe2.python.workspace
    import framework.checkpoint
    import framework.core
    import framework.db.checkpoint
    import framework.workspace

    assert framework.core is framework.caffe2.python.core
    assert framework.workspace is framework.caffe2.python.workspace
    assert framework.checkpoint is framework.db.checkpoint
