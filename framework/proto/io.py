"""Reading and writing protos (NetDef, PlanDef, ...) as files, text or binary.

Caffe2's ``ReadProtoFromFile`` tries the binary wire format first and falls
back to text. Plain binary-first is not safe on its own: many byte strings
(including some text) decode as a binary proto made only of *unknown* fields.
So the rule here is:

1. Decode as binary. If that succeeds and no message anywhere in the result
   has unknown fields, it is a binary file (Caffe2's order).
2. Otherwise, if the bytes are UTF-8 text that parses in the text format, it
   is a text file. 2018-era text spells ``DeviceOption`` field 2 ``cuda_gpu_id``,
   later files ``device_id``; both are accepted.
3. Otherwise, if the binary decode succeeded and set at least one known
   top-level field, it is a binary file from a newer schema; its unknown
   fields are kept (and written back by ``write_binary``).
4. Otherwise the file is neither: ``ProtoParseError`` naming the file, and
   for text-looking content the line and column of the text error.

Empty or all-whitespace input is an empty message (two spaces would also
decode as the binary field 4 = 32; the text reading is the meaningful one).

>>> net = parse_text('name: "n" op { input: "X" output: "Y" type: "Relu" }', NetDef)
>>> net.op[0].type
'Relu'
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import TypeVar

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from framework.errors import ProtoParseError
from framework.proto.framework_pb2 import NetDef, PlanDef

M = TypeVar("M", bound=Message)

__all__ = [
    "normalize_text",
    "parse_bytes",
    "parse_text",
    "read_net",
    "read_plan",
    "read_proto",
    "write_binary",
    "write_text",
]

# One pass over the text: string literals and comments are matched (and kept)
# so that ``cuda_gpu_id`` is only rewritten where it is a field name.
_TOKENS = re.compile(
    r"""(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<comment>\#[^\n]*)"""
    r"""|(?P<legacy>\bcuda_gpu_id\b)(?=[ \t\r\n]*:)"""
)
# Same length as "cuda_gpu_id", so line and column numbers of errors stay true.
_NEW_NAME = "device_id  "


def normalize_text(text: str) -> str:
    """Rewrite the 2018 field name ``cuda_gpu_id`` to ``device_id`` (field 2 of DeviceOption).

    Occurrences inside string literals and comments are left alone.
    """
    if "cuda_gpu_id" not in text:
        return text
    return _TOKENS.sub(lambda m: _NEW_NAME if m.group("legacy") else m.group(0), text)


def _label(source: str | os.PathLike | None) -> str:
    return os.fspath(source) if source is not None else "<string>"


def parse_text(text: str | bytes, message_cls: type[M], source: str | os.PathLike | None = None) -> M:
    """Parse protobuf text format into a new ``message_cls``.

    Raises ProtoParseError "<source>:<line>:<column>: <what>" on a syntax or
    field error.
    """
    label = _label(source)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _error(
                f"{label}: not UTF-8 text (bad byte at offset {e.start}); expected a {_name(message_cls)} "
                "in protobuf text format",
                label,
            ) from e
    msg = message_cls()
    try:
        text_format.Parse(normalize_text(text), msg)
    except RecursionError:
        raise _error(
            f"{label}: blocks are nested too deeply to parse (a {_name(message_cls)} in text format)", label
        ) from None
    except text_format.ParseError as e:
        line, col = e.GetLine(), e.GetColumn()
        what = str(e)
        prefix = f"{line}:{col} : "
        if what.startswith(prefix):
            what = what[len(prefix) :]
        opened = _unclosed_brace(text) if what.startswith('Expected "}"') else None
        if opened is not None:
            what = f"the file ends inside the block opened at line {opened[0]} ({opened[1]!r}): expected a closing '}}'"
        msg = f"{label}:{line}:{col}: {what} (parsing a {_name(message_cls)} in text format)"
        raise _error(msg, label, line, col) from e
    return msg


def _unclosed_brace(text: str) -> tuple[int, str] | None:
    """(line, text) of the last '{' left open at the end of ``text`` (strings and # comments skipped)."""
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        quote = None
        for i, ch in enumerate(line):
            if quote:
                if ch == quote and line[i - 1] != "\\":
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch in "{<":
                stack.append((number, line.strip()))
            elif ch in "}>" and stack:
                stack.pop()
    return stack[-1] if stack else None


