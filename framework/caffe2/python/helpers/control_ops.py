"""``caffe2.python.helpers.control_ops``: cond (an If op), loop (a While op).

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import cond, loop

__all__ = ["cond", "loop"]
