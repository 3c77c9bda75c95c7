"""The bad-input matrix: hostile cases generated for any registered op type from its schema.

A case is (inputs, args, outputs): input values (numpy arrays, strings, None = an empty blob),
arguments to set on the OperatorDef, and output names. ``run_case`` runs it on a fresh
workspace and returns a violation text or None. The rules, for every case:

- the op may succeed (a hostile-looking case can be valid input);
- if it fails, the error is a FrameworkError raised on purpose: an OperatorError must wrap a
  FrameworkError (never a raw numpy/Python IndexError, ValueError, MemoryError...), and an op
  that could not be created must say so itself (not "X while creating the op");
- a failure leaves the workspace exactly as it was: same blobs, same types, same shapes,
  same bytes (outputs not created, existing outputs and in-place state untouched).

Everything is generated from the registry, so an op registered tomorrow is covered tomorrow.
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterator, NamedTuple

import numpy as np

from framework.errors import FrameworkError, NetError, OperatorError
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops.schema import BOOL, FLOAT, FLOATS, INT, INTS, STRING, STRINGS, OpSchema
from framework.proto.framework_pb2 import NetDef, OperatorDef

NON_UTF8 = b"\xff\xfe\x80bad"
HUGE = 10**12


class Case(NamedTuple):
    label: str
    inputs: tuple  # one value per input (np.ndarray, bytes/str, or None for an empty blob)
    args: tuple  # (name, value) pairs; value typed as the Argument field to set
    n_out: int
    preset_outputs: bool = False  # outputs exist beforehand with data of their own
    inplace: tuple = ()  # (input, output) pairs run in place (the output is the input's blob)


def _counts(spec: Any, limit: int = 8) -> list[int]:
    """Counts accepted by a count spec, up to ``limit``."""
    from framework.ops.schema import _count_ok

    return [n for n in range(limit + 1) if _count_ok(spec, n)]


def _bad_counts(spec: Any, limit: int = 8) -> list[int]:
    ok = set(_counts(spec, limit + 2))
    return [n for n in range(limit + 1) if n not in ok][:3]


def _fill(value: Any, n: int) -> tuple:
    return tuple(value() if callable(value) else value for _ in range(n))


def _f32(shape: tuple, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32) if shape else np.float32(0.5) * np.ones((), np.float32)


# Value families: each builds one input value (varied by position so shapes differ where it matters).
VALUES: dict[str, Any] = {
    "f32": lambda k: _f32((2, 3), k),
    "f64": lambda k: _f32((2, 3), k).astype(np.float64),
    "i32": lambda k: np.arange(6, dtype=np.int32).reshape(2, 3),
    "i64": lambda k: np.arange(6, dtype=np.int64).reshape(2, 3),
    "u8": lambda k: np.arange(6, dtype=np.uint8).reshape(2, 3),
    "bool": lambda k: np.array([[True, False, True], [False, True, False]]),
    "str": lambda k: np.array([b"a", NON_UTF8, b""], dtype=object),
    "scalar": lambda k: np.float32(1.5) * np.ones((), np.float32),
    "empty": lambda k: np.zeros((0,), np.float32),
    "zero_dim": lambda k: np.zeros((2, 0, 3), np.float32),
    "rank1": lambda k: _f32((5,), k),
    "rank5": lambda k: _f32((1, 2, 1, 2, 3), k),
    "nan_inf": lambda k: np.array([[np.nan, np.inf, -np.inf], [0.0, 1.0, -1.0]], np.float32),
    "neg_idx": lambda k: np.array([-5, 0, 1], np.int64),
    "big_idx": lambda k: np.array([0, 10**9, 2], np.int64),
    "neg_lengths": lambda k: np.array([3, -1], np.int32),
    "rank4": lambda k: _f32((1, 2, 3, 3), k),
    "rank4_mismatch": lambda k: _f32((1, 2, 3, 3), k) if k % 2 == 0 else _f32((2, 3, 2, 2), k),
}


def _arg_cases(schema: OpSchema) -> Iterator[tuple[str, tuple]]:
    """Bad argument values per declared argument: wrong kinds, out of range, huge, non-UTF-8."""
    for name, a in schema.args.items():
        kind = a.kind
        if kind == INT or kind == BOOL:
            yield f"{name}=-1", ((name, -1),)
            yield f"{name}=0", ((name, 0),)  # zero kernels, strides, sizes: a division by zero if unchecked
            yield f"{name}=huge", ((name, HUGE),)
            yield f"{name}=99", ((name, 99),)
            yield f"{name}=str", ((name, NON_UTF8),)
        elif kind == FLOAT:
            yield f"{name}=nan", ((name, math.nan),)
            yield f"{name}=-inf", ((name, -math.inf),)
            yield f"{name}=-1.0", ((name, -1.0),)
            yield f"{name}=str", ((name, NON_UTF8),)
        elif kind == INTS:
            yield f"{name}=[huge]", ((name, [HUGE, HUGE]),)
            yield f"{name}=[-1]", ((name, [-1, -7]),)
            yield f"{name}=[0]", ((name, [0, 0]),)
            yield f"{name}=[]", ((name, []),)
            yield f"{name}=[99]", ((name, [99, 99, 99, 99, 99, 99]),)
            yield f"{name}=floats", ((name, [0.5]),)
        elif kind == FLOATS:
            yield f"{name}=[nan]", ((name, [math.nan, math.inf]),)
            yield f"{name}=[]", ((name, []),)
            yield f"{name}=str", ((name, NON_UTF8),)
        elif kind == STRING:
            yield f"{name}=non-utf8", ((name, NON_UTF8),)
            yield f"{name}=unknown", ((name, b"no_such_thing"),)
            yield f"{name}=int", ((name, 3),)
        elif kind == STRINGS:
            yield f"{name}=[non-utf8]", ((name, [NON_UTF8]),)
            yield f"{name}=int", ((name, 3),)


MAX_ARG_CASES = 40


def _capped(arg_cases: Iterator[tuple[str, tuple]], limit: int) -> list[tuple[str, tuple]]:
    """At most ``limit`` argument cases, round-robin over the arguments (each gets its first
    hostile value before any gets a second), so ops with many arguments stay fast."""
    by_arg: dict[str, list] = {}
    for label, args in arg_cases:
        by_arg.setdefault(args[0][0], []).append((label, args))
    out: list[tuple[str, tuple]] = []
    depth = 0
    while len(out) < limit and any(depth < len(v) for v in by_arg.values()):
        for v in by_arg.values():
            if depth < len(v) and len(out) < limit:
                out.append(v[depth])
        depth += 1
    return out


# The landing gate runs a fixed sample of each op's matrix (every op, at most this many cases,
# spread evenly over the whole list); FRAMEWORK_ADVERSARIAL_FULL=1 runs every case.
MAX_CASES_PER_OP = 32


def cases(schema: OpSchema) -> Iterator[Case]:
    """The bad-input matrix of one op type (a fixed sample unless FRAMEWORK_ADVERSARIAL_FULL=1)."""
    every = list(all_cases(schema))
    if os.environ.get("FRAMEWORK_ADVERSARIAL_FULL") == "1" or len(every) <= MAX_CASES_PER_OP:
        return iter(every)
    step = len(every) / MAX_CASES_PER_OP
    return iter(every[int(k * step)] for k in range(MAX_CASES_PER_OP))


def all_cases(schema: OpSchema) -> Iterator[Case]:
    """Every case of the bad-input matrix of one op type."""
    in_counts = _counts(schema.num_inputs) or [0]
    out_counts = _counts(schema.num_outputs) or [1]
    n_in = in_counts[0]
    n_out = out_counts[0]
    n_in_more = in_counts[-1] if len(in_counts) > 1 else None
    # wrong input and output counts
    for n in _bad_counts(schema.num_inputs):
        yield Case(f"inputs={n}", _fill(lambda: _f32((2, 3)), n), (), n_out)
    for n in _bad_counts(schema.num_outputs):
        yield Case(f"outputs={n}", _fill(lambda: _f32((2, 3)), n_in), (), n)
    counts = [n_in] + ([n_in_more] if n_in_more is not None and n_in_more != n_in else [])
    for n in counts:
        if n == 0:
            continue
        # every input of one family
        for fam, make in VALUES.items():
            yield Case(f"all-{fam} x{n}", tuple(make(k) for k in range(n)), (), n_out)
        # one input hostile, the others plain floats
        if n > 1:
            for j in sorted({0, 1, 2, n - 1} & set(range(n))):
                for fam in ("i64", "str", "empty", "rank1", "rank5", "big_idx", "nan_inf"):
                    vals = tuple(VALUES[fam](k) if k == j else VALUES["f32"](k) for k in range(n))
                    yield Case(f"in{j}-{fam} x{n}", vals, (), n_out)
        # an empty blob (no tensor) and a non-tensor blob
        yield Case(f"uninitialized x{n}", (None,) + tuple(VALUES["f32"](k) for k in range(1, n)), (), n_out)
        yield Case(f"string-blob x{n}", ("text",) + tuple(VALUES["f32"](k) for k in range(1, n)), (), n_out)
    # in place (optimizer state, activations): one other input hostile; the in-place input must survive
    pairs = _inplace_pairs(schema, n_in, n_out)
    if pairs:
        for j in range(n_in):
            for fam in ("str", "rank5", "empty", "big_idx"):
                vals = tuple(VALUES[fam](k) if k == j else VALUES["rank4"](k) for k in range(n_in))
                yield Case(f"inplace {pairs} in{j}-{fam}", vals, (), n_out, inplace=pairs)
    # bad arguments, on plain float inputs; outputs existing beforehand (must stay untouched)
    base = tuple(VALUES["rank4"](k) for k in range(n_in))
    for label, args in _capped(_arg_cases(schema), MAX_ARG_CASES):
        yield Case(f"arg {label}", base, args, n_out, preset_outputs=True)
    yield Case("arg unknown-kind", base, tuple((name, [b"x", b"y"]) for name in list(schema.args)[:3]), n_out)


def _inplace_pairs(schema: OpSchema, n_in: int, n_out: int) -> tuple:
    """In-place (input, output) pairs the schema allows for these counts (one output per input)."""
    pairs, used = [], set()
    for o in range(n_out):
        for i in range(n_in):
            if i not in used and schema.inplace_allowed(i, o):
                pairs.append((i, o))
                used.add(i)
                break
    return tuple(pairs)


# -- running -----------------------------------------------------------------------------------


def _set_arg(op: OperatorDef, name: str, value: Any) -> None:
    a = op.arg.add()
    a.name = name
    if isinstance(value, NetDef):
        a.n.CopyFrom(value)
    elif isinstance(value, bool):
        a.i = int(value)
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, float):
        a.f = value
    elif isinstance(value, bytes):
        a.s = value
    elif isinstance(value, list):
        if all(isinstance(v, int) for v in value):
            a.ints.extend(value)
        elif all(isinstance(v, float) for v in value):
            a.floats.extend(value)
        else:
            a.strings.extend(value)


_SANDBOX: list[str] = []


def sandbox() -> str:
    """A temporary root folder for the cases' workspaces (ops writing files write there only)."""
    if not _SANDBOX:
        import atexit
        import shutil
        import tempfile

        _SANDBOX.append(tempfile.mkdtemp(prefix="framework-adversarial-"))
        atexit.register(shutil.rmtree, _SANDBOX[0], True)
    return _SANDBOX[0]


