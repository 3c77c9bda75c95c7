"""``framework ops``: the operator catalogue, from the schemas."""

from __future__ import annotations

import argparse
from collections import defaultdict

from framework.ops.registry import all_schemas, get_schema
from framework.ops.schema import OpSchema


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ops", help="list operators, or describe one", description=__doc__)
    p.add_argument("type", nargs="?", help="an op type (e.g. FC) to describe in full")
    p.add_argument("--all", action="store_true", help="include gradient ops")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.type:
        print(describe(get_schema(args.type)))
        return 0
    groups: dict[str, list[OpSchema]] = defaultdict(list)
    for s in all_schemas():
        if args.all or not s.private:
            groups[s.category].append(s)
    for category in sorted(groups):
        print(f"{category}:")
        for s in groups[category]:
            first = s.doc.strip().splitlines()[0] if s.doc.strip() else ""
            print(f"  {s.type:<28} {first}")
    print("\n`framework ops TYPE` describes one operator.")
    return 0


def describe(s: OpSchema) -> str:
    """A plain-text page for one op: doc, inputs, outputs, arguments, in-place, gradient."""
    from framework.ops.gradient import NO_GRADIENT, SHOULD_NOT_DO_GRADIENT

    lines = [f"{s.type}  ({s.category})", "", s.doc.strip() or "(no documentation)", ""]
    lines.append(f"inputs ({s.input_count_text()}):")
    lines += [f"  {n}: {d}" for n, d in s.inputs] or ["  (none documented)"]
    lines.append(f"outputs ({s.output_count_text()}):")
    lines += [f"  {n}: {d}" for n, d in s.outputs] or ["  (none documented)"]
    lines.append("arguments:")
    for a in s.args.values():
        default = "required" if a.required else f"default {a.default!r}"
        lines.append(f"  {a.name} ({a.kind}, {default}): {a.doc}")
    if not s.args:
        lines.append("  (none)")
    g = s.gradient
    grad = (
        "none"
        if g is NO_GRADIENT
        else "must not be asked for"
        if g is SHOULD_NOT_DO_GRADIENT
        else "yes"
        if g
        else "not declared"
    )
    lines.append(f"gradient: {grad}")
    if s.aliases:
        lines.append(f"aliases: {', '.join(s.aliases)}")
    return "\n".join(lines)
