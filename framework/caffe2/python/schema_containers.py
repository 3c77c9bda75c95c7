"""The container fields of Caffe2's record schema (``framework.caffe2.python.schema`` re-exports them):
``List`` (``lengths`` + ``values``), ``ListWithEvicted`` (+ ``_evicted_values``) and ``Struct``
(ordered named children; ``'a:b'`` names nest, ``+`` merges, ``-`` removes, ``[...]`` indexes by
nested name, position or a list of them).
"""

from __future__ import annotations

from collections import OrderedDict
from io import StringIO
from itertools import islice
from typing import Any

import numpy as np

from framework.caffe2.python.schema_fields import (
    FIELD_SEPARATOR,
    Field,
    Metadata,
    Scalar,
    _join_field_name,
    _normalize_field,
)


class List(Field):
    """A variable-length list per record: ``lengths`` (int32) then the concatenated ``values``.
    Attributes of a Struct of values are reachable on the list (``lst.a`` is ``lst.values.a``)."""

    def __init__(self, values: Any, lengths_blob: Any = None) -> None:
        if isinstance(lengths_blob, Field):
            if not isinstance(lengths_blob, Scalar):
                raise TypeError("lengths must be a Scalar")
            self.lengths = _normalize_field(lengths_blob)
        else:
            self.lengths = Scalar(np.int32, lengths_blob)
        self._items = _normalize_field(values)
        self.lengths._set_parent(self, 0)
        self._items._set_parent(self, 1)
        Field.__init__(self, self._parts())

    def _parts(self) -> list[Field]:
        return [self.lengths, self._items]

    def _part_names(self) -> list[str]:
        return ["lengths", "values"]

    def field_names(self) -> list[str]:
        return [_join_field_name(n, s) for n, p in zip(self._part_names(), self._parts()) for s in p.field_names()]

    def field_types(self) -> list[np.dtype]:
        return [t for p in self._parts() for t in p.field_types()]

    def field_metadata(self) -> list[Metadata | None]:
        return [m for p in self._parts() for m in p.field_metadata()]

    def field_blobs(self) -> list[Any]:
        return [b for p in self._parts() for b in p.field_blobs()]

    def all_scalars(self) -> list[Scalar]:
        return [s for p in self._parts() for s in p.all_scalars()]

    def has_blobs(self) -> bool:
        return all(p.has_blobs() for p in self._parts())

    def clone(self, keep_blobs: bool = True) -> List:
        return type(self)(_normalize_field(self._items, keep_blobs), _normalize_field(self.lengths, keep_blobs))

    @property
    def values(self) -> Field:
        """The list's items; for a list of Structs with a ``values`` field (a Map), that field, as
        Caffe2's attribute lookup into a Struct item gives (``id_score_list.values()`` is the scores)."""
        if isinstance(self._items, Struct) and "values" in self._items.fields:
            return self._items.fields["values"]
        return self._items

    def _pprint_impl(self, indent: int, out: StringIO) -> None:
        out.write("  " * indent + type(self).__name__ + "(\n")
        for name, part in zip(["lengths", "_items", "_evicted_values"], self._parts()):
            out.write("  " * (indent + 1) + name + "=\n")
            part._pprint_impl(indent + 2, out)
        out.write("  " * indent + ")\n")

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__") or item in ("_items", "lengths", "_evicted_values", "_parent", "_field_offsets"):
            raise AttributeError(item)
        if isinstance(self._items, Struct):
            return getattr(self._items, item)
        if item in ("value", "items"):
            return self._items
        raise AttributeError(f"Field not found in list: {item}.")

    def __getitem__(self, item: str) -> Field:
        names = item.split(FIELD_SEPARATOR, 1)
        if len(names) == 1:
            for name, part in zip(self._part_names(), self._parts()):
                if item == name:
                    return part
        elif names[0] == "values":
            return self._items[names[1]]
        raise KeyError(f"Field not found in list: {item}.")


class ListWithEvicted(List):
    """A List with an extra int64 ``_evicted_values`` field (LRU hashing)."""

    def __init__(self, values: Any, lengths_blob: Any = None, evicted_values: Any = None) -> None:
        if isinstance(evicted_values, Field):
            if not isinstance(evicted_values, Scalar):
                raise TypeError("evicted_values must be a Scalar")
            self._evicted_values = _normalize_field(evicted_values)
        else:
            self._evicted_values = Scalar(np.int64, evicted_values)
        super().__init__(values, lengths_blob=lengths_blob)

    def _parts(self) -> list[Field]:
        return [self.lengths, self._items, self._evicted_values]

    def _part_names(self) -> list[str]:
        return ["lengths", "values", "_evicted_values"]

    def clone(self, keep_blobs: bool = True) -> ListWithEvicted:
        return type(self)(
            _normalize_field(self._items, keep_blobs),
            _normalize_field(self.lengths, keep_blobs),
            _normalize_field(self._evicted_values, keep_blobs),
        )


