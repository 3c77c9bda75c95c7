"""Control flow: If, While, Do with scopes, ONNXWhile (nested nets), and run-time checks."""

from framework.ops.control import branch, checks, onnx_while, scope  # noqa: F401  isort:skip
from framework.ops.control import grad  # noqa: F401  isort:skip  (makers for the ops above)
