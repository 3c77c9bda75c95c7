"""Tensor memory semantics (reference/caffe2.md §7, seeds/): lazy allocation, resize, extend, sharing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.errors import ShapeError, TypeMismatchError, UninitializedError
from framework.memory import Tensor, memory_reporter
from framework.memory import tensor as tensor_mod
from framework.memory.tensor import as_tensor_array
from framework.memory.typemeta import TypeMeta

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_]


class Allocs:
    """Counts allocations reported by the global MemoryReporter inside a ``with`` block."""

    def __enter__(self):
        self.start = memory_reporter().allocations
        return self

    def __exit__(self, *exc):
        self.count = memory_reporter().allocations - self.start

    @property
    def now(self):
        return memory_reporter().allocations - self.start


@pytest.fixture
def options():
    """Tensor memory options, restored after the test."""
    saved = (tensor_mod.OPTIONS.keep_on_shrink, tensor_mod.OPTIONS.max_keep_on_shrink_bytes)
    yield tensor_mod.OPTIONS
    tensor_mod.OPTIONS.keep_on_shrink, tensor_mod.OPTIONS.max_keep_on_shrink_bytes = saved


# -- lazy allocation and access ---------------------------------------------------


def test_lazy_allocation():
    with Allocs() as a:
        t = Tensor()
        t.resize(2, 3)
        assert t.dims == (2, 3) and t.numel == 6 and not t.is_allocated and a.now == 0
        x = t.mutable_data(np.float32)
        assert a.now == 1 and t.is_allocated and x.shape == (2, 3) and x.dtype == np.float32
        assert t.nbytes == 24 and t.capacity_nbytes == 24 and t.itemsize == 4
        t.mutable_data(np.float32)
        t.mutable_data()
        t.data(np.float32)
    assert a.count == 1


def test_resize_spellings():
    for spelling in [(2, 3), ((2, 3),), ([2, 3],), (np.array([2, 3]),), (np.int64(2), np.int32(3))]:
        t = Tensor()
        t.resize(*spelling)
        assert t.dims == (2, 3)
    t = Tensor()
    t.resize()
    assert t.dims == () and t.numel == 1  # a scalar
    assert Tensor([4, 5], np.int8).mutable_data().dtype == np.int8


def test_uninitialized_errors():
    t = Tensor()
    assert t.numel == -1 and not t.is_initialized
    with pytest.raises(UninitializedError, match=r"not initialized.*resize\(\)"):
        t.mutable_data(np.float32)
    with pytest.raises(UninitializedError, match="not initialized"):
        t.data()
    with pytest.raises(UninitializedError, match="not initialized"):
        t.reshape(3)
    t.resize(3)
    with pytest.raises(UninitializedError, match=r"shape \(3,\) has no data yet"):
        t.data()
    with pytest.raises(UninitializedError, match="no element type yet; pass a dtype"):
        t.mutable_data()


def test_type_mismatch_says_expected_and_found():
    t = Tensor((2,))
    t.mutable_data(np.float64)
    with pytest.raises(TypeMismatchError, match="expects elements to be float while tensor contains double"):
        t.data(np.float32)
    assert t.data(np.float64) is t.data()


@pytest.mark.parametrize("bad", [(-1, 2), (2.5,), ("3",), (None,)])
def test_bad_shapes(bad):
    with pytest.raises(ShapeError, match="dimensions must be"):
        Tensor().resize(*bad)


def test_data_and_mutable_data_are_views_of_the_storage():
    t = Tensor((3, 4))
    m = t.mutable_data(np.int32)
    m[...] = np.arange(12).reshape(3, 4)
    d = t.data()
    assert np.shares_memory(m, d) and np.shares_memory(d, t.storage.buffer)
    d[1, 1] = 99
    assert t.mutable_data()[1, 1] == 99
    assert t.numpy()[1, 1] == 99 and not np.shares_memory(t.numpy(), d)  # numpy() copies


def test_version_bumps_on_mutable_data():
    t = Tensor((2,))
    v0 = t.version
    t.mutable_data(np.float32)
    t.data()
    v1 = t.version
    t.mutable_data()
    assert v1 > v0 and t.version > v1


# -- resize, keep-on-shrink ---------------------------------------------------------


def test_shrink_keeps_buffer_and_growth_past_capacity_frees_it():
    t = Tensor((100,))
    t.mutable_data(np.float32)
    storage = t.storage
    with Allocs() as a:
        t.resize(10)
        assert t.storage is storage
        assert t.mutable_data().shape == (10,) and t.capacity_nbytes == 400
        t.resize(50)  # within capacity: kept
        assert t.storage is storage and t.mutable_data().shape == (50,)
        t.resize(2, 5)  # same count, other dims: kept
        assert t.storage is storage
        assert a.now == 0
        t.resize(101)  # beyond capacity: dropped, reallocated lazily
        assert t.storage is None and a.now == 0
        t.mutable_data()
        assert a.now == 1 and t.capacity_nbytes == 404


def test_slack_cap(options):
    options.max_keep_on_shrink_bytes = 100
    t = Tensor((100,))  # 400 bytes of float32
    t.mutable_data(np.float32)
    storage = t.storage
    t.resize(80)  # slack 80 <= 100: kept
    assert t.storage is storage
    t.resize(70)  # slack 120 > 100: freed
    assert t.storage is None
    t.mutable_data()
    assert t.capacity_nbytes == 280


def test_keep_on_shrink_off(options):
    options.keep_on_shrink = False
    t = Tensor((10,))
    t.mutable_data(np.float32)
    t.resize(9)
    assert t.storage is None


def test_reserved_tensor_keeps_buffer_despite_cap(options):
    t = Tensor((1, 2))
    t.mutable_data(np.float32)
    t.reserve_space(100)
    options.max_keep_on_shrink_bytes = 0
    storage = t.storage
    t.resize(50, 2)
    assert t.storage is storage


def test_refill_of_same_shape_allocates_nothing():
    t = Tensor()
    x = np.random.rand(8, 16).astype(np.float32)
    t.assign(x)
    with Allocs() as a:
        for _ in range(5):
            t.assign(x * 2)
            t.mutable_data(np.float32)[...] = x
            t.resize(8, 16)
            t.resize(16, 8)  # same count, other dims
            t.assign(x)
    assert a.count == 0
    np.testing.assert_array_equal(t.data(), x)


def test_pod_type_change_reuses_a_big_enough_buffer():
    t = Tensor((4,))
    t.mutable_data(np.float64)
    storage = t.storage
    with Allocs() as a:
        assert t.mutable_data(np.int32).dtype == np.int32  # 16 <= 32 bytes
        assert t.mutable_data(np.uint8).dtype == np.uint8
    assert a.count == 0 and t.storage is storage
    t.resize(8)
    t.mutable_data(np.float64)  # 64 > 32 bytes: reallocates
    assert t.storage is not storage


# -- reshape ---------------------------------------------------------------------------


def test_reshape():
    t = Tensor((2, 6))
    t.mutable_data(np.int64)[...] = np.arange(12).reshape(2, 6)
    storage = t.storage
    t.reshape(3, 4)
    assert t.dims == (3, 4) and t.storage is storage
    np.testing.assert_array_equal(t.data(), np.arange(12).reshape(3, 4))
    t.reshape([4, -1])
    assert t.dims == (4, 3)
    t.reshape((12,))
    assert t.data().shape == (12,)
    with pytest.raises(ShapeError, match=r"from \(12,\) \(12 elements\) to \(5,\) \(5 elements\).*use resize"):
        t.reshape(5)
    with pytest.raises(ShapeError, match="at most one dimension may be -1"):
        t.reshape(-1, -1)
    with pytest.raises(ShapeError, match="cannot reshape a tensor of 12 elements"):
        t.reshape(5, -1)
    with pytest.raises(ShapeError, match="integers"):
        t.reshape(2.0, 6)
    assert t.dims == (12,)


# -- extend, reserve_space, shrink_to ----------------------------------------------------


def test_extend_100000_rows_is_amortized():
    t = Tensor((0, 2))
    t.mutable_data(np.int64)
    n = 100_000
    with Allocs() as a:
        for i in range(n):
            t.extend(1, 40)
            t.mutable_data()[i] = (i, -i)
    assert t.dims == (n, 2)
    data = t.data()
    np.testing.assert_array_equal(data[:, 0], np.arange(n))
    np.testing.assert_array_equal(data[:, 1], -np.arange(n))
    # growth by 40%: about log_1.4(n) reallocations
    assert a.count <= math.ceil(math.log(n, 1.4)) + 5
    assert a.count >= 10
    assert t.capacity_nbytes >= t.nbytes


def test_extend_keeps_data_and_grows_by_growth_pct():
    t = Tensor()
    t.assign(np.arange(10, dtype=np.float32).reshape(5, 2))
    t.extend(1, 100)  # capacity short: reserve max(6, 10) rows
    assert t.dims == (6, 2) and t.capacity_nbytes == 10 * 2 * 4
    np.testing.assert_array_equal(t.data()[:5], np.arange(10).reshape(5, 2))
    with Allocs() as a:
        t.extend(4)  # fits in the reserve
    assert a.count == 0 and t.dims == (10, 2)
    t.extend(20, 0)  # more than growth: exactly the new size
    assert t.dims == (30, 2) and t.capacity_nbytes == 30 * 2 * 4
    np.testing.assert_array_equal(t.data()[:5], np.arange(10).reshape(5, 2))


def test_extend_errors():
    with pytest.raises(UninitializedError, match="extend"):
        Tensor((3,)).extend(1)
    s = Tensor.from_numpy(np.float32(1))
    with pytest.raises(ShapeError, match="scalar"):
        s.extend(1)
    t = Tensor.from_numpy(np.zeros(3))
    with pytest.raises(ShapeError, match="num must be >= 0, got -1"):
        t.extend(-1)


def test_string_tensor_extend_and_resize():
    t = Tensor.from_numpy(np.array(["a", "bc"]))
    assert t.meta.name == "std::string" and list(t.data()) == [b"a", b"bc"]
    t.extend(3)
    assert list(t.data()) == [b"a", b"bc", b"", b"", b""]
    t.mutable_data()[4] = b"z"
    t.resize(2)  # keep on shrink
    assert list(t.data()) == [b"a", b"bc"]
    t.resize(100)  # grow past capacity: fresh empty strings
    assert t.mutable_data().shape == (100,) and set(t.data()) == {b""}
    t.reshape(10, 10)
    assert t.data().shape == (10, 10)


def test_reserve_space():
    t = Tensor.from_numpy(np.arange(6, dtype=np.int32).reshape(3, 2))
    t.reserve_space(50)
    assert t.dims == (3, 2) and t.capacity_nbytes == 50 * 2 * 4
    np.testing.assert_array_equal(t.data(), np.arange(6).reshape(3, 2))
    with Allocs() as a:
        for _ in range(47):
            t.extend(1)
        t.reserve_space(10)  # already enough: nothing
    assert a.count == 0 and t.dims == (50, 2)


def test_shrink_to():
    t = Tensor.from_numpy(np.arange(12, dtype=np.int16).reshape(4, 3))
    storage = t.storage
    with Allocs() as a:
        t.shrink_to(2)
    assert a.count == 0 and t.storage is storage and t.dims == (2, 3)
    np.testing.assert_array_equal(t.data(), np.arange(6).reshape(2, 3))
    with pytest.raises(ShapeError, match="between 0 and the outer dimension 2"):
        t.shrink_to(3)
    t.shrink_to(0)
    assert t.data().shape == (0, 3)


def test_shrink_to_refused_on_shared_storage():
    a = Tensor.from_numpy(np.zeros((4, 2)))
    b = Tensor((4, 2))
    b.share_data(a)
    for t in (a, b):
        with pytest.raises(ShapeError, match="shares its storage"):
            t.shrink_to(1)
    c = Tensor()
    c.share_external(np.zeros((3, 3)))
    with pytest.raises(ShapeError, match="shares its storage"):
        c.shrink_to(1)


# -- sharing and copying ------------------------------------------------------------------


def test_share_data():
    a = Tensor.from_numpy(np.arange(6, dtype=np.float32))
    b = Tensor((2, 3))
    with Allocs() as al:
        b.share_data(a)
    assert al.count == 0
    assert b.shares_data and a.shares_data and b.storage is a.storage and b.meta is a.meta
    assert b.dims == (2, 3) and np.shares_memory(a.data(), b.data())
    b.mutable_data()[0, 0] = 100
    assert a.data()[0] == 100
    a.mutable_data()[5] = -1
    assert b.data()[1, 2] == -1


def test_share_data_errors():
    a = Tensor.from_numpy(np.zeros(6))
    with pytest.raises(ShapeError, match=r"size mismatch \(5 vs 6 elements\).*reshape before sharing"):
        Tensor((5,)).share_data(a)
    with pytest.raises(UninitializedError, match="source tensor has no data"):
        Tensor((6,)).share_data(Tensor((6,)))
    c = Tensor()  # uninitialized: takes the source's dims
    c.share_data(a)
    assert c.dims == (6,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_share_external_is_zero_copy(dtype):
    arr = np.zeros((3, 4), dtype=dtype)
    t = Tensor()
    with Allocs() as a:
        t.share_external(arr)
        view = t.mutable_data()
    assert a.count == 0
    assert t.dims == (3, 4) and t.dtype == np.dtype(dtype) and t.shares_data
    assert np.shares_memory(view, arr)
    view[1, 2] = 1
    assert arr[1, 2] == 1
    arr[0, 0] = 1
    assert t.data()[0, 0] == 1


def test_share_external_strings_and_errors():
    arr = np.array([b"x", b"y"], dtype=object)
    t = Tensor()
    t.share_external(arr)
    t.mutable_data()[0] = b"changed"
    assert arr[0] == b"changed"
    with pytest.raises(ShapeError, match=r"C-contiguous.*strides.*ascontiguousarray"):
        Tensor().share_external(np.zeros((4, 4))[:, ::2])
    with pytest.raises(ShapeError, match="C-contiguous"):
        Tensor().share_external(np.zeros((4, 3)).T)
    with pytest.raises(TypeMismatchError, match="numpy array, got list"):
        Tensor().share_external([1, 2])
    with pytest.raises(TypeMismatchError, match="object array of bytes"):
        Tensor().share_external(np.array(["a"]))


def test_share_external_then_grow_detaches():
    arr = np.ones(4, dtype=np.float32)
    t = Tensor()
    t.share_external(arr)
    t.resize(8)
    t.mutable_data()[...] = 5
    assert not t.shares_data and (arr == 1).all()


def test_copy_from():
    a = Tensor.from_numpy(np.arange(6, dtype=np.uint16).reshape(2, 3))
    b = Tensor()
    b.copy_from(a)
    assert b.dims == (2, 3) and b.meta is a.meta and not np.shares_memory(a.data(), b.data())
    np.testing.assert_array_equal(a.data(), b.data())
    b.mutable_data()[0, 0] = 7
    assert a.data()[0, 0] == 0
    s = Tensor.from_numpy(np.array(["p", "q"]))
    b.copy_from(s)
    assert list(b.data()) == [b"p", b"q"] and b.meta.name == "std::string"
    with pytest.raises(UninitializedError):
        b.copy_from(Tensor((2,)))


def test_free_memory_keeps_shape_and_type():
    t = Tensor.from_numpy(np.zeros(3, dtype=np.int8))
    t.free_memory()
    assert not t.is_allocated and t.dims == (3,) and t.dtype == np.int8
    assert t.mutable_data().dtype == np.int8


# -- assign / feed values ------------------------------------------------------------------


def test_as_tensor_array_strings():
    out = as_tensor_array(["é", b"b"])
    assert out.dtype == object and list(out) == ["é".encode(), b"b"]
    assert as_tensor_array(np.array([["a"]], dtype="S1")).shape == (1, 1)
    with pytest.raises(TypeMismatchError, match=r"element \[1\] is a int"):
        as_tensor_array(np.array([b"a", 3], dtype=object))
    with pytest.raises(TypeMismatchError, match="complex64"):
        as_tensor_array(np.zeros(2, dtype=np.complex64))
    with pytest.raises(ShapeError, match="cannot make a tensor"):
        as_tensor_array([[1, 2], [3]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_tensors(dtype):
    t = Tensor.from_numpy(np.zeros((0, 3), dtype=dtype))
    assert t.dims == (0, 3) and t.numel == 0 and t.data().shape == (0, 3) and t.data().dtype == dtype
    t.extend(2)
    assert t.data().shape == (2, 3) and not t.data().any()


@given(
    hnp.arrays(
        st.sampled_from(DTYPES),
        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
        elements={"allow_nan": False},
    )
)
def test_assign_round_trip_every_dtype(arr):
    t = Tensor.from_numpy(arr)
    assert t.dims == arr.shape and t.dtype == arr.dtype and t.nbytes == arr.nbytes
    np.testing.assert_array_equal(t.data(), arr)
    assert not np.shares_memory(t.data(), arr)  # a copy
    if arr.nbytes:
        assert t.data().ctypes.data % 64 == 0


@given(st.lists(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6), min_size=1, max_size=8))
def test_resize_sequence_invariants(shapes):
    t = Tensor()
    for shape in shapes:
        before = t.storage
        cap = t.capacity_nbytes
        t.resize(shape)
        n = int(np.prod(shape))
        if before is not None and cap >= n * 8:
            assert t.storage is before  # keep-on-shrink (no cap by default)
        x = t.mutable_data(np.float64)
        assert x.shape == tuple(shape) and t.capacity_nbytes >= t.nbytes
        x[...] = 1.5
        assert (t.data() == 1.5).all()


def test_assign_non_contiguous_and_read_only_inputs():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = Tensor.from_numpy(base[:, ::2].T)  # a strided view: copied into a contiguous buffer
    np.testing.assert_array_equal(t.data(), base[:, ::2].T)
    assert t.data().flags.c_contiguous
    ro = np.ones(3)
    ro.setflags(write=False)
    t.share_external(ro)  # wrapping read-only memory is allowed; reads work
    assert t.data().sum() == 3


@given(
    st.lists(st.text(max_size=3), min_size=0, max_size=5),
    st.lists(st.tuples(st.sampled_from(["extend", "resize", "shrink"]), st.integers(0, 6)), max_size=6),
)
def test_string_tensors_through_resize_and_extend(values, steps):
    t = Tensor.from_numpy(np.array(values, dtype=object) if values else np.empty(0, dtype=object))
    model = [v.encode() for v in values]
    for op, n in steps:
        if op == "extend":
            t.extend(n)
            model += [None] * n  # new rows: b"" or stale (unspecified), as in Caffe2
        elif op == "shrink" and n <= len(model):
            t.shrink_to(n)
            model = model[:n]
        elif op == "resize":
            kept = t.capacity_nbytes >= n * 8
            t.resize(n)
            t.mutable_data()
            model = (model + [None] * n)[:n] if kept else [b""] * n
        data = t.data()
        assert data.shape == (len(model),) and all(isinstance(x, bytes) for x in data)
        assert [x for x, m in zip(data, model) if m is not None] == [m for m in model if m is not None]


@given(
    first=st.integers(0, 64),
    dims=st.lists(st.integers(0, 6), min_size=0, max_size=3),
    dtype=st.sampled_from([np.float32, np.float64, np.int32, np.uint8]),
    keep=st.booleans(),
    slack=st.one_of(st.none(), st.integers(0, 256)),
)
def test_view_within_is_resize_and_mutable_data_when_the_buffer_is_kept(first, dims, dtype, keep, slack):
    """Tensor.view_within (Operator.output's fast path for shared blobs) re-views the buffer exactly as
    resize + mutable_data would, and declines (None, tensor untouched) whenever those would let the
    buffer go. Where the element type changes, resize counts the bytes in the old type; view_within keeps
    the buffer whenever it holds the new bytes under the shrink policy (a shared buffer whose last occupant
    was an int64 shape serves the next float32 activation)."""
    saved = (tensor_mod.OPTIONS.keep_on_shrink, tensor_mod.OPTIONS.max_keep_on_shrink_bytes)
    tensor_mod.OPTIONS.keep_on_shrink, tensor_mod.OPTIONS.max_keep_on_shrink_bytes = keep, slack
    try:
        dims = tuple(dims)
        numel = math.prod(dims)
        meta = TypeMeta.of(dtype)
        fast, full = Tensor((first,)), Tensor((first,))
        fast.mutable_data(np.float32)
        full.mutable_data(np.float32)
        storage, before = fast.storage, (fast.dims, fast.version)
        with Allocs() as a:
            got = fast.view_within(dims, meta, numel, numel * meta.itemsize)
            assert a.now == 0
        nbytes, cap = numel * meta.itemsize, storage.capacity
        fits = cap >= nbytes and (numel == first or (keep and (slack is None or cap - nbytes <= slack)))
        assert (got is not None) == fits
        full_storage = full.storage
        full.resize(dims)
        want = full.mutable_data(dtype)
        if meta.itemsize != 4:
            if got is not None:
                assert got.shape == dims and got.dtype == dtype and got.ctypes.data == storage.buffer.ctypes.data
            return
        if got is None:
            assert (tuple(fast.dims), fast.version) == (tuple(before[0]), before[1]) and fast.storage is storage
            assert full.storage is not full_storage  # declined only where the full path lets the buffer go
        else:
            assert full.storage is full_storage and fast.storage is storage
            assert got.shape == want.shape == dims and got.dtype == want.dtype
            assert got.ctypes.data == storage.buffer.ctypes.data
            assert tuple(fast.dims) == dims and fast.numel == numel and fast.version == before[1] + 1
            assert fast.data() is got
    finally:
        tensor_mod.OPTIONS.keep_on_shrink, tensor_mod.OPTIONS.max_keep_on_shrink_bytes = saved
