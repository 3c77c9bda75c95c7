"""``NetModifier``: a pass that adds ops to an already built net (Caffe2's
``caffe2.python.modeling.net_modifier``). Subclasses implement ``modify_net``; calling the
modifier runs it: ``ComputeNormForBlobs(["fc_w"], 10)(model.net)``.

Caffe2 2018 always published each result in the net's output record; Caffe2 2020 only with
``modify_output_record=True``. Here the keyword exists and defaults to True (the 2018 behaviour), so
programs of either tree that read ``net.output_record()`` find their fields.
"""

from __future__ import annotations

from typing import Any

from framework.errors import NetError

__all__ = ["NetModifier"]


class NetModifier:
    """Base of the net passes: ``modifier(net, init_net=None, grad_map=None, blob_to_device=None)``."""

    def modify_net(
        self,
        net: Any,
        init_net: Any = None,
        grad_map: Any = None,
        blob_to_device: Any = None,
        modify_output_record: bool = True,
    ) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement modify_net")

    def __call__(
        self,
        net: Any,
        init_net: Any = None,
        grad_map: Any = None,
        blob_to_device: Any = None,
        modify_output_record: bool = True,
    ) -> None:
        self.modify_net(
            net,
            init_net=init_net,
            grad_map=grad_map,
            blob_to_device=blob_to_device,
            modify_output_record=modify_output_record,
        )


def require_defined(net: Any, blob: Any) -> None:
    """Raise NetError unless some op of ``net`` (or its inputs) defines ``blob``."""
    if not net.BlobIsDefined(blob):
        raise NetError(f"blob '{blob}' is not defined in net '{net.Name()}'")


def publish(net: Any, field_name: str, scalar: Any) -> None:
    """Add ``field_name: scalar`` to the net's output record (creating the record if it has none)."""
    from framework.caffe2.python import schema

    if net.output_record() is None:
        net.set_output_record(schema.Struct((field_name, scalar)))
    else:
        net.AppendOutputRecordField(field_name, scalar)
