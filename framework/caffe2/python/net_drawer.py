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
    lines.append("  compound=true;")
    counter = [0]
    _emit(net_def, lines, "", counter, max_label, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _nested(op: Any) -> list:
    out = []
    for a in op.arg:
        if a.HasField("n"):
            out.append((a.name, a.n))
        for k, n in enumerate(a.nets):
            out.append((f"{a.name}[{k}]", n))
    return out


def _emit(net_def: Any, lines: list, prefix: str, counter: list, max_label: int, indent: str) -> list[str]:
    """Nodes and edges of ``net_def`` (ids prefixed by ``prefix``); nested nets become clusters."""
    blobs: dict[str, str] = {}
    op_ids: list[str] = []

    def blob_node(name: str) -> str:
        if name not in blobs:
            blobs[name] = f"{prefix}b{len(blobs)}"
            lines.append(f"{indent}{blobs[name]} [label={_quote(name[:max_label])}, shape=ellipse, color=gray40];")
        return blobs[name]

    for i, op in enumerate(net_def.op):
        label = op.type + (f"\\n{op.name[:max_label]}" if op.name else "")
        node = f"{prefix}op{i}"
        op_ids.append(node)
        lines.append(f'{indent}{node} [label="{label}", shape=box, style=filled, fillcolor="#dde8f7"];')
        for name in op.input:
            lines.append(f"{indent}{blob_node(name)} -> {node};")
        for name in op.output:
            lines.append(f"{indent}{node} -> {blob_node(name)};")
        for name in op.control_input:
            lines.append(f"{indent}{blob_node(name)} -> {node} [style=dashed];")
        for label_arg, sub in _nested(op):
            counter[0] += 1
            cid = f"cluster_{counter[0]}"
            lines.append(f"{indent}subgraph {cid} {{")
            lines.append(
                f"{indent}  label={_quote(f'{op.type} / {label_arg}' + (f' ({sub.name})' if sub.name else ''))};"
            )
            lines.append(f'{indent}  style=rounded; color="#7a8fb0";')
            inner = _emit(sub, lines, f"{prefix}c{counter[0]}_", counter, max_label, indent + "  ")
            if not inner:
                lines.append(f'{indent}  {prefix}c{counter[0]}_empty [label="(empty)", shape=plaintext];')
                inner = [f"{prefix}c{counter[0]}_empty"]
            lines.append(f"{indent}}}")
            lines.append(f"{indent}{node} -> {inner[0]} [style=dotted, lhead={cid}];")
    return op_ids


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


# -- Caffe2's net_drawer API ---------------------------------------------------------------------
def _as_net_def(operators_or_net: Any, name: str | None) -> Any:
    from framework.proto.framework_pb2 import NetDef

    if hasattr(operators_or_net, "Proto"):
        operators_or_net = operators_or_net.Proto()
    if isinstance(operators_or_net, NetDef):
        net = NetDef()
        net.CopyFrom(operators_or_net)
        if name:
            net.name = name
        return net
    return NetDef(name=name or "graph", op=list(operators_or_net))


def _minimal_dot(net_def: Any, rankdir: str, minimal_dependency: bool) -> str:
    """DOT of the ops only: an edge from the op that writes a blob to each op that reads it."""
    import networkx as nx

    g = nx.DiGraph()
    last_writer: dict[str, int] = {}
    for i, op in enumerate(net_def.op):
        g.add_node(i)
        for b in list(op.input) + list(op.control_input):
            if b in last_writer:
                g.add_edge(last_writer[b], i)
        for b in op.output:
            last_writer[b] = i
    if minimal_dependency and nx.is_directed_acyclic_graph(g):
        g = nx.transitive_reduction(g)
    lines = [f"digraph {_quote(net_def.name or 'net')} {{", f"  rankdir={rankdir};", "  node [fontsize=10];"]
    for i, op in enumerate(net_def.op):
        label = op.type + (f"\\n{op.name}" if op.name else "")
        lines.append(f'  op{i} [label="{label}", shape=box, style=filled, fillcolor="#dde8f7"];')
    lines += [f"  op{a} -> op{b};" for a, b in sorted(g.edges())]
    lines.append("}")
    return "\n".join(lines) + "\n"


class DotGraph:
    """What GetPydotGraph returns when pydot is not installed: the DOT source with the pydot
    methods tutorials call (``to_string``, ``create_png``/``create_svg``/``create``, ``write*``);
    rendering uses graphviz's ``dot`` (a clear error when it is missing)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def to_string(self) -> str:
        return self.source

    def create(self, prog: str | None = None, format: str = "png") -> bytes:
        if format in ("raw", "dot"):
            return self.source.encode()
        exe = shutil.which(prog or "dot")
        if exe is None:
            raise FrameworkError(
                "rendering a net graph needs graphviz's `dot` program (Debian/Ubuntu: apt-get install graphviz); "
                "to_string() gives the DOT source without it"
            )
        proc = subprocess.run([exe, f"-T{format}"], input=self.source.encode(), capture_output=True)
        if proc.returncode != 0:
            raise FrameworkError(f"graphviz failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def create_png(self, prog: str | None = None) -> bytes:
        return self.create(prog, "png")

    def create_svg(self, prog: str | None = None) -> bytes:
        return self.create(prog, "svg")

    def write(self, path: str, prog: str | None = None, format: str = "raw") -> bool:
        data = self.create(prog, format)
        with open(path, "wb") as f:
            f.write(data)
        return True

    def write_png(self, path: str, prog: str | None = None) -> bool:
        return self.write(path, prog, "png")

    def write_svg(self, path: str, prog: str | None = None) -> bool:
        return self.write(path, prog, "svg")


def _graph(source: str) -> Any:
    try:
        import pydot
    except ImportError:
        return DotGraph(source)
    return pydot.graph_from_dot_data(source)[0]


def GetPydotGraph(
    operators_or_net: Any,
    name: str | None = None,
    rankdir: str = "LR",
    op_node_producer: Any = None,
    blob_node_producer: Any = None,
) -> Any:
    """A graph of the ops and blobs (Caffe2's GetPydotGraph): a ``pydot.Dot`` when pydot is
    installed, else a ``DotGraph`` with the same common methods. Custom node producers are
    pydot-specific and not supported."""
    if op_node_producer is not None or blob_node_producer is not None:
        raise FrameworkError("GetPydotGraph: custom node producers are not supported here")
    return _graph(to_dot(_as_net_def(operators_or_net, name), rankdir=rankdir))


def GetPydotGraphMinimal(
    operators_or_net: Any,
    name: str | None = None,
    rankdir: str = "LR",
    minimal_dependency: bool = False,
    op_node_producer: Any = None,
) -> Any:
    """A graph of the ops only, an edge per data dependency (transitively reduced with
    ``minimal_dependency``), as Caffe2's GetPydotGraphMinimal."""
    if op_node_producer is not None:
        raise FrameworkError("GetPydotGraphMinimal: custom node producers are not supported here")
    return _graph(_minimal_dot(_as_net_def(operators_or_net, name), rankdir, minimal_dependency))


def GetGraphPngSafe(func: Any, *args: Any, **kwargs: Any) -> bytes | None:
    """PNG bytes of ``func(*args, **kwargs)``'s graph, or None when rendering fails."""
    try:
        return func(*args, **kwargs).create_png()
    except Exception:
        return None
