"""A linear-time full-match regular expression engine (a Thompson NFA simulated over state sets).

Python's ``re`` backtracks: ``(a+)+$`` on a string of 30 ``a`` and one ``b`` takes minutes, so a
pattern read from a model file could hang the process. ``LinearRegex(pattern).fullmatch(s)`` costs
O(len(s) * states) whatever the pattern, as RE2 (ONNX's regex syntax) does. The pattern is parsed
with Python's own parser (``re._parser``, the syntax RE2 shares with it); constructs RE2 does not
have and that need backtracking (backreferences, lookarounds, conditionals, atomic groups and
possessive repeats) are refused. As in RE2: ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII; ``$``
matches only at the end of the text; ``(?i)`` and ``(?s)`` are honoured (``.`` excludes ``\\n`` otherwise).
Counted repeats are unrolled; a pattern of more than ``MAX_STATES`` states is refused (RE2 limits its
program size too).

>>> LinearRegex(r"(a+)+$").fullmatch("a" * 40 + "b")
False
"""

from __future__ import annotations

import re
from typing import Any, Callable

try:  # Python 3.11+
    from re import _constants as C
    from re import _parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

MAX_STATES = 100_000

_DIGIT = frozenset("0123456789")
_WORD = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_SPACE = frozenset("\t\n\v\f\r ")
_CATEGORY = {
    C.CATEGORY_DIGIT: lambda ch: ch in _DIGIT,
    C.CATEGORY_NOT_DIGIT: lambda ch: ch not in _DIGIT,
    C.CATEGORY_WORD: lambda ch: ch in _WORD,
    C.CATEGORY_NOT_WORD: lambda ch: ch not in _WORD,
    C.CATEGORY_SPACE: lambda ch: ch in _SPACE,
    C.CATEGORY_NOT_SPACE: lambda ch: ch not in _SPACE,
}
_ANCHORS = frozenset(
    (C.AT_BEGINNING, C.AT_BEGINNING_STRING, C.AT_END, C.AT_END_STRING, C.AT_BOUNDARY, C.AT_NON_BOUNDARY)
)
_REFUSED = {
    C.GROUPREF: "backreferences",
    C.ASSERT: "lookaround assertions",
    C.ASSERT_NOT: "lookaround assertions",
    C.GROUPREF_EXISTS: "conditional groups",
}
for _name in ("ATOMIC_GROUP", "POSSESSIVE_REPEAT"):
    if hasattr(C, _name):
        _REFUSED[getattr(C, _name)] = "atomic groups and possessive repeats"

# a state: (kind, payload, next): "char" (predicate, next), "split" (None, [targets]),
# "at" (anchor, next), "match"
_CHAR, _SPLIT, _AT, _MATCH = 0, 1, 2, 3


