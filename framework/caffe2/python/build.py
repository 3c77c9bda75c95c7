"""``caffe2.python.build``: how this Caffe2 was built (a CPU-only build with operator schemas)."""

from framework.caffe2 import c_extension as _C

CAFFE2_NO_OPERATOR_SCHEMA = _C.define_caffe2_no_operator_schema
build_options = _C.get_build_options()