class Struct(Field):
    """Named fields sharing one domain, in order. ``('b:c', f)`` nests (as ``('b', Struct(('c', f)))``);
    two Structs given the same name merge; any other repeated name is a ValueError. Frozen after
    construction (no attribute assignment)."""

    def __init__(self, *fields: tuple[str, Any]) -> None:
        for field in fields:
            if len(field) != 2:
                raise ValueError(f"a Struct field is a (name, field) pair, got {field!r}")
            if not field[0]:
                raise ValueError("Field names cannot be empty")
            if field[0] == "lengths":
                raise ValueError("Struct cannot contain a field named `lengths`.")
        self.fields: OrderedDict[str, Field] = OrderedDict()
        for name, value in fields:
            field = _normalize_field(value)
            if FIELD_SEPARATOR in name:
                head, rest = name.split(FIELD_SEPARATOR, 1)
                for part in reversed(rest.split(FIELD_SEPARATOR)):
                    field = Struct((part, field))
                name = head
            if name not in self.fields:
                self.fields[name] = field
                continue
            if not isinstance(field, Struct) or not isinstance(self.fields[name], Struct):
                raise ValueError(f"Duplicate field name: {name}")
            self.fields[name] = self.fields[name] + field
        for i, field in enumerate(self.fields.values()):
            field._set_parent(self, i)
        Field.__init__(self, self.fields.values())
        self._frozen = True

    def get_children(self) -> list[tuple[str, Field]]:
        return list(self.fields.items())

    def field_names(self) -> list[str]:
        return [_join_field_name(n, s) for n, f in self.fields.items() for s in f.field_names()]

    def field_types(self) -> list[np.dtype]:
        return [t for f in self.fields.values() for t in f.field_types()]

    def field_metadata(self) -> list[Metadata | None]:
        return [m for f in self.fields.values() for m in f.field_metadata()]

    def field_blobs(self) -> list[Any]:
        return [b for f in self.fields.values() for b in f.field_blobs()]

    def all_scalars(self) -> list[Scalar]:
        return [s for f in self.fields.values() for s in f.all_scalars()]

    def has_blobs(self) -> bool:
        return all(f.has_blobs() for f in self.fields.values())

    def clone(self, keep_blobs: bool = True) -> Struct:
        return type(self)(*[(k, _normalize_field(v, keep_blobs)) for k, v in self.fields.items()])

    def _get_field_by_nested_name(self, nested_name: str) -> Field | None:
        names = nested_name.split(FIELD_SEPARATOR, 1)
        field = self.fields.get(names[0])
        if field is None or len(names) == 1:
            return field
        try:
            return field[names[1]]
        except (KeyError, TypeError):
            return None

    def _pprint_impl(self, indent: int, out: StringIO) -> None:
        out.write("  " * indent + "Struct( \n")
        for name, field in self.fields.items():
            out.write("  " * (indent + 1) + f"{name}=\n")
            field._pprint_impl(indent + 2, out)
        out.write("  " * indent + ") \n")

    def __contains__(self, item: str) -> bool:
        return self._get_field_by_nested_name(item) is not None

    def __len__(self) -> int:
        return len(self.fields)

    def __iter__(self) -> Any:
        return iter(self.fields.values())

    def __getitem__(self, item: Any) -> Field:
        """A nested name (``'a:b'``), a position among the top-level fields, or a list/tuple of
        them (a new Struct of those fields)."""
        if isinstance(item, (list, tuple)):
            keys = list(self.fields.keys())
            return Struct(*[(keys[k] if isinstance(k, int) else k, self[k]) for k in item])
        if isinstance(item, int):
            return next(islice(self.fields.values(), item, None))
        field = self._get_field_by_nested_name(item)
        if field is None:
            raise KeyError(f'field "{item}" not found')
        return field

    def get(self, item: str, default_value: Any) -> Any:
        return getattr(self, item, default_value)

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        try:
            return self.__dict__["fields"][item]
        except KeyError as e:
            raise AttributeError(item) from e

    def __setattr__(self, key: str, value: Any) -> None:
        if self.__dict__.get("_frozen") and not key.startswith("_"):
            raise TypeError("Struct.__setattr__() is disabled after __init__()")
        super().__setattr__(key, value)

    def __add__(self, other: Any) -> Struct:
        """Merge: fields of ``other`` are appended; a name both have merges recursively when both
        are Structs, else a TypeError."""
        if not isinstance(other, Struct):
            return NotImplemented
        children = OrderedDict(self.get_children())
        for name, right in other.get_children():
            if name not in children:
                children[name] = right
                continue
            left = children[name]
            if not (isinstance(left, Struct) and isinstance(right, Struct)):
                raise TypeError(
                    f"Type of left_field, {type(left)}, and type of right_field, {type(right)}, must both "
                    f"the Struct to allow merging of the field, {name}"
                )
            children[name] = left + right
        return Struct(*children.items())

    def __sub__(self, other: Any) -> Struct:
        """Remove the fields ``other`` names, recursively into Structs; emptied Structs go too."""
        if not isinstance(other, Struct):
            return NotImplemented
        children = OrderedDict(self.get_children())
        for name, right in other.get_children():
            if name not in children:
                continue
            left = children[name]
            if type(left) is not type(right):
                raise TypeError(
                    f"Type of left_field, {type(left)}, is not the same as that of right_field, {type(right)}, "
                    f"yet they have the same field name, {name}"
                )
            if isinstance(left, Struct):
                child = left - right
                if child.get_children():
                    children[name] = child
                    continue
            children.pop(name)
        return Struct(*children.items())
