"""Inference deployment, as Caffe2's ``caffe2.python.predictor``.

- ``mobile_exporter.Export(workspace, net, params)`` -> ``(init_net, predict_net)``:
  the trained parameters baked into ``GivenTensor*Fill`` ops;
- ``Predictor(init_net, predict_net)`` (also ``workspace.Predictor``): runs the
  init net once in its own workspace, then ``run(inputs)`` feeds the inputs and
  returns the predict net's external outputs.
"""

from framework.predictor.predictor import Predictor

__all__ = ["Predictor"]