class LinearRegex:
    """A compiled pattern; ``re.error`` (or ValueError for refused constructs) at construction."""

    def __init__(self, pattern: str) -> None:
        parsed = P.parse(pattern)
        flags = parsed.state.flags
        if flags & re.MULTILINE:
            raise ValueError("the (?m) flag is not supported")
        self._states: list[list[Any]] = [[_MATCH, None, None]]
        self._start = self._seq(list(parsed), 0, bool(flags & re.IGNORECASE), bool(flags & re.DOTALL))

    # -- compilation (backwards: each piece is compiled knowing the state after it) --

    def _new(self, kind: int, payload: Any, nxt: Any) -> int:
        if len(self._states) >= MAX_STATES:
            raise ValueError(f"the pattern needs more than {MAX_STATES} states (counted repeats too large)")
        self._states.append([kind, payload, nxt])
        return len(self._states) - 1

    def _seq(self, items: list, nxt: int, icase: bool, dotall: bool) -> int:
        for op, av in reversed(items):
            nxt = self._item(op, av, nxt, icase, dotall)
        return nxt

    def _item(self, op: Any, av: Any, nxt: int, icase: bool, dotall: bool) -> int:
        if op in _REFUSED:
            raise ValueError(f"{_REFUSED[op]} are not supported (RE2 syntax, matched in linear time)")
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return self._new(_CHAR, _predicate(op, av, icase, dotall), nxt)
        if op is C.AT:
            if av not in _ANCHORS:
                raise ValueError(f"anchor {av} is not supported")
            return self._new(_AT, av, nxt)
        if op is C.BRANCH:
            return self._new(_SPLIT, None, [self._seq(list(alt), nxt, icase, dotall) for alt in av[1]])
        if op is C.SUBPATTERN:
            _, add, delete, sub = av
            if add & re.MULTILINE:
                raise ValueError("the (?m) flag is not supported")
            icase = (icase or bool(add & re.IGNORECASE)) and not delete & re.IGNORECASE
            dotall = (dotall or bool(add & re.DOTALL)) and not delete & re.DOTALL
            return self._seq(list(sub), nxt, icase, dotall)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            sub = list(sub)
            if hi is C.MAXREPEAT:
                loop = self._new(_SPLIT, None, [nxt])
                loop_body = self._seq(sub, loop, icase, dotall)
                self._states[loop][2] = [loop_body, nxt]
                nxt = loop
            else:
                for _ in range(hi - lo):  # optional copies: (x(x(x)?)?)?
                    nxt = self._new(_SPLIT, None, [self._seq(sub, nxt, icase, dotall), nxt])
            for _ in range(lo):
                nxt = self._seq(sub, nxt, icase, dotall)
            return nxt
        raise ValueError(f"regular expression construct {op} is not supported")

    # -- matching --

    def fullmatch(self, text: str) -> bool:
        """Whether the whole of ``text`` matches (O(len(text) * states))."""
        current = self._closure([self._start], text, 0)
        for i, ch in enumerate(text):
            if not current:
                return False
            step = [st[2] for st in (self._states[s] for s in current) if st[0] == _CHAR and st[1](ch)]
            current = self._closure(step, text, i + 1)
        return any(self._states[s][0] == _MATCH for s in current)

    def _closure(self, starts: list[int], text: str, pos: int) -> list[int]:
        """The states reachable from ``starts`` without reading a character, at position ``pos``."""
        seen: set[int] = set()
        out: list[int] = []
        stack = list(reversed(starts))
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind, payload, nxt = self._states[s]
            if kind == _SPLIT:
                stack.extend(reversed(nxt))
            elif kind == _AT:
                if _anchor_holds(payload, text, pos):
                    stack.append(nxt)
            else:
                out.append(s)
        return out


def _predicate(op: Any, av: Any, icase: bool, dotall: bool) -> Callable[[str], bool]:
    if op is C.ANY:
        return (lambda ch: True) if dotall else (lambda ch: ch != "\n")
    if op in (C.LITERAL, C.NOT_LITERAL):
        want = {chr(av), chr(av).lower(), chr(av).upper()} if icase else {chr(av)}
        return (lambda ch: ch in want) if op is C.LITERAL else (lambda ch: ch not in want)
    negate = False
    tests: list[Callable[[str], bool]] = []
    for kind, value in av:
        if kind is C.NEGATE:
            negate = True
        elif kind is C.LITERAL:
            char = chr(value)
            tests.append(lambda ch, c=char: ch == c)
        elif kind is C.RANGE:
            tests.append(lambda ch, lo=value[0], hi=value[1]: lo <= ord(ch) <= hi)
        elif kind is C.CATEGORY and value in _CATEGORY:
            tests.append(_CATEGORY[value])
        else:
            raise ValueError(f"character class item {kind} {value} is not supported")

    def inside(ch: str) -> bool:
        if any(t(ch) for t in tests):
            return True
        return icase and any(t(c) for c in {ch.lower(), ch.upper()} - {ch} for t in tests)

    return (lambda ch: not inside(ch)) if negate else inside


def _anchor_holds(anchor: Any, text: str, pos: int) -> bool:
    if anchor in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
        return pos == 0
    if anchor in (C.AT_END, C.AT_END_STRING):
        return pos == len(text)
    before = pos > 0 and text[pos - 1] in _WORD
    after = pos < len(text) and text[pos] in _WORD
    return before != after if anchor is C.AT_BOUNDARY else before == after
