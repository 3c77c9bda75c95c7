"""Caffe2's data strategies (``hu.tensor()``, ``hu.lengths_tensor()``...) for hypothesis.

Re-exported by ``framework.caffe2.python.hypothesis_test_util``, where Caffe2 tests find them.
Elements follow Caffe2: floats in [-1, 1], non-negative integers, booleans.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.ops import testing

__all__ = [
    "arrays",
    "dims",
    "elements_of_type",
    "floats",
    "lengths",
    "lengths_tensor",
    "ntensors",
    "segment_ids",
    "segmented_tensor",
    "sparse_lengths_tensor",
    "sparse_segmented_tensor",
    "tensor",
    "tensor1d",
    "tensors",
    "tensors1d",
]

dims = testing.dims  # dims(min_value=1, max_value=5): one dimension's size


def floats(*args: Any, **kwargs: Any) -> Any:
    """Caffe2's ``hu.floats``: ``st.floats`` of width 32 unless a width is given, the bounds
    rounded to float32 so hypothesis accepts them."""
    if "width" not in kwargs:
        kwargs["width"] = 32
        for key in ("min_value", "max_value"):
            if kwargs.get(key) is not None:
                kwargs[key] = float(np.float32(kwargs[key]))
    return st.floats(*args, **kwargs)


def elements_of_type(dtype: Any = np.float32, filter_: Callable | None = None) -> Any:
    """Caffe2's element strategy: floats in [-1, 1], non-negative ints, booleans."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        elems = st.floats(min_value=-1.0, max_value=1.0, width=dt.itemsize * 8)
    elif dt == np.bool_:
        elems = st.booleans()
    elif dt.kind in "iu":
        elems = st.integers(min_value=0, max_value=int(np.iinfo(dt).max))
    else:
        raise ValueError(f"Unexpected dtype {dt} without elements provided")
    return elems if filter_ is None else elems.filter(filter_)


