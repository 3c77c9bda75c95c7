"""Math ops: elementwise arithmetic with broadcasting, comparisons and logic, n-ary
Sum/Mean/Max/Min, unary maths, reductions.

``MODULES`` names every module that registers ops, one line each; ``framework.ops.families`` imports
them one by one as their op types are first looked up (importing this package registers nothing).
elementwise.py (binary-op machinery) and broadcast.py (Caffe2 legacy broadcast) register no ops.
"""

MODULES = (
    "arithmetic",
    "expand",
    "integer",
    "logical",
    "moments",
    "nary",
    "reduce",
    "reductions",
    "special",
    "trigonometric",
    "unary",
)
