"""Tensor: dims + TypeMeta + a shared Storage, with Caffe2's memory semantics.

- Lazy allocation: ``resize`` records the shape; memory is allocated on the
  first ``mutable_data``.
- ``resize`` keeps the buffer when the element count shrinks (keep-on-shrink,
  capped by ``TensorOptions.max_keep_on_shrink_bytes``) and drops it when it
  must grow, so the next ``mutable_data`` reallocates.
- ``reshape`` changes dims only, with the same element count.
- ``extend`` grows the outer dimension with amortized O(1) reallocation.
- ``data``/``mutable_data`` return numpy views of the storage, never copies.

>>> t = Tensor()
>>> t.resize(2, 3)
>>> t.is_allocated
False
>>> t.mutable_data(np.float32).shape
(2, 3)
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from framework.errors import ShapeError, TypeMismatchError, UninitializedError
from framework.memory.storage import Storage
from framework.memory.typemeta import STRING, TypeMeta
from framework.runtime.state import RUNTIME


@dataclass
class TensorOptions:
    """Process-wide tensor memory policy (Caffe2's keep_on_shrink flags)."""

    keep_on_shrink: bool = True
    max_keep_on_shrink_bytes: int | None = None  # None: no cap
    zero_fill: bool = True


OPTIONS = RUNTIME.held("memory.tensor_options", TensorOptions)  # RUNTIME.reset() restores the defaults


def _as_dims(dims: tuple) -> tuple[int, ...]:
    if len(dims) == 1 and isinstance(dims[0], (list, tuple, np.ndarray)):
        dims = tuple(dims[0])
    try:
        out = tuple(operator.index(d) for d in dims)
    except TypeError as e:
        raise ShapeError(f"tensor dimensions must be integers, got {tuple(dims)!r}") from e
    for d in out:
        if d < 0:
            raise ShapeError(f"tensor dimensions must be >= 0, got {out}")
    return out


def _numel(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _storage_itemsize(storage: Storage, meta: TypeMeta) -> int:
    """Bytes one element takes in ``storage``: object storage holds 8-byte references."""
    return 8 if storage.is_object else meta.itemsize


# The slots ``Tensor.snapshot()`` saves, in its order (a test checks they are all of Tensor's slots).
SNAPSHOT_FIELDS = ("_dims", "_numel", "_meta", "_storage", "_spare", "_array", "_shares_data", "_reserved", "version")


class Tensor:
    """An n-dimensional array over a shareable, lazily allocated Storage."""

    __slots__ = (
        "_dims",
        "_numel",
        "_meta",
        "_storage",
        "_array",
        "_shares_data",
        "_reserved",
        "_spare",
        "version",
        "__weakref__",
    )

    def __init__(self, dims: Iterable[int] | None = None, dtype: Any = None) -> None:
        self._dims: tuple[int, ...] = ()
        self._numel = -1  # -1: never resized (uninitialized)
        self._meta: TypeMeta | None = TypeMeta.of(dtype) if dtype is not None else None
        self._storage: Storage | None = None
        self._array: np.ndarray | None = None  # cached view of the storage
        self._shares_data = False
        self._reserved = False
        self._spare: Storage | None = None  # the buffer displaced by the last resize_aside
        self.version = 0  # bumped by every mutable_data: tells caches they are stale
        if dims is not None:
            self.resize(tuple(dims))

    # -- construction helpers ----------------------------------------------
    @classmethod
    def from_numpy(cls, array: Any) -> Tensor:
        """A new tensor holding a copy of ``array``."""
        t = cls()
        t.assign(array)
        return t

    # -- shape ----------------------------------------------------------------
    @property
    def dims(self) -> tuple[int, ...]:
        return self._dims

    shape = dims

    @property
    def ndim(self) -> int:
        return len(self._dims)

    @property
    def numel(self) -> int:
        """Element count; -1 for a tensor never resized."""
        return self._numel

    size = numel

    def dim(self, i: int) -> int:
        return self._dims[self.canonical_axis_index(i)]

    def canonical_axis_index(self, axis: int) -> int:
        nd = len(self._dims)
        if not -nd <= axis < max(nd, 1):
            raise ShapeError(f"axis {axis} is out of range for a tensor of {nd} dims {self._dims}")
        return axis + nd if axis < 0 else axis

    def size_from_dim(self, k: int) -> int:
        return _numel(self._dims[k:])

    def size_to_dim(self, k: int) -> int:
        return _numel(self._dims[:k])

    @property
    def is_initialized(self) -> bool:
        """True once the tensor has a shape."""
        return self._numel >= 0

    @property
    def is_allocated(self) -> bool:
        return self._storage is not None and self._meta is not None

    @property
    def meta(self) -> TypeMeta | None:
        return self._meta

    @property
    def dtype(self) -> np.dtype | None:
        return self._meta.dtype if self._meta is not None else None

    @property
    def itemsize(self) -> int:
        return self._meta.itemsize if self._meta is not None else 0

    @property
    def nbytes(self) -> int:
        return max(self._numel, 0) * self.itemsize

    @property
    def capacity_nbytes(self) -> int:
        return self._storage.capacity if self._storage is not None else 0

    @property
    def shares_data(self) -> bool:
        return self._shares_data

    @property
    def storage(self) -> Storage | None:
        return self._storage

    # -- the surface other layers use instead of the slots ----------------------------------------
    @property
    def array(self) -> np.ndarray | None:
        """The numpy view of the current shape and type, as cached (None before the first
        ``data``/``mutable_data`` after a change); no check, no version bump: the run path's read."""
        return self._array

    def snapshot(self) -> tuple:
        """Every slot's value (SNAPSHOT_FIELDS): what ``restore`` puts back, e.g. an op's rollback. The
        buffers are shared, not copied: a snapshot restores shape, type, storage and version, not bytes
        written into the same storage since."""
        return (
            self._dims,
            self._numel,
            self._meta,
            self._storage,
            self._spare,
            self._array,
            self._shares_data,
            self._reserved,
            self.version,
        )

    def restore(self, snap: tuple) -> None:
        """Put back the state ``snapshot()`` returned."""
        (
            self._dims,
            self._numel,
            self._meta,
            self._storage,
            self._spare,
            self._array,
            self._shares_data,
            self._reserved,
            self.version,
        ) = snap

    def view_state(self) -> tuple:
        """The fields that make the current view of the buffer (shape, count, type, view)."""
        return self._dims, self._numel, self._meta, self._array

    def set_view_state(self, state: tuple) -> None:
        """Re-point the tensor at a view ``view_state()`` returned (of the same storage: the memory
        planner's shared buffers, viewed in turn by ops of different shapes)."""
        self._dims, self._numel, self._meta, self._array = state

    def resize(self, *dims: Any) -> None:
        """Record a new shape; drop the buffer only if it cannot hold it (or policy says so)."""
        new_dims = _as_dims(dims)
        if new_dims == self._dims and self._numel >= 0:
            return
        new_numel = _numel(new_dims)
        if new_numel != self._numel and self._storage is not None:
            needed = new_numel * (self._meta.itemsize if self._meta is not None else 0)
            cap = self._storage.capacity
            if self._storage.is_object:
                needed = new_numel * 8
            free = cap < needed
            if not self._reserved and not free:
                slack_cap = OPTIONS.max_keep_on_shrink_bytes
                free = not OPTIONS.keep_on_shrink or (slack_cap is not None and cap - needed > slack_cap)
            if free:
                self._storage = None
                self._shares_data = False
                self._reserved = False
        self._dims = new_dims
        self._numel = new_numel
        self._array = None

    def resize_like(self, other: Tensor) -> None:
        self.resize(other._dims)

    def reshape(self, *dims: Any) -> None:
        """Change dims keeping the storage; the element count must not change (one -1 allowed)."""
        if self._numel < 0:
            raise UninitializedError("reshape(): tensor is not initialized; call resize() first")
        raw = dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple, np.ndarray)) else dims
        try:
            raw = [operator.index(d) for d in raw]
        except TypeError as e:
            raise ShapeError(f"reshape: dimensions must be integers, got {tuple(raw)!r}") from e
        if raw.count(-1) > 1:
            raise ShapeError(f"reshape to {tuple(raw)}: at most one dimension may be -1")
        if -1 in raw:
            known = _numel(tuple(d for d in raw if d != -1))
            if known == 0 or self._numel % known:
                raise ShapeError(f"cannot reshape a tensor of {self._numel} elements {self._dims} to {tuple(raw)}")
            raw[raw.index(-1)] = self._numel // known
        new_dims = _as_dims(tuple(raw))
        if _numel(new_dims) != self._numel:
            raise ShapeError(
                f"reshape from {self._dims} ({self._numel} elements) to {new_dims} ({_numel(new_dims)} elements): "
                "the element count must stay the same; use resize to change it"
            )
        self._dims = new_dims
        if self._array is not None:
            self._array = self._array.reshape(new_dims)

    # -- data access ------------------------------------------------------------
    def data(self, dtype: Any = None) -> np.ndarray:
        """A numpy view of the data (no copy). Raises if unallocated or of another type."""
        arr = self._array
        if arr is None:
            arr = self._build_view("data")
        if dtype is not None:
            meta = TypeMeta.of(dtype)
            if meta is not self._meta:
                held = self._meta.name if self._meta is not None else "nothing"
                raise TypeMismatchError(
                    f"tensor type mismatch: caller expects elements to be {meta.name} while tensor contains {held}"
                )
        return arr

    def _build_view(self, what: str) -> np.ndarray:
        if self._numel < 0:
            raise UninitializedError(f"{what}(): tensor is not initialized; call resize() first")
        if self._storage is None or self._meta is None:
            raise UninitializedError(
                f"{what}(): tensor of shape {self._dims} has no data yet; call mutable_data() first"
            )
        self._array = self._storage.view(self._meta.dtype, self._numel, self._dims)
        return self._array

    def mutable_data(self, dtype: Any = None) -> np.ndarray:
        """A writable numpy view of the storage, allocating it on first use.

        ``dtype`` defaults to the tensor's current type. A change between plain
        types reuses the buffer when it is large enough.
        """
        meta = self._meta if dtype is None else TypeMeta.of(dtype)
        self.version += 1
        arr = self._array
        if arr is not None and meta is self._meta:
            return arr
        if meta is None:
            raise UninitializedError("mutable_data(): the tensor has no element type yet; pass a dtype")
        if self._numel < 0:
            raise UninitializedError("mutable_data(): tensor is not initialized; call resize() first")
        storage = self._storage
        if storage is not None:
            if meta.is_pod:
                fits = not storage.is_object and storage.capacity >= self._numel * meta.itemsize
            else:
                fits = storage.is_object and meta is self._meta and len(storage.buffer) >= self._numel
            if not fits:
                storage = None
        if storage is None:
            if meta.is_pod:
                storage = Storage.allocate(self._numel * meta.itemsize, OPTIONS.zero_fill)
            else:
                storage = Storage.allocate_objects(self._numel, meta.ctor() if meta.ctor else None)
            self._storage = storage
            self._shares_data = False
            self._reserved = False
        self._meta = meta
        self._array = storage.view(meta.dtype, self._numel, self._dims)
        return self._array

    def free_memory(self) -> None:
        """Drop the buffer (and the spare one); keep shape and type."""
        self._storage = None
        self._spare = None
        self._array = None
        self._shares_data = False
        self._reserved = False

    def view_within(self, dims: tuple[int, ...], meta: TypeMeta, numel: int, nbytes: int) -> np.ndarray | None:
        """``resize(dims)`` + ``mutable_data(meta)`` when the current buffer holds ``nbytes`` and resize
        would keep it: the tensor re-viewed over that buffer, without either call's checks (the caller
        validated ``dims``, ``numel`` = their product and ``nbytes`` when it first made them). None when
        the buffer does not do (the caller then takes the full path). Operator.output's fast path for
        outputs that change shape from run to run in one buffer (the memory planner's shared blobs)."""
        st, dtype = self._storage, meta.dtype
        if st is None or st.is_object or not meta.is_pod or dtype is None:
            return None
        cap = st.buffer.nbytes
        if cap < nbytes:
            return None
        if numel != self._numel:
            # resize's shrink policy, counted in the bytes the buffer is about to hold: a shared buffer whose
            # last occupant had wider elements (an int64 shape output before a float32 activation) still fits
            slack = OPTIONS.max_keep_on_shrink_bytes
            if not self._reserved and (not OPTIONS.keep_on_shrink or (slack is not None and cap - nbytes > slack)):
                return None
        arr = st.buffer[:nbytes].view(dtype).reshape(dims)
        self._dims, self._numel, self._meta, self._array = dims, numel, meta, arr
        self.version += 1
        return arr

    def resize_aside(self, dims: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Resize to ``dims`` of ``dtype`` without touching the current buffer's bytes (a caller may
        need them back, e.g. to roll back a failed op): the data goes to the spare buffer (the one the
        previous call displaced) when it fits, else to a new buffer as large as the largest seen, and the
        current buffer becomes the spare. A blob that alternates between shapes thus settles on two
        buffers and allocates nothing more."""
        old, spare = self._storage, self._spare
        meta = TypeMeta.of(dtype)
        if old is None or self._shares_data or old.is_object or not meta.is_pod:
            self.free_memory()
            self.resize(dims)
            return self.mutable_data(dtype)
        self.free_memory()
        self.resize(dims)
        need = max(self._numel, 0) * meta.itemsize
        if spare is not None and spare is not old and not spare.is_object and spare.capacity >= need:
            self._storage = spare
        else:
            biggest = max(need, old.capacity, spare.capacity if spare is not None else 0)
            self._storage = Storage.allocate(biggest, OPTIONS.zero_fill)
        self._spare = old
        return self.mutable_data(dtype)

    # -- growing and shrinking the outer dimension ---------------------------
    def _require_allocated(self, what: str) -> tuple[Storage, TypeMeta]:
        """The storage and element type of a tensor that has data and at least one dimension."""
        storage, meta = self._storage, self._meta
        if not self.is_allocated or storage is None or meta is None:
            raise UninitializedError(f"{what}: the tensor must have data (call mutable_data first)")
        if not self._dims:
            raise ShapeError(f"{what}: needs at least one dimension, the tensor is a scalar")
        return storage, meta

    def extend(self, num: int, growth_pct: float = 40) -> None:
        """Grow the outer dimension by ``num``, keeping the data; amortized O(1)."""
        storage, meta = self._require_allocated("extend")
        if num < 0:
            raise ShapeError(f"extend: num must be >= 0, got {num}")
        old_outer = self._dims[0]
        new_dims = (old_outer + num, *self._dims[1:])
        new_numel = _numel(new_dims)
        if storage.capacity >= new_numel * _storage_itemsize(storage, meta):
            self._dims, self._numel, self._array = new_dims, new_numel, None
            return
        outer = max(new_dims[0], math.ceil(old_outer * (100 + growth_pct) / 100))
        self._regrow(outer)
        self._dims, self._numel, self._array = new_dims, new_numel, None

    def reserve_space(self, outer_dim: int) -> None:
        """Make room for ``outer_dim`` rows without changing the logical shape."""
        storage, meta = self._require_allocated("reserve_space")
        inner = _numel(self._dims[1:])
        if storage.capacity >= outer_dim * inner * _storage_itemsize(storage, meta):
            return
        self._regrow(outer_dim)
        self._array = None

    def shrink_to(self, outer_dim: int) -> None:
        """Lower the outer dimension without reallocating. Refused on shared storage."""
        if self._shares_data:
            raise ShapeError("shrink_to: the tensor shares its storage with another; shrinking would change both")
        if not self._dims:
            raise ShapeError("shrink_to: needs at least one dimension, the tensor is a scalar")
        if not 0 <= outer_dim <= self._dims[0]:
            raise ShapeError(f"shrink_to({outer_dim}): must be between 0 and the outer dimension {self._dims[0]}")
        self._dims = (outer_dim, *self._dims[1:])
        self._numel = _numel(self._dims)
        self._array = None

    def _regrow(self, outer: int) -> None:
        storage, meta = self._require_allocated("regrow")
        count = outer * _numel(self._dims[1:])
        old = storage.view(meta.dtype, self._numel, (self._numel,))
        if meta.is_pod:
            grown = Storage.allocate(count * meta.itemsize, OPTIONS.zero_fill)
        else:
            grown = Storage.allocate_objects(count, meta.ctor() if meta.ctor else None)
        grown.view(meta.dtype, self._numel, (self._numel,))[...] = old
        self._storage = grown
        self._shares_data = False
        self._reserved = True

    # -- sharing and copying ----------------------------------------------------
    def share_data(self, other: Tensor) -> None:
        """Make this tensor use ``other``'s storage (and type). Element counts must match."""
        if not other.is_allocated:
            raise UninitializedError("share_data: the source tensor has no data yet")
        if self._numel < 0:
            self._dims, self._numel = other._dims, other._numel
        elif self._numel != other._numel:
            raise ShapeError(
                f"share_data: size mismatch ({self._numel} vs {other._numel} elements); "
                "did you call reshape before sharing the data?"
            )
        self._storage = other._storage
        self._meta = other._meta
        self._shares_data = True
        other._shares_data = True
        self._reserved = False
        self._array = None
        self.version += 1

    def share_external(self, array: np.ndarray) -> None:
        """Wrap a C-contiguous numpy array without copying; writes go to ``array``."""
        if not isinstance(array, np.ndarray):
            raise TypeMismatchError(f"share_external expects a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise ShapeError(
                f"share_external needs a C-contiguous array to wrap without copying; got shape {array.shape} "
                f"with strides {array.strides}. Pass np.ascontiguousarray(array) (a copy) or use assign()"
            )
        meta = TypeMeta.of(array.dtype)
        if meta is STRING and array.dtype != object:
            raise TypeMismatchError("share_external: string tensors need an object array of bytes")
        flat = array.reshape(-1)
        buffer = flat if meta is STRING else flat.view(np.uint8)
        self._storage = Storage(buffer, external=True)
        self._meta = meta
        self._dims = tuple(array.shape)
        self._numel = array.size
        self._shares_data = True
        self._reserved = False
        self._array = None
        self.version += 1

    def copy_from(self, other: Tensor) -> None:
        """Copy type, shape and data of ``other``."""
        src = other.data()
        self.resize(other._dims)
        dst = self.mutable_data(other._meta)
        np.copyto(dst, src)

    def assign(self, value: Any) -> None:
        """Copy a numpy array (or array-like, scalar, strings) into this tensor.

        Reuses the current buffer when shape and type are unchanged, so a
        re-fill of the same shape allocates nothing.
        """
        arr = as_tensor_array(value)
        self.resize(arr.shape)
        dst = self.mutable_data(arr.dtype)
        np.copyto(dst, arr)

    def numpy(self) -> np.ndarray:
        """A copy of the data as a numpy array."""
        return self.data().copy()

    def __repr__(self) -> str:
        if self._numel < 0:
            return "Tensor(uninitialized)"
        t = self._meta.name if self._meta is not None else "?"
        state = "" if self.is_allocated else ", unallocated"
        return f"Tensor(dims={list(self._dims)}, type={t}{state})"


def as_tensor_array(value: Any) -> np.ndarray:
    """Normalize a feedable value to an array a tensor can hold.

    Strings (str, bytes, numpy S/U arrays, object arrays of str/bytes) become
    object arrays of bytes (str is UTF-8 encoded); numeric values keep numpy's
    dtype (a Python float is float64), as Caffe2's FeedBlob keeps the array's
    dtype. Raises TypeMismatchError for element types a tensor cannot hold.
    """
    try:
        arr = np.asarray(value)
    except ValueError as e:
        raise ShapeError(f"cannot make a tensor of {type(value).__name__}: {e}") from e
    if arr.dtype.kind in "SUO":
        out = np.empty(arr.shape, dtype=object)
        for idx, item in np.ndenumerate(arr):
            if isinstance(item, str):
                out[idx] = item.encode("utf-8")
            elif isinstance(item, (bytes, bytearray, memoryview)):
                out[idx] = bytes(item)
            else:
                raise TypeMismatchError(
                    f"string tensors hold str or bytes elements; element {list(idx)} is a {type(item).__name__}"
                )
        return out
    TypeMeta.of(arr.dtype)  # raises for dtypes a tensor cannot hold
    return arr
