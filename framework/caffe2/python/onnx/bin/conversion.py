"""``caffe2.python.onnx.bin.conversion``: Caffe2's two ONNX converters as click commands.

- ``caffe2_to_onnx CAFFE2_NET [--caffe2-net-name N] [--caffe2-init-net F] [--value-info JSON] -o OUT``: a
  binary NetDef (and its init net) to an ONNX model file; ``--value-info`` is ``{"input": [elem_type, shape]}``
  for inputs the init net does not make. The net needs a name (its own or ``--caffe2-net-name``).
- ``onnx_to_caffe2 ONNX_MODEL -o OUT --init-net-output INIT_OUT``: an ONNX model file to the two NetDefs.

Needs the ``click`` package (as Caffe2's module did); without it importing this module raises ImportError
saying so. The framework's own command for the same job is ``framework convert``.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import click
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("caffe2.python.onnx.bin.conversion needs the 'click' package: pip install click") from e

from framework.proto import framework_pb2 as caffe2_pb2

__all__ = ["caffe2_to_onnx", "onnx_to_caffe2"]

_CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.command(help="convert caffe2 net to onnx model", context_settings=_CONTEXT)
@click.argument("caffe2_net", type=click.File("rb"))
@click.option("--caffe2-net-name", type=str, help="Name of the caffe2 net")
@click.option("--caffe2-init-net", type=click.File("rb"), help="Path of the caffe2 init net pb file")
@click.option("--value-info", type=str, help="A json string providing the type and shape information of the inputs")
@click.option("-o", "--output", required=True, type=click.File("wb"), help="Output path for the onnx model pb file")
def caffe2_to_onnx(caffe2_net: Any, caffe2_net_name: Any, caffe2_init_net: Any, value_info: Any, output: Any) -> None:
    from framework.caffe2.python.onnx import frontend

    net = caffe2_pb2.NetDef()
    net.ParseFromString(caffe2_net.read())
    if not net.name and not caffe2_net_name:
        raise click.BadParameter("The input caffe2 net does not have name, --caffe2-net-name must be provided")
    net.name = caffe2_net_name or net.name
    init_net = None
    if caffe2_init_net:
        init_net = caffe2_pb2.NetDef()
        init_net.ParseFromString(caffe2_init_net.read())
        init_net.name = f"{net.name}_init"
    infos = json.loads(value_info) if value_info else None
    model = frontend.caffe2_net_to_onnx_model(predict_net=net, init_net=init_net, value_info=infos)
    output.write(model.SerializeToString())


@click.command(help="convert onnx model to caffe2 net", context_settings=_CONTEXT)
@click.argument("onnx_model", type=click.File("rb"))
@click.option("-o", "--output", required=True, type=click.File("wb"), help="Output path for the caffe2 net file")
@click.option(
    "--init-net-output", required=True, type=click.File("wb"), help="Output path for the caffe2 init net file"
)
def onnx_to_caffe2(onnx_model: Any, output: Any, init_net_output: Any) -> None:
    from framework.onnx.backend import Caffe2Backend, load_model

    model = load_model(onnx_model.read())
    init_net, predict_net = Caffe2Backend.onnx_graph_to_caffe2_net(model)
    init_net_output.write(init_net.SerializeToString())
    output.write(predict_net.SerializeToString())
