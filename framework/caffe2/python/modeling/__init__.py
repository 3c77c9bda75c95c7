"""Caffe2's ``caffe2.python.modeling``: what a model knows of its parameters and the passes that
modify a built net.

- ``parameter_info``: ``ParameterTags``, ``ParameterType``, ``ParameterInfo``;
- ``initializers``: how ``ModelHelper.create_param`` creates a parameter (fill op, external, fp16 copies);
- ``parameter_sharing``: ``ParameterSharing({'scope_b': 'scope_a'})`` maps parameter names across NameScopes;
- ``net_modifier`` and its passes: ``ComputeNormForBlobs``, ``ComputeHistogramForBlobs``,
  ``ComputeStatisticsForBlobs``, ``GetEntryFromBlobs``, ``GradientClipping``.
"""
