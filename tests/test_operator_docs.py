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


def _coverage_generator():
    spec = importlib.util.spec_from_file_location("generate_coverage", ROOT / "docs" / "generate_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_coverage_page_is_up_to_date():
    gen = _coverage_generator()
    path = ROOT / "docs" / "caffe2_coverage.md"
    assert path.exists(), f"docs/caffe2_coverage.md is missing; run `{gen.COMMAND}`"
    assert path.read_text(encoding="utf-8") == gen.render(), f"docs/caffe2_coverage.md is stale; run `{gen.COMMAND}`"


def test_coverage_counts_registered_caffe2_ops():
    from framework.ops import has_op

    gen = _coverage_generator()
    caffe2 = gen.caffe2_op_types()
    assert len(caffe2) > 590 and caffe2["FC"] == "nn" and caffe2["SparseLengthsSum"] == "sparse"
    text = gen.render()
    have = sum(1 for t in caffe2 if has_op(t))
    assert f"**{have} of {len(caffe2)}**" in text
    assert "## sparse" in text and "`FC`" in text.split("## nn", 1)[1].split("## ", 1)[0]


def test_ops_live_in_family_packages():
    """Every op class lives in a family package of framework/ops named in Caffe2's list (or onnx)."""
    from framework.ops import all_schemas

    families = set(_coverage_generator().caffe2_op_types().values()) | {"onnx"}
    for s in all_schemas():
        if s.type.startswith("_"):
            continue
        parts = s.operator_class.__module__.split(".")
        assert parts[:2] == ["framework", "ops"] and len(parts) == 4, f"{s.type}: {s.operator_class.__module__}"
        assert parts[2] in families, f"{s.type} is in framework/ops/{parts[2]}/, not a family package"
