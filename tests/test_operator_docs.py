"""docs/operators.md must match what docs/generate_operators.py produces from the schemas."""

import difflib
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("generate_operators", ROOT / "docs" / "generate_operators.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_operator_catalogue_is_up_to_date():
    gen = _generator()
    expected = gen.render()
    path = ROOT / "docs" / "operators.md"
    assert path.exists(), f"docs/operators.md is missing; run `{gen.COMMAND}`"
    current = path.read_text(encoding="utf-8")
    if current != expected:
        diff = "".join(
            list(difflib.unified_diff(current.splitlines(True), expected.splitlines(True), "on disk", "generated"))[:40]
        )
        raise AssertionError(f"docs/operators.md is stale; run `{gen.COMMAND}` and commit it.\n{diff}")


def test_catalogue_lists_every_public_op_with_its_arguments():
    from framework.ops import all_schemas

    text = _generator().render()
    for s in all_schemas():
        if s.type.startswith("_"):  # test-only registrations
            continue
        assert f"`{s.type}`" in text, f"{s.type} is missing from the catalogue"
    assert "### `Add`" in text and "| `broadcast` | int | 0 |" in text
    assert "## Gradient and internal operators" in text and "### `AddGradient`" in text
