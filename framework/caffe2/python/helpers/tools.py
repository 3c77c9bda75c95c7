"""``caffe2.python.helpers.tools``: image_input
(Caffe2's video_input needs the VideoInput op, which this framework does not have).

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import image_input

__all__ = ["image_input"]
