"""Caffe2's SSA view of a net (``core.get_ssa`` and the helpers over it).

``get_ssa(net, blob_versions=None)`` numbers the writes of every blob: external inputs (and, in a net
that declares none, every blob an op reads before it is written) are version 0; each op's inputs carry
the blob's current version and each output the next one. It returns ``(ssa, blob_versions)`` with
``ssa[i] = ([(input, version)...], [(output, version)...])`` for op ``i`` and ``blob_versions`` the
latest version of each blob (updated in place when given). A list of nets gives a list of ssas
sharing one version map.

>>> # ssa, versions = get_ssa(net)   # Y = FC(X, W, b); Y = Add(Y, s): Y is written at versions 1 and 2
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["get_op_ids_in_path", "get_output_producers", "get_ssa", "get_undefined_blobs"]


def get_ssa(net: Any, blob_versions: dict | None = None) -> tuple[Any, dict]:
    if blob_versions is None:
        blob_versions = {}
    if isinstance(net, list):
        return [get_ssa(n, blob_versions)[0] for n in net], blob_versions
    proto = net.Proto() if hasattr(net, "Proto") else net
    for name in proto.external_input:
        blob_versions.setdefault(str(name), 0)
    ssa = []
    for op in proto.op:
        if not proto.external_input:
            for name in op.input:
                blob_versions.setdefault(str(name), 0)
        inputs = [(str(i), blob_versions.get(str(i), 0)) for i in op.input]
        for o in op.output:
            blob_versions[str(o)] = blob_versions.get(str(o), 0) + 1
        outputs = [(str(o), blob_versions[str(o)]) for o in op.output]
        ssa.append((inputs, outputs))
    return ssa, blob_versions


def get_undefined_blobs(ssa: Iterable) -> set[str]:
    """The blobs some op reads at version 0 (before any op of the net wrote them)."""
    return {name for inputs, _ in ssa for name, version in inputs if version == 0}


def get_output_producers(ssa: Iterable) -> dict[tuple[str, int], int]:
    """(blob, version) -> index of the op that wrote that version."""
    return {o: i for i, (_, outputs) in enumerate(ssa) for o in outputs}


def get_op_ids_in_path(ssa: list, blob_versions: dict, inputs: Iterable[Any], outputs: Iterable[Any]) -> list[int]:
    """Sorted indices of the ops needed to compute ``outputs`` (latest versions) from ``inputs`` (latest
    versions, taken as given)."""
    given = {(str(i), blob_versions[str(i)]) for i in inputs}
    producers = get_output_producers(ssa)
    queue = [(str(o), blob_versions[str(o)]) for o in outputs]
    used: set[int] = set()
    while queue:
        blob = queue.pop()
        if blob not in given and blob in producers and producers[blob] not in used:
            used.add(producers[blob])
            queue.extend(ssa[producers[blob]][0])
    return sorted(used)
