"""Math ops: elementwise arithmetic with broadcasting, comparisons and logic, n-ary
Sum/Mean/Max/Min, unary maths, reductions.

Each import below registers its module's ops; keep one line per module.
elementwise.py (binary-op machinery) and broadcast.py (Caffe2 legacy broadcast) register no ops.
"""

from framework.ops.math import (  # noqa: F401
    arithmetic,
    expand,
    integer,
    logical,
    moments,
    nary,
    reduce,
    reductions,
    special,
    trigonometric,
    unary,
)
