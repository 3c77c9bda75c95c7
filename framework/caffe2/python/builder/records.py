"""Input and output records of a Net (Caffe2's ``Net.set_input_record`` family) and
``clone_and_bind_net`` (Caffe2's ``core.clone_and_bind_net``), used by ``framework.caffe2.python.pipeline``'s
``NetProcessor``. ``Net`` mixes ``NetRecords`` in; ``framework.core`` re-exports
``clone_and_bind_net``.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.scope import NameScope
from framework.errors import NetError


class NetRecords:
    """The record methods of ``Net`` (schemas from ``framework.caffe2.python.schema``)."""

    _input_record: Any = None
    _output_record: Any = None

    def set_input_record(self, input_record: Any) -> Any:
        """Declare the net's input record (its blobs become external inputs): a schema without blobs
        gets fresh blobs scoped under the net's name. It cannot be reset to other blobs."""
        from framework.caffe2.python import schema

        if self._input_record is not None and not (
            input_record.has_blobs() and set(input_record.field_blobs()) == set(self._input_record.field_blobs())
        ):
            raise NetError(f"net '{self.Name()}': input schema cannot be reset")
        if not input_record.has_blobs():
            with NameScope(self.Name()):
                self._input_record = schema.NewRecord(self, input_record)
        else:
            self._input_record = input_record
        for blob in self._input_record.field_blobs():
            if str(blob) not in self.Proto().external_input:
                self.AddExternalInput(blob)
        return self._input_record

    def set_output_record(self, record: Any) -> None:
        """Declare the net's output record; every blob must be produced by the net (or be an input)."""
        if self._output_record is not None and not (
            record.has_blobs() and set(record.field_blobs()) == set(self._output_record.field_blobs())
        ):
            raise NetError(f"net '{self.Name()}': output schema cannot be reset")
        for blob in record.field_blobs():
            if not self.BlobIsDefined(blob):
                raise NetError(f"net '{self.Name()}': output record blob '{blob}' is not defined")
        for blob in record.field_blobs():
            if str(blob) not in self.Proto().external_output:
                self.AddExternalOutput(blob)
        self._output_record = record

    def AppendOutputRecordField(self, field_name: str, record: Any) -> None:
        """Add field ``field_name`` (a record or blob, every blob produced by the net) to the output record,
        which must exist and not have that field yet; the blobs become external outputs."""
        from framework.caffe2.python import schema

        if self._output_record is None:
            raise NetError(f"net '{self.Name()}': no output record to append '{field_name}' to")
        record = schema.as_record(record)
        if field_name in self._output_record.fields:
            raise NetError(f"net '{self.Name()}': output record already has a field '{field_name}'")
        for blob in record.field_blobs():
            if not self.BlobIsDefined(blob):
                raise NetError(f"net '{self.Name()}': output record blob '{blob}' is not defined")
        for blob in record.field_blobs():
            if str(blob) not in self.Proto().external_output:
                self.AddExternalOutput(blob)
        self._output_record = self._output_record + schema.Struct((field_name, record))

    def input_record(self) -> Any:
        return self._input_record

    def output_record(self) -> Any:
        return self._output_record

    def _copy_records_to(self, new: Any, blob_remap: dict[str, str]) -> None:
        """Give a clone the records of this net, with blob names remapped."""
        from framework.caffe2.python import schema
        from framework.caffe2.python.builder.blob_reference import BlobReference

        for attr in ("_input_record", "_output_record"):
            rec = getattr(self, attr)
            if rec is not None:
                blobs = [BlobReference(blob_remap.get(str(b), str(b)), new) for b in rec.field_blobs()]
                setattr(new, attr, schema.from_blob_list(rec, blobs))


def _undefined_blobs(proto: Any) -> set[str]:
    """Blobs read before any op of the net writes them (the net's true inputs)."""
    written: set[str] = set()
    undefined: set[str] = set(proto.external_input)
    for op in proto.op:
        undefined.update(b for b in op.input if b not in written)
        written.update(op.output)
    return undefined


def clone_and_bind_net(
    net: Any, name: str, prefix: str, blob_remap: dict[str, str] | None = None, inputs: Any = None,
    keep_schema: bool = True,
) -> tuple[Any, dict[str, str]]:  # fmt: skip
    """Clone ``net`` as ``name``: the blobs it defines get ``prefix``; its input record's blobs are
    bound to those of the record ``inputs`` (matched by field name; every input field must be
    given); other undefined blobs keep their names. Returns (clone, blob_remap)."""
    from framework.caffe2.python import schema

    blob_remap = {} if blob_remap is None else blob_remap
    if inputs is not None:
        if not isinstance(inputs, schema.Field):
            raise TypeError("inputs must be a schema Field")
        original = net.input_record()
        if original is None:
            raise NetError(f"net '{net.Name()}' has no input record to bind")
        missing = set(original.field_names()) - set(inputs.field_names())
        if missing:
            raise NetError(f"net '{net.Name()}': schemas do not match, fields missing from inputs: {sorted(missing)}")
        mapping = dict(zip(original.field_names(), original.field_blobs()))
        for fn, fb in zip(inputs.field_names(), inputs.field_blobs()):
            if fn in mapping:
                blob_remap[str(mapping[fn])] = str(fb)
    proto = net.Proto()
    undefined = _undefined_blobs(proto)
    blobs = set(undefined)
    for op in proto.op:
        blobs.update(op.input)
        blobs.update(op.output)
    for blob in blobs:
        if blob not in blob_remap:
            blob_remap[blob] = blob if blob in undefined else prefix + blob
    cloned = net.Clone(name, blob_remap, keep_schema=keep_schema)
    if not keep_schema and inputs is not None:
        cloned.set_input_record(inputs)
    return cloned, blob_remap
