"""Generate docs/operators.md, the operator catalogue, from the registered schemas.

Usage (from the repository root):

    python docs/generate_operators.py           # rewrite docs/operators.md
    python docs/generate_operators.py --check   # exit 1 if docs/operators.md is stale

The catalogue is never edited by hand: change an op's schema or doc string and
run this script. ``tests/test_operator_docs.py`` fails when the file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "operators.md"
COMMAND = "python docs/generate_operators.py"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _default(arg: Any) -> str:
    from framework.ops.schema import REQUIRED

    d = arg.default
    if d is REQUIRED:
        return "**required**"
    if d is None:
        return "(none)"
    if isinstance(d, bool):
        return str(int(d))
    if isinstance(d, (list, tuple)):
        return "[" + ", ".join(repr(x) for x in d) + "]"
    if isinstance(d, str):
        return f'"{d}"'
    return repr(d)


def _pairs(rule: Any) -> str:
    if rule == "all":
        return "any input i with output i"
    if callable(rule):
        return (rule.__doc__ or "a custom rule").strip()
    return ", ".join(f"{i}->{o}" for i, o in sorted(rule))


def _gradient(schema: Any) -> str:
    from framework.ops.gradient import GRADIENT_NOT_IMPLEMENTED, NO_GRADIENT, SHOULD_NOT_DO_GRADIENT

    g = schema.gradient
    for marker, text in (
        (None, "not declared"),
        (NO_GRADIENT, "none (not differentiable; produces no gradient)"),
        (SHOULD_NOT_DO_GRADIENT, "must not be asked for (an error if a gradient reaches it)"),
        (GRADIENT_NOT_IMPLEMENTED, "not implemented yet"),
    ):
        if g is marker:
            return text
    return f"yes (maker `{g.__module__}.{g.__name__}`)"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _op_section(s: Any) -> list[str]:
    out = [f"### `{s.type}`", "", f"*{s.category}*", ""]
    if s.doc:
        out += [s.doc.strip(), ""]
    sides = (("Inputs", s.input_count_text(), s.inputs), ("Outputs", s.output_count_text(), s.outputs))
    for title, count, docs in sides:
        out.append(f"- **{title}** ({count}):" + ("" if docs else " —"))
        out += [f"  - `{n}`: {_cell(d)}" for n, d in docs]
    for word, rule in (("allowed", s.allow_inplace), ("enforced", s.enforce_inplace)):
        if rule:
            out.append(f"- **In-place {word}** (input->output): {_pairs(rule)}")
    if not s.private:
        out.append(f"- **Gradient**: {_gradient(s)}")
    if s.aliases:
        out.append("- **Aliases**: " + ", ".join(f"`{a}`" for a in s.aliases))
    if s.args:
        out += ["", "| argument | kind | default | description |", "|---|---|---|---|"]
        for a in s.args.values():
            out.append(f"| `{a.name}` | {a.kind} | {_cell(_default(a))} | {_cell(a.doc)} |")
    out.append("")
    return out


def family_of(schema: Any) -> str:
    """The op family of a schema: the ``framework.ops`` package its class lives in."""
    parts = schema.operator_class.__module__.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["framework", "ops"] else "other"


def render() -> str:
    """The full text of docs/operators.md for the ops registered now, grouped by family."""
    from framework.ops import all_schemas

    # Types starting with '_' are test-only registrations (tests/net/conftest.py), not part of the catalogue.
    schemas = [s for s in all_schemas() if not s.type.startswith("_")]
    alias_names = {a for s in schemas for a in s.aliases}
    schemas = [s for s in schemas if s.type not in alias_names]  # aliases are listed with their op
    public = [s for s in schemas if not s.private]
    private = [s for s in schemas if s.private]
    families = sorted({family_of(s) for s in public})

    def in_family(f: str) -> list[Any]:
        return sorted((s for s in public if family_of(s) == f), key=lambda s: (s.category, s.type))

    lines = [
        "# Operator catalogue",
        "",
        f"Generated from the registered schemas by `{COMMAND}`; do not edit by hand.",
        "",
        f"{len(public)} operators in {len(families)} families (the packages of `framework/ops/`), "
        f"{len(private)} gradient and internal operators. `docs/caffe2_coverage.md` compares them with Caffe2's.",
        "",
        "## Contents",
        "",
    ]
    for f in families:
        lines.append(f"- **{f}** (`framework/ops/{f}/`): " + ", ".join(f"`{s.type}`" for s in in_family(f)))
    lines.append(f"- **gradient and internal operators**: {len(private)} ops")
    lines.append("")
    for f in families:
        lines += [f"## {f}", ""]
        for s in in_family(f):
            lines += _op_section(s)
    lines += [
        "## Gradient and internal operators",
        "",
        "Private ops that gradient makers emit; listed for completeness.",
        "",
    ]
    for s in private:
        lines += _op_section(s)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is stale; run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
