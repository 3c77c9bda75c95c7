"""Read an op's (or a net's) arguments by name without its schema: the one reader outside ``parse_args``.

``ArgReader(op_def)`` follows Caffe2's ``ArgumentHelper``: ``has(name)``, ``has_single(name, kind)`` (a
singular field set, convertible to ``kind``), ``single(name, default, kind)`` (absent: ``default``; a list
where one value belongs, or a value ``kind`` cannot hold: ArgumentError naming the op and the argument),
``repeated(name, default, kind)`` (the list; a single value is a list of one). ``kind`` is a schema kind
(``INT``, ``FLOAT``, ``BOOL``, ``STRING``, ``INTS``...) and converts as ``parse_args`` does (an int for a
float is fine, 2.5 for an int is not, bytes decode as UTF-8). ``value(name, default)`` is the raw value with
a string decoded, for readers that take whatever is set; ``as_dict()`` is Caffe2's ``utils.ArgsToDict``.

When an argument is given twice, the first one is read (as every loop over ``op.arg`` that stopped at the
first match did); ``parse_args`` is where a net's duplicate arguments are reported.

>>> from framework.core import CreateOperator
>>> r = ArgReader(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, pads=[1, 1, 1, 1], order="NCHW"))
>>> r.single("kernel", kind=INT), r.repeated("pads", kind=INTS), r.value("order"), r.single("stride", 1)
(3, [1, 1, 1, 1], 'NCHW', 1)
"""

from __future__ import annotations

from typing import Any, Iterable

from framework.errors import ArgumentError
from framework.ops.arguments import convert, raw_value
from framework.ops.schema import INT, INTS, NET, TENSOR  # noqa: F401  (INT, INTS: the module doc's example)

__all__ = ["ArgReader"]

_SINGULAR = ("f", "i", "s", "n", "t")
_MESSAGE_FIELD = {NET: "n", TENSOR: "t"}


class ArgReader:
    """See module doc. ``source`` is an OperatorDef or NetDef (anything with ``.arg``) or a list of Arguments;
    ``where`` names it in errors (default: the op's type and name)."""

    def __init__(self, source: Any, where: str | None = None) -> None:
        protos = source.arg if hasattr(source, "arg") else source
        self._protos: Iterable[Any] = protos
        self._source = source
        self._where = where

    @property
    def where(self) -> str:
        """What errors name (described when first needed: most readers never raise)."""
        if self._where is None:
            self._where = _describe(self._source)
        return self._where

    def _get(self, name: str) -> Any:
        """The first Argument named ``name``, None if absent (a scan: an op has a handful of arguments and a
        reader is mostly asked once)."""
        for a in self._protos:
            if a.name == name:
                return a
        return None

    def has(self, name: str) -> bool:
        return self._get(name) is not None

    def names(self) -> list[str]:
        """The names of the arguments given, in order (each once)."""
        return list(dict.fromkeys(a.name for a in self._protos))

    def proto(self, name: str) -> Any:
        """The Argument proto named ``name`` (None if absent)."""
        return self._get(name)

    def has_single(self, name: str, kind: str | None = None) -> bool:
        """Is ``name`` given as one value (a singular field), convertible to ``kind`` when given?"""
        a = self._get(name)
        if a is None or not any(a.HasField(f) for f in _SINGULAR):
            return False
        if kind is None:
            return True
        if kind in _MESSAGE_FIELD:
            return a.HasField(_MESSAGE_FIELD[kind])
        try:
            convert(name, kind, raw_value(a), self.where)
        except ArgumentError:
            return False
        return True

    def single(self, name: str, default: Any = None, kind: str | None = None) -> Any:
        """The one value of ``name`` (``default`` when absent), converted to ``kind`` when given."""
        a = self._get(name)
        if a is None:
            return default
        if not any(a.HasField(f) for f in _SINGULAR):
            raise ArgumentError(f"{self.where}: argument '{name}' holds a list, a single value was expected")
        v = raw_value(a)
        return v if kind is None else convert(name, kind, v, self.where)

    def repeated(self, name: str, default: Any = None, kind: str | None = None) -> list:
        """The values of ``name`` as a list (``default``, else [], when absent), converted to ``kind``."""
        a = self._get(name)
        if a is None:
            return [] if default is None else list(default)
        v = raw_value(a)
        v = v if isinstance(v, list) else [v]
        return v if kind is None else convert(name, kind, v, self.where)

    def value(self, name: str, default: Any = None) -> Any:
        """Whatever ``name`` holds (a byte string decoded), ``default`` when absent."""
        a = self._get(name)
        if a is None:
            return default
        v = raw_value(a)
        return v.decode() if isinstance(v, bytes) else v

    def as_dict(self) -> dict:
        """{name: value of the first field set, in the Argument message's field order (a repeated field as
        its container; None when nothing is set)}, later duplicates winning: Caffe2's ``utils.ArgsToDict``."""
        out: dict = {}
        for arg in self._protos:
            if not arg.HasField("name"):
                continue
            out[arg.name] = None
            for d in arg.DESCRIPTOR.fields:
                if d.name == "name":
                    continue
                repeated = d.is_repeated if hasattr(d, "is_repeated") else d.label == d.LABEL_REPEATED
                if repeated and len(getattr(arg, d.name)) > 0 or not repeated and arg.HasField(d.name):
                    out[arg.name] = getattr(arg, d.name)
                    break
        return out


def _describe(source: Any) -> str:
    name = getattr(source, "name", "")
    if hasattr(source, "op"):  # a NetDef (its ``type`` is the executor's)
        return f"net '{name}'" if name else "net"
    if hasattr(source, "type"):
        return f"op {source.type}" + (f" '{name}'" if name else "")
    return "arguments"
