"""``caffe2.python.predictor``: Caffe2's predictor export API (predictor_exporter, predictor_py_utils,
serde, mobile_exporter). The Predictor engine itself is ``framework.predictor``."""
