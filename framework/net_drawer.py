"""Graphviz drawings of nets (Caffe2's net_drawer): ops as boxes, blobs as ellipses."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from framework.errors import FrameworkError


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(net_def: Any, rankdir: str = "TB", max_label: int = 40) -> str:
    """DOT source of ``net_def``: blob -> op -> blob edges, control inputs dashed.

    >>> from framework.core import CreateOperator
    >>> from framework.proto.framework_pb2 import NetDef
    >>> print(to_dot(NetDef(name="n", op=[CreateOperator("Relu", ["x"], ["y"])])).splitlines()[0])
    digraph "n" {
    """
    lines = [f"digraph {_quote(net_def.name or 'net')} {{", f"  rankdir={rankdir};", "  node [fontsize=10];"]
    blobs: dict[str, str] = {}

    def blob_node(name: str) -> str:
        if name not in blobs:
            blobs[name] = f"b{len(blobs)}"
            lines.append(f"  {blobs[name]} [label={_quote(name[:max_label])}, shape=ellipse, color=gray40];")
        return blobs[name]

    for i, op in enumerate(net_def.op):
        label = op.type + (f"\\n{op.name[:max_label]}" if op.name else "")
        lines.append(f'  op{i} [label="{label}", shape=box, style=filled, fillcolor="#dde8f7"];')
        for name in op.input:
            lines.append(f"  {blob_node(name)} -> op{i};")
        for name in op.output:
            lines.append(f"  op{i} -> {blob_node(name)};")
        for name in op.control_input:
            lines.append(f"  {blob_node(name)} -> op{i} [style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_source: str, out_path: str, fmt: str) -> None:
    """Render DOT to ``fmt`` (svg, png, pdf) with graphviz's ``dot``; clear error if it is missing."""
    exe = shutil.which("dot")
    if exe is None:
        raise FrameworkError(
            f"cannot write {out_path}: graphviz's `dot` program is not installed. "
            "Install graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz), "
            "or write .dot output instead"
        )
    proc = subprocess.run([exe, f"-T{fmt}", "-o", out_path], input=dot_source.encode(), capture_output=True)
    if proc.returncode != 0:
        raise FrameworkError(f"graphviz failed to render {out_path}: {proc.stderr.decode(errors='replace').strip()}")