def _looks_like_text(data: bytes) -> bool:
    """UTF-8 with no control bytes but tab/newline/return: a text file, never binary protobuf."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 32 and c not in "\t\n\r" for c in text)


def parse_bytes(data: bytes, message_cls: type[M], source: str | os.PathLike | None = None) -> M:
    """Decode ``data`` as binary or text, auto-detected by the rule in the module doc."""
    label = _label(source)
    if not data or (data[:1] in b" \t\r\n" and not data.strip(b" \t\r\n")):  # (no copy of a big binary file)
        return message_cls()
    binary: M | None = message_cls()
    binary_error = None
    try:
        binary.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        binary, binary_error = None, e
    if binary is not None:
        bad = _non_utf8_field(binary)
        if bad is not None:
            raise _error(
                f"{label}: field {bad} of the binary {_name(message_cls)} is not valid UTF-8 "
                "(names must be text; refusing to guess a name)",
                label,
            )
    if binary is not None and not _has_unknown_fields(binary):
        return binary
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    text_error = None
    if text is not None:
        try:
            return parse_text(text, message_cls, source=label)
        except ProtoParseError as e:
            text_error = e
    if binary is not None and binary.ListFields():
        return binary  # a newer schema's binary file: keep its unknown fields
    why_binary = f"binary decode failed ({binary_error})" if binary_error else "binary decode found only unknown fields"
    if text_error is not None:
        if _looks_like_text(data):  # a text file with a mistake: the binary attempt is noise
            raise text_error
        msg = f"{text_error} [also not a binary {_name(message_cls)}: {why_binary}]"
        raise _error(msg, label, text_error.line, text_error.column) from text_error
    raise _error(
        f"{label}: neither a binary nor a text {_name(message_cls)}: {why_binary}, and the content is not UTF-8 text",
        label,
    ) from binary_error


def _non_utf8_field(msg: Message, path: str = "") -> str | None:
    """The path of the first string field holding bytes that are not UTF-8 (the binary parser
    hands them over as bytes), or None.

    Only string fields and nested messages are visited: numeric fields (a weight's 25 M floats)
    cannot hold text and are never walked value by value.
    """
    for fd, value in msg.ListFields():
        kind = fd.type
        if kind != FieldDescriptor.TYPE_STRING and kind != FieldDescriptor.TYPE_MESSAGE:
            continue
        where = f"{path}.{fd.name}" if path else fd.name
        if kind == FieldDescriptor.TYPE_STRING:
            if not fd.is_repeated:
                if not isinstance(value, str):
                    return where
                continue
            for i, v in enumerate(value):
                if not isinstance(v, str):
                    return f"{where}[{i}]"
            continue
        if not fd.is_repeated:
            bad = _non_utf8_field(value, where)
            if bad is not None:
                return bad
            continue
        for i, v in enumerate(value):
            bad = _non_utf8_field(v, f"{where}[{i}]")
            if bad is not None:
                return bad
    return None


def read_proto(path: str | os.PathLike, message_cls: type[M]) -> M:
    """Read a ``message_cls`` from a binary (.pb) or text (.pbtxt) file, auto-detected.

    >>> net = read_proto("predict_net.pbtxt", NetDef)  # doctest: +SKIP
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise _error(f"{_label(path)}: cannot read {_name(message_cls)} file: {e.strerror}", _label(path)) from e
    return parse_bytes(data, message_cls, source=path)


def read_net(path: str | os.PathLike) -> NetDef:
    """A NetDef from a binary or text file."""
    return read_proto(path, NetDef)


def read_plan(path: str | os.PathLike) -> PlanDef:
    """A PlanDef from a binary or text file."""
    return read_proto(path, PlanDef)


def write_text(message: Message, path: str | os.PathLike) -> None:
    """Write ``message`` in protobuf text format (atomically: temp file + rename)."""
    _atomic_write(path, text_format.MessageToString(message).encode("utf-8"))


def write_binary(message: Message, path: str | os.PathLike) -> None:
    """Write ``message`` in the binary wire format (atomically: temp file + rename)."""
    _atomic_write(path, message.SerializeToString())


def _atomic_write(path: str | os.PathLike, data: bytes) -> None:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 is for the temporary name; the file gets open()'s mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _error(msg: str, source: str, line: int | None = None, column: int | None = None) -> ProtoParseError:
    """A ProtoParseError with ``source``, ``line`` and ``column`` attributes (None when not text)."""
    err = ProtoParseError(msg)
    err.source, err.line, err.column = source, line, column
    return err


def _has_unknown_fields(msg: Message) -> bool:
    if len(UnknownFieldSet(msg)):
        return True
    for field, value in msg.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        if field.is_repeated:
            if any(_has_unknown_fields(v) for v in value):
                return True
        elif _has_unknown_fields(value):
            return True
    return False


def _name(message_cls: type[Message]) -> str:
    return message_cls.DESCRIPTOR.name
