"""Meta-test: every registered op is documented, has shape inference, a declared gradient,
and tests (a gradient check for every op with a gradient maker).

The test scan is heuristic: an op counts as tested when some file under tests/
holds its type as a string literal ("Add" or 'Add'); its gradient counts as
checked when such a file also calls assert_gradient_checks / assertGradientChecks.
A private gradient op ``<Op>Gradient`` counts as tested when ``<Op>``'s gradient (or that of the
op ``<Op>`` is an alias of) is checked.
"""

from __future__ import annotations

import re
from pathlib import Path

from framework.ops import all_schemas
from framework.ops.gradient import NO_GRADIENT, SHOULD_NOT_DO_GRADIENT

TESTS = Path(__file__).resolve().parents[1]
_LITERAL = re.compile(r"""["']([A-Za-z_][A-Za-z0-9_]*)["']""")
_GRAD_CALL = ("assert_gradient_checks", "assertGradientChecks")


def _scan() -> tuple[set[str], set[str]]:
    """(names quoted anywhere under tests/, names quoted in files that run gradient checks)."""
    mentioned: set[str] = set()
    grad_checked: set[str] = set()
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        names = set(_LITERAL.findall(text))
        mentioned |= names
        if any(call in text for call in _GRAD_CALL):
            grad_checked |= names
    return mentioned, grad_checked


def _report(title: str, bad: list[str]) -> str:
    return f"{title} ({len(bad)}):\n" + "\n".join(f"  - {b}" for b in sorted(bad))


def _alias_of() -> dict[str, str]:
    return {alias: s.type for s in all_schemas() for alias in s.aliases}


def test_every_op_has_a_doc_and_shape_inference():
    no_doc = [s.type for s in all_schemas() if not s.doc.strip()]
    no_infer = [s.type for s in all_schemas() if s.infer is None]
    problems = []
    if no_doc:
        problems.append(_report("ops without a doc string (give the class a docstring or doc=)", no_doc))
    if no_infer:
        problems.append(_report("ops without shape inference (pass infer= to register_op)", no_infer))
    assert not problems, "\n".join(problems)


def test_every_public_op_declares_its_gradient():
    bad = [
        f"{s.type} (gradient slot: {s.gradient!r})"
        for s in all_schemas()
        if not s.private and not (callable(s.gradient) or s.gradient in (NO_GRADIENT, SHOULD_NOT_DO_GRADIENT))
    ]
    assert not bad, _report(
        "public ops whose gradient slot is empty (use @gradient, no_gradient or should_not_do_gradient)", bad
    )


def test_every_op_is_mentioned_in_a_test():
    mentioned, grad_checked = _scan()
    aliases = _alias_of()
    bad = []
    for s in all_schemas():
        names = {s.type, aliases.get(s.type, s.type)}
        if names & mentioned:
            continue
        base = s.type[: -len("Gradient")] if s.type.endswith("Gradient") else None
        if s.private and base and {base, aliases.get(base, base)} & grad_checked:
            continue  # exercised by the forward op's gradient check (aliases share the implementation)
        bad.append(s.type)
    assert not bad, _report('ops that no file under tests/ names as a string literal (e.g. "Add")', bad)


def test_every_differentiable_op_has_a_gradient_check():
    _, grad_checked = _scan()
    aliases = _alias_of()
    bad = [
        s.type
        for s in all_schemas()
        if callable(s.gradient) and not ({s.type, aliases.get(s.type, s.type)} & grad_checked)
    ]
    assert not bad, _report(
        "ops with a gradient maker but no test file that names them and calls assert_gradient_checks", bad
    )
