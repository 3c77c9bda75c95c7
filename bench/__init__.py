"""Benchmarks (not part of the test command). Run all with ``python -m bench``."""

# Before any benchmark imports numpy: the OpenBLAS kernels the framework picks for this CPU
# (framework/runtime/blas_kernel.py), as the framework command picks them.
from framework.runtime.blas_kernel import choose as _choose_blas_kernel

_choose_blas_kernel(default="auto")
