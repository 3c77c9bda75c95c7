"""Training ops: iteration counter, learning rate, and the optimizer updates (SGD family,
Adagrad/Adam/RmsProp families).

``MODULES`` names every module that registers ops, one line each; ``framework.ops.families`` imports
them one by one as their op types are first looked up (importing this package registers nothing).
optimizers.py (the update-op base) registers no ops.
"""

MODULES = (
    "adaptive",
    "counters",
    "decay_adagrad",
    "meters",
    "rate_scaling",
    "sgd",
    "sparse_fused",
    "sparse_optimizers",
    "stats",
    "training",
    "update_rules",
    "yellowfin",
)
