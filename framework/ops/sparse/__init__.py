"""Sparse ops: segment reductions (Lengths*, SortedSegment*, UnsortedSegment* and their Sparse* gather-first
forms) and the lengths / segment-id utilities that recommendation models use.

Each import below registers its module's ops; keep one line per module.
"""

from framework.ops.sparse import (  # noqa: F401
    lengths,
    segment_reductions,
)
