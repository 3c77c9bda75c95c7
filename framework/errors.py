"""The framework's exception types.

Every error the framework raises on bad input derives from FrameworkError, so
callers (and the CLI) can tell a user mistake from a bug; it is a RuntimeError
as Caffe2's enforce failures are. Messages say what was
expected, what arrived, and where (op, blob, file and line).
"""

from __future__ import annotations

import sys
from typing import Sequence, TypeVar


class FrameworkError(RuntimeError):
    """Base of every error the framework raises deliberately.

    A RuntimeError, as Caffe2's failed enforce checks are (Caffe2 code catches
    RuntimeError); each subclass keeps its own second base (ShapeError is also a
    ValueError, BlobNotFoundError a KeyError...).
    """


class TypeMismatchError(FrameworkError, TypeError):
    """A blob or tensor holds another type than the caller asked for."""


class UninitializedError(FrameworkError, RuntimeError):
    """A tensor or blob was read before it held any data."""


class ShapeError(FrameworkError, ValueError):
    """Dimensions that do not fit the operation."""


class SerializationError(FrameworkError, ValueError):
    """A BlobProto/TensorProto that cannot be encoded or decoded."""


class ProtoParseError(FrameworkError, ValueError):
    """A protobuf file or string that does not parse (names file, line, column)."""


class BlobNotFoundError(FrameworkError, KeyError):
    """A blob name that the workspace does not hold."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ArgumentError(FrameworkError, ValueError):
    """An operator argument that is missing, of the wrong type or out of range."""


class SchemaError(FrameworkError, ValueError):
    """An OperatorDef that violates its op's schema (arity, in-place rules)."""


class UnknownOperatorError(FrameworkError, KeyError):
    """An op type that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OperatorError(FrameworkError, RuntimeError):
    """An error raised while an operator ran, with the op's context."""

    # where it happened, set by the net that ran the op (net.api.operator_error)
    op_index: int | None = None
    op_type: str | None = None
    net_name: str | None = None
    cause_is_user_error = False  # the op raised a FrameworkError (bad input), not an internal bug
    secondary_errors: Sequence[BaseException] = ()  # the dag executor's later errors of the same run


class NetError(FrameworkError, RuntimeError):
    """A net that cannot be created or run."""

    # set on the error for nets nested too deep: raised as is through the levels above, not wrapped per level
    nesting = False


class GradientError(FrameworkError, RuntimeError):
    """A gradient that cannot be made (no maker, destroyed inputs...)."""


class DBError(FrameworkError, IOError):
    """A database that cannot be opened, read or written."""


class ResourceLimitError(FrameworkError, MemoryError):
    """A request for more memory (or threads, or bytes) than the configured limit allows."""


class PathNotAllowedError(FrameworkError, PermissionError):
    """A file write outside the folders the workspace allows (its root folder and allow_paths)."""


class ModelError(FrameworkError, AssertionError):
    """A model built inconsistently (a parameter re-created with another shape...); an AssertionError
    too, because Caffe2 asserts there and Caffe2 programs catch that."""


class OrphanStopGradientError(GradientError, ValueError):
    """A StopGradient whose output no later op reads (it stops nothing); a ValueError too, as in Caffe2."""


_MIXED: dict[tuple[type, type], type] = {}
_E = TypeVar("_E", bound=BaseException)


def error_like(user_cls: type, base: type[_E], message: str) -> _E:
    """A ``base`` error (e.g. OperatorError) that is also an instance of ``user_cls``, the type of an exception
    user code raised inside the framework (a Python op's function), so both ``except base`` and ``except
    user_cls`` catch it, as Caffe2 re-raises a Python op's own exception type. When the two classes cannot be
    combined (incompatible C layouts), a plain ``base`` error. The object's ``user_error_type`` is ``user_cls``.
    """
    key = (user_cls, base)
    cls: type[_E] | None = _MIXED.get(key)
    if cls is None:
        if issubclass(base, user_cls):
            cls = base
        else:
            try:
                cls = type(user_cls.__name__, (base, user_cls), {"__module__": user_cls.__module__})
            except TypeError:
                cls = base
        _MIXED[key] = cls
    try:
        err = cls.__new__(cls, message)
    except TypeError:  # e.g. OSError subclasses, whose __new__ refuses another base's layout
        _MIXED[key] = cls = base
        err = cls.__new__(cls, message)
    BaseException.__init__(err, message)  # not the user class's own __init__, whose signature is its own
    err.user_error_type = user_cls  # type: ignore[attr-defined]
    return err


def add_note(err: BaseException, note: str) -> None:
    """``err.add_note(note)`` (Python >= 3.11, shown under the traceback); on 3.10 the note is kept in
    ``err.__notes__`` as 3.11 keeps it, where tools that know the attribute find it."""
    if sys.version_info >= (3, 11):
        err.add_note(note)
    else:
        notes = getattr(err, "__notes__", None)
        if notes is None:
            notes = []
            err.__notes__ = notes  # type: ignore[attr-defined]
        notes.append(note)
