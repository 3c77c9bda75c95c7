"""Copies of a NetDef: renamed and masked (``Net.Clone``) or cut to a sub-net (``Net.ClonePartial``).

Both work on protos only and return a new NetDef; the source is not modified.

>>> from framework.core import CreateOperator
>>> src = NetDef(name="n", external_input=["x"], external_output=["y"])
>>> src.op.extend([CreateOperator("Relu", ["x"], ["y"])])
>>> c = clone_net_def(src, "c", blob_remap={"x": "a"})
>>> c.name, list(c.op[0].input), list(c.external_input)
('c', ['a'], ['a'])
"""

from __future__ import annotations

from typing import Any, Iterable

from framework.proto.framework_pb2 import NetDef

__all__ = ["clone_net_def", "partial_net_def"]


def clone_net_def(
    source: NetDef,
    name: str,
    blob_remap: dict[Any, Any] | None = None,
    op_id_mask: Iterable[int] | None = None,
    update_external_list: bool = False,
) -> NetDef:
    """A copy of ``source`` named ``name``, blobs renamed by ``blob_remap``, only ops in ``op_id_mask``.

    With ``update_external_list`` the external inputs become what the kept ops read before writing and the
    external outputs what they write and no later kept op reads (Caffe2).
    """
    remap = {str(k): str(v) for k, v in (blob_remap or {}).items()}

    def rn(names: Iterable[str]) -> list[str]:
        return [remap.get(n, n) for n in names]

    proto = NetDef()
    proto.CopyFrom(source)
    proto.name = name
    del proto.op[:]
    mask = None if op_id_mask is None else set(op_id_mask)
    for i, op in enumerate(source.op):
        if mask is not None and i not in mask:
            continue
        new = proto.op.add()
        new.CopyFrom(op)
        for field in ("input", "output", "control_input"):
            names = rn(getattr(op, field))
            del getattr(new, field)[:]
            getattr(new, field).extend(names)
    for field in ("external_input", "external_output"):
        names = rn(getattr(source, field))
        del getattr(proto, field)[:]
        getattr(proto, field).extend(names)
    if update_external_list:
        # as Caffe2: inputs read before any kept op writes them are external inputs (in order of first
        # use); outputs no later kept op reads are external outputs (in order of production)
        produced: list[str] = []
        ext_in: list[str] = []
        read_after: set[str] = set()
        for op in proto.op:
            for x in op.input:
                if x in produced:
                    read_after.add(x)
                elif x not in ext_in:
                    ext_in.append(x)
            produced.extend(o for o in op.output if o not in produced)
        del proto.external_input[:]
        proto.external_input.extend(ext_in)
        del proto.external_output[:]
        proto.external_output.extend(o for o in produced if o not in read_after)
    return proto


def partial_net_def(source: NetDef, name: str, inputs: Iterable[Any], outputs: Iterable[Any]) -> NetDef:
    """The sub-net of ``source`` computing ``outputs`` from ``inputs`` (ops walked back from outputs)."""
    inputs = {str(x) for x in inputs}
    need = {str(x) for x in outputs}
    keep = []
    for i in reversed(range(len(source.op))):
        op = source.op[i]
        if need & set(op.output):
            keep.append(i)
            need -= set(op.output)
            need |= {x for x in op.input if x not in inputs}
    proto = NetDef()
    proto.CopyFrom(source)
    proto.name = name
    del proto.op[:], proto.external_input[:], proto.external_output[:]
    for i in sorted(keep):
        proto.op.add().CopyFrom(source.op[i])
    proto.external_input.extend(sorted(inputs) + sorted(need - inputs))
    proto.external_output.extend(str(x) for x in outputs)
    return proto
