"""``caffe2.python.helpers.db_input``: db_input.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import db_input

__all__ = ["db_input"]