def build(schema: OpSchema, case: Case) -> tuple[Workspace, OperatorDef]:
    ws = Workspace(root_folder=sandbox(), allow_paths=())  # confined, as the CLI runs nets from files
    op = OperatorDef(type=schema.type)
    op.input.extend(f"in{k}" for k in range(len(case.inputs)))
    outs = [f"out{k}" for k in range(case.n_out)]
    for i, o in schema.enforced_pairs(len(case.inputs), case.n_out) + list(case.inplace):
        outs[o] = f"in{i}"
    op.output.extend(outs)
    for name, value in case.args:
        _set_arg(op, name, value)
    for name, value in zip(op.input, case.inputs):
        if value is None:
            ws.create_blob(name)
        else:
            ws.feed_blob(name, value)
    if case.preset_outputs:
        for k, name in enumerate(outs):
            if not ws.has_blob(name):
                ws.feed_blob(name, np.full((3,), 7.0 + k, np.float32))
    return ws, op


def snapshot(ws: Workspace) -> dict[str, Any]:
    """Everything observable about the blobs: names, types, shapes, dtypes, bytes."""
    out: dict[str, Any] = {}
    for name in ws.blobs():
        obj = ws.get_blob(name)._obj
        if isinstance(obj, Tensor):
            arr = obj._array if obj._array is not None else None
            if arr is None and obj.is_allocated:
                arr = obj.data()
            content = None
            if arr is not None:
                content = arr.tobytes() if arr.dtype != object else repr(arr.tolist())
            out[name] = ("Tensor", obj.dims if obj.is_initialized else None, str(obj.dtype), content)
        else:
            out[name] = (type(obj).__name__, id(obj), repr(obj)[:200])
    return out


def check_error(e: BaseException) -> str | None:
    """None if ``e`` is a deliberate FrameworkError; else what is wrong with it."""
    if not isinstance(e, FrameworkError):
        return f"raw {type(e).__name__}: {str(e)[:300]}"
    if isinstance(e, OperatorError) and not getattr(e, "cause_is_user_error", True):
        cause = e.__cause__
        return f"OperatorError wrapping raw {type(cause).__name__}: {str(cause)[:300]}"
    if isinstance(e, NetError) and "while creating the op" in str(e):
        return f"raw error while creating the op: {str(e)[:300]}"
    return None


def run_case(schema: OpSchema, case: Case) -> str | None:
    """Run one case; a violation text or None."""
    ws, op = build(schema, case)
    before = snapshot(ws)
    try:
        run_operator_once(ws, op)
    except Exception as e:
        bad = check_error(e)
        if bad:
            return bad
        after = snapshot(ws)
        if after != before:
            changed = sorted(set(before) ^ set(after) | {k for k in before if k in after and before[k] != after[k]})
            return f"failed ({type(e).__name__}) but changed blobs {changed}"
    return None
