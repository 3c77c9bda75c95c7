"""``caffe2.python.transformations``: run Caffe2's named graph passes on a ``core.Net``.

``Transformer().<PassName>(net)`` (or ``Transformer.runTransform(name, net)``) converts the net's NetDef to
an ``NNModule``, runs the pass (see ``transformations_passes`` for each pass and its CPU meaning) and
writes the result back into ``net.Proto()``; a pass that changes blobs (``FuseConvBN``) works on the
current workspace. An unknown name raises ``AttributeError('Transformation <name> not found.')``.
``fuseNNPACKConvRelu(net)`` and ``fuseConvBN(net)`` are the same passes as functions.
``optimizeForMKLDNN`` exists only for Caffe2's MKL-DNN (IDEEP) build and raises here.
"""

from __future__ import annotations

from typing import Any, Callable

from framework.caffe2.python.nomnigraph import NNModule
from framework.caffe2.python.transformations_passes import GRAPH_PASSES, WORKSPACE_PASSES
from framework.errors import FrameworkError


def _apply(net: Any, run: Callable[[NNModule], None]) -> None:
    proto = net.Proto()
    nn = NNModule(proto)
    run(nn)
    proto.CopyFrom(nn.convertToCaffe2Proto(proto))


class Transformer:
    """Caffe2's pass runner: any attribute is the pass of that name, applied in place to a net."""

    def __init__(self) -> None:
        pass

    @classmethod
    def runTransform(cls, transform_name: str, net: Any) -> None:
        if transform_name in GRAPH_PASSES:
            _apply(net, GRAPH_PASSES[transform_name])
        elif transform_name in WORKSPACE_PASSES:
            from framework.caffe2.python import workspace

            _apply(net, lambda nn: WORKSPACE_PASSES[transform_name](nn, workspace))
        else:
            raise AttributeError(f"Transformation {transform_name} not found.")

    def __getattr__(self, transform_name: str) -> Callable[[Any], None]:
        if transform_name.startswith("_"):
            raise AttributeError(transform_name)
        return lambda net: self.runTransform(transform_name, net)


def fuseNNPACKConvRelu(net: Any) -> None:
    Transformer.runTransform("FuseNNPACKConvRelu", net)


def fuseConvBN(net: Any) -> None:
    Transformer.runTransform("FuseConvBN", net)


def optimizeForMKLDNN(net: Any, training_mode: bool = False) -> None:
    raise FrameworkError(
        "transformations.optimizeForMKLDNN rewrites nets for Caffe2's MKL-DNN (IDEEP) operators, which this "
        "framework does not have; its CPU operators run the net as it is"
    )
