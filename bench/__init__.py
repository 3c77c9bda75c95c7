"""Benchmarks (not part of the test command). Run all with ``python -m bench``."""
