"""Process-level runtime state: BLAS kernel choice and thread counts, the intra-op thread pool.

The lowest layer beside ``memory``: ops, nets and the CLI read and set threads here."""
