"""Training ops: iteration counter, learning rate, and the optimizer updates (SGD family,
Adagrad/Adam/RmsProp families).

Each import below registers its module's ops; keep one line per module.
optimizers.py (the update-op base) registers no ops.
"""

from framework.ops.training import (  # noqa: F401
    adaptive,
    counters,
    decay_adagrad,
    meters,
    rate_scaling,
    sgd,
    sparse_fused,
    sparse_optimizers,
    stats,
    training,
    update_rules,
    yellowfin,
)