def arrays(dims: Sequence[int], dtype: Any = np.float32, elements: Any = None, unique: bool = False) -> Any:
    """Arrays of shape ``dims`` (a sequence, or an int for 1-D; Caffe2's default elements per dtype)."""
    dims = (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if elements is None:
        elements = elements_of_type(dtype)
    if unique:
        return hnp.arrays(np.dtype(dtype), tuple(dims), elements=elements, unique=True)
    return testing.arrays(tuple(dims), dtype, elements=elements)


def tensor(
    min_dim: int = 1, max_dim: int = 4, dtype: Any = np.float32, elements: Any = None, unique: bool = False, **kwargs
) -> Any:
    """An array of min_dim..max_dim dims; ``kwargs`` (min_value, max_value) go to ``dims``."""
    dims_ = st.lists(dims(**kwargs), min_size=min_dim, max_size=max_dim)
    return dims_.flatmap(lambda d: arrays(d, dtype, elements, unique=unique))


def tensor1d(min_len: int = 1, max_len: int = 64, dtype: Any = np.float32, elements: Any = None) -> Any:
    return tensor(1, 1, dtype, elements, min_value=min_len, max_value=max_len)


def tensors(n: int, min_dim: int = 1, max_dim: int = 4, dtype: Any = np.float32, elements: Any = None, **kwargs) -> Any:
    """A list of ``n`` arrays of one shared shape."""
    dims_ = st.lists(dims(**kwargs), min_size=min_dim, max_size=max_dim)
    return dims_.flatmap(lambda d: st.lists(arrays(d, dtype, elements), min_size=n, max_size=n))


def tensors1d(n: int, min_len: int = 1, max_len: int = 64, dtype: Any = np.float32, elements: Any = None) -> Any:
    return tensors(n, 1, 1, dtype, elements, min_value=min_len, max_value=max_len)


def segment_ids(size: int, is_sorted: bool) -> Any:
    """int32 segment ids for ``size`` rows: sorted (starting at 0, steps of 0/1) or arbitrary."""
    if size == 0:
        return st.just(np.empty(shape=[0], dtype=np.int32))
    if is_sorted:
        return arrays([size], dtype=np.int32, elements=st.booleans()).map(
            lambda x: (np.cumsum(x, dtype=np.int32) - x[0]).astype(np.int32)
        )
    return arrays([size], dtype=np.int32, elements=st.integers(min_value=0, max_value=2 * size))


def lengths(size: int, min_segments: int | None = None, max_segments: int | None = None, **kwargs: Any) -> Any:
    """int32 segment lengths (zeros allowed) that add up to ``size``."""
    min_segments = 0 if min_segments is None else min_segments
    max_segments = size if max_segments is None else max_segments
    assert 0 <= min_segments <= max_segments
    if size == 0 and max_segments == 0:
        return st.just(np.empty(shape=[0], dtype=np.int32))
    assert max_segments > 0, "size is not 0, need at least one segment"
    return (
        st.integers(min_value=max(min_segments - 1, 0), max_value=max_segments - 1)
        .flatmap(lambda n: hnp.arrays(np.int32, n, elements=st.integers(min_value=0, max_value=size)))
        .map(lambda x: np.diff(np.sort(np.append(x, np.array([0, size], dtype=np.int32)))).astype(np.int32))
    )


def segmented_tensor(
    min_dim: int = 1,
    max_dim: int = 4,
    dtype: Any = np.float32,
    is_sorted: bool = True,
    elements: Any = None,
    segment_generator: Callable = segment_ids,
    allow_empty: bool = False,
    **kwargs: Any,
) -> Any:
    """(data, segments): segments from ``segment_generator(len(data), is_sorted=...)``."""
    gen_empty = st.booleans() if allow_empty else st.just(False)
    data_dims_ = st.lists(dims(**kwargs), min_size=min_dim, max_size=max_dim)
    data_dims_ = st.tuples(gen_empty, data_dims_).map(lambda pair: ([0] if pair[0] else []) + pair[1])
    return data_dims_.flatmap(
        lambda d: st.tuples(arrays(d, dtype, elements), segment_generator(d[0], is_sorted=is_sorted))
    )


def lengths_tensor(min_segments: int | None = None, max_segments: int | None = None, *args: Any, **kwargs: Any) -> Any:
    gen = functools.partial(lengths, min_segments=min_segments, max_segments=max_segments)
    return segmented_tensor(*args, segment_generator=gen, **kwargs)


def ntensors(
    min_n: int, max_n: int, min_dim: int = 1, max_dim: int = 4, dtype: Any = np.float32, elements: Any = None, **kwargs
) -> Any:
    """Between ``min_n`` and ``max_n`` arrays of one shared shape."""
    dims_ = st.lists(dims(**kwargs), min_size=min_dim, max_size=max_dim)
    return dims_.flatmap(lambda d: st.lists(arrays(d, dtype, elements), min_size=min_n, max_size=max_n))


def sparse_segmented_tensor(
    min_dim: int = 1,
    max_dim: int = 4,
    dtype: Any = np.float32,
    is_sorted: bool = True,
    elements: Any = None,
    allow_empty: bool = False,
    segment_generator: Callable = segment_ids,
    itype: Any = np.int64,
    **kwargs: Any,
) -> Any:
    """(data, indices into data's rows, segments of the indices), as Caffe2's."""
    gen_empty = st.booleans() if allow_empty else st.just(False)
    data_dims_ = st.lists(dims(**kwargs), min_size=min_dim, max_size=max_dim)
    all_dims_ = st.tuples(gen_empty, data_dims_).flatmap(
        lambda pair: st.tuples(
            st.just(pair[1]), st.integers(min_value=1, max_value=pair[1][0]) if not pair[0] else st.just(0)
        )
    )
    return all_dims_.flatmap(
        lambda d: st.tuples(
            arrays(d[0], dtype, elements),
            arrays(d[1], dtype=itype, elements=st.integers(min_value=0, max_value=d[0][0] - 1)),
            segment_generator(d[1], is_sorted=is_sorted),
        )
    )


def sparse_lengths_tensor(**kwargs: Any) -> Any:
    return sparse_segmented_tensor(segment_generator=lengths, **kwargs)
