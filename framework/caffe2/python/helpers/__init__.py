"""``caffe2.python.helpers``: Caffe2's brew helpers, grouped in the modules Caffe2 grouped them in
(algebra, arg_scope, array_helpers, control_ops, conv, db_input, dropout, elementwise_linear, fc, nonlinearity,
normalization, pooling, tools, train). Each module re-exports the helpers of ``caffe2.python.brew`` (where they
are implemented and registered); ``brew.<helper>`` is the usual way to call them."""
