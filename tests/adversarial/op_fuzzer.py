"""The op fuzzer: every registered op type is first run on input it accepts, then on hostile variants of it.

The bad-input matrix (matrix.py) throws generic bad values at each op; most ops refuse them at the first
declared check, so the code past those checks (value checks, shape arithmetic, the kernel) is never
reached. The fuzzer goes further in two steps, per op type:

1. **Seed search.** Inputs are built from the schema: input and output counts, input names (``lengths``,
   ``indices``, ``lr``, ``iter``...), required arguments (a first choice, the low bound, or a small value),
   several shape families (matrix, vector, NCHW, scalar, integers, strings). A refused attempt is repaired
   from what the error says (``input 1 ('x') must hold integers`` retypes input 1; ``must have rank 4``
   reshapes it; an out-of-range index is wrapped into range, lengths are made to sum as asked...), so
   the search climbs past each declared check. The first input the op accepts is its seed.
2. **Hostile variants of the seed**, one change each: an input emptied, with a zero dim, made 0-d, given
   NaN/inf, negative or huge values, int overflow, another dtype, one rank more or less; an argument set
   to a negative, zero, huge or out-of-range value (dims declared in arguments included). Outputs exist
   beforehand with data of their own, so a failed op that touches them is caught.

Every attempt, seeds included, follows the rules of ``matrix.run_case``: success, or a FrameworkError
raised on purpose (never a raw numpy/Python error, also not one wrapped in an OperatorError) that leaves
every blob as it was; an attempt that runs past ``TIMEOUT_S`` is a hang.

``fuzz_op(schema, full)`` returns an ``OpReport``. The default is a fixed sample (the seed search with a
small budget and ``SAMPLE_VARIANTS`` variants, chosen without randomness); ``full=True`` runs all of it.
"""

from __future__ import annotations

import re
import signal
import threading
import zlib
from typing import Any, Callable, NamedTuple

import numpy as np

from framework.net.api import run_operator_once
from framework.ops.schema import BOOL, FLOAT, FLOATS, INT, INTS, NET, STRING, STRINGS, OpSchema
from framework.proto.framework_pb2 import NetDef
from tests.adversarial.matrix import HUGE, Case, _arg_cases, _counts, _set_arg, build, check_error, snapshot

TIMEOUT_S = 10
SAMPLE_VARIANTS = 6
SEED_REPAIRS = 8  # repairs of one starting point before the next one is tried


class OpReport(NamedTuple):
    op_type: str
    seed: Case | None  # the first accepted input (None: none found)
    cases: int  # attempts run, seed search included
    hostile: int  # hostile variants run
    violations: list[str]
    refusal: str = ""  # no seed found: what the last attempts were refused with

    @property
    def reached(self) -> bool:
        return self.seed is not None and self.hostile > 0


class _Hang(Exception):
    pass


class Made(NamedTuple):
    """An input that is not a tensor: the blob ``op_type`` (a creator such as CreateMutex) makes."""

    op_type: str
    inputs: tuple = ()
    args: tuple = ()


# Creators an op's refusal may name ("expected a Mutex (made by CreateMutex)"), with what they need.
# Common worlds are left out: their ops call into MPI, where a case cannot be interrupted (tests/distributed and
# tests/reliability/test_receive_never_waits_forever.py cover them).
CREATORS: dict[str, Made] = {
    "Int8Quantize": Made(
        "Int8Quantize", (np.array([[0.5, 1.0], [1.5, 2.0], [0.0, 0.25]], np.float32),), (("Y_scale", 0.1),)
    ),
    "IntIndexCreate": Made("IntIndexCreate"),
    "LongIndexCreate": Made("LongIndexCreate"),
    "CreateTreeCursor": Made("CreateTreeCursor", (), (("fields", [b"a"]),)),
    "FbGemmPack": Made("FbGemmPack", (np.ones((3, 2), np.float32),)),
    "CreateMap": Made("CreateMap"),
    **{
        t: Made(t)
        for t in (
            "CreateMutex",
            "CreateCounter",
            "CreateBlobsQueue",
            "CreateTensorVector",
            "TimerBegin",
            "CreateRebatchingQueue",
            "CreateAtomicBool",
            "CreateScope",
            "StatRegistryCreate",
            "Int8QuantSchemeBlobFill",
        )
    },
}


def _make_objects(ws: Any, op: Any, case: Case) -> str:
    """Create the Made inputs of ``case`` in ``ws``; a refusal text if a creator fails."""
    from framework.proto.framework_pb2 import OperatorDef

    for k, value in enumerate(case.inputs):
        if not isinstance(value, Made):
            continue
        made = OperatorDef(type=value.op_type, output=[op.input[k]])
        for j, x in enumerate(value.inputs):
            ws.feed_blob(f"made{k}_{j}", x)
            made.input.append(f"made{k}_{j}")
        for name, v in value.args:
            _set_arg(made, name, v)
        try:
            run_operator_once(ws, made)
        except Exception as e:
            return f"creator {value.op_type} failed: {e}"
    return ""


def compiling() -> bool:
    """Is this thread inside numba's compiler (a kernel compiled or loaded on its first use)? An exception
    raised there, by the hang alarm, leaves numba's code library half built: every later call of that kernel
    in the process fails, so the alarm waits for the compile to end."""
    try:
        from numba.core.compiler_lock import global_compiler_lock
    except ImportError:
        return False
    return global_compiler_lock.is_locked()


def attempt(schema: OpSchema, case: Case) -> tuple[str, str]:
    """Run one case: ("ok", ""), ("refused", message) or ("violation", what is wrong)."""

    def go() -> tuple[str, str]:
        plain = case._replace(inputs=tuple(None if isinstance(v, Made) else v for v in case.inputs))
        ws, op = build(schema, plain)
        failed = _make_objects(ws, op, case)
        if failed:
            return "refused", failed
        before = snapshot(ws)
        try:
            run_operator_once(ws, op)
        except Exception as e:
            if isinstance(e, _Hang) or isinstance(e.__cause__, _Hang):
                return "violation", f"did not finish within {TIMEOUT_S} s"
            bad = check_error(e)
            if bad:
                return "violation", bad
            if snapshot(ws) != before:
                return "violation", f"failed ({type(e).__name__}) but changed blobs"
            return "refused", str(e)
        return "ok", ""

    if threading.current_thread() is not threading.main_thread():
        return go()

    def on_alarm(*_: Any) -> None:
        if compiling():  # a kernel's first-use compile is not the op's time, and must not be interrupted
            signal.alarm(TIMEOUT_S)
            return
        raise _Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TIMEOUT_S)
    try:
        return go()
    except _Hang:
        return "violation", f"did not finish within {TIMEOUT_S} s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- seed inputs ------------------------------------------------------------------------------------


def _f32(shape: tuple, k: int = 0) -> np.ndarray:
    rng = np.random.default_rng(k)
    return (rng.random(shape) + 0.25).astype(np.float32)


def _by_name(name: str, k: int) -> np.ndarray:
    """A plausible value for an input called ``name``: data has 3 rows, indices 3 entries into them,
    lengths sum to 3, so the usual sparse/segment/lengths relations hold together."""
    n = name.lower()
    if "lengths" in n or n in ("segment", "seq_len", "sequence_lens", "split"):
        return np.array([2, 1], np.int32)
    if "segment_ids" in n:
        return np.array([0, 0, 1], np.int32)
    if "indices" in n or n in ("index", "ids", "keys", "positions"):
        return np.array([0, 2, 1], np.int64)
    if n in ("lr", "alpha", "learning_rate", "scale", "beta1", "beta2", "epsilon", "weight_decay"):
        return np.array([0.1], np.float32)
    if n in ("iter", "counter", "timestep", "num_visited", "t", "k"):
        return np.array([1], np.int64)
    if n in ("mask", "condition", "in_presence", "in1_presence", "in2_presence"):
        return np.array([True, False, True])
    if n in ("labels", "label", "targets", "target"):
        return np.array([0, 1, 0], np.int32)
    if n in ("shape", "new_shape", "shape_like"):
        return np.array([3, 2], np.int64)
    if n in ("strings", "tag"):
        return np.array([b"a", b"b", b"c"], dtype=object)
    return _f32((3, 2), k)


STARTS: dict[str, Callable[[OpSchema, int], list]] = {
    "names": lambda s, n: [_by_name(s.input_name(k), k) for k in range(n)],
    "matrix": lambda s, n: [_f32((3, 2), k) for k in range(n)],
    "vector": lambda s, n: [_f32((3,), k) for k in range(n)],
    "nchw": lambda s, n: [_f32((1, 2, 4, 4), k) for k in range(n)],
    "one": lambda s, n: [_f32((1,), k) for k in range(n)],
    "int32": lambda s, n: [np.array([[0, 1], [2, 0], [1, 2]], np.int32) for _ in range(n)],
    "int64": lambda s, n: [np.array([0, 2, 1], np.int64) for _ in range(n)],
    "strings": lambda s, n: [np.array([b"a", b"b", b"c"], dtype=object) for _ in range(n)],
}


def _required_args(schema: OpSchema) -> tuple:
    out = []
    for a in schema.args.values():
        if not a.required:
            continue
        first = sorted(a.choices, key=str)[0] if a.choices else None
        if a.kind in (INT, BOOL):
            out.append((a.name, int(first if first is not None else (a.low if a.low is not None else 1))))
        elif a.kind == FLOAT:
            out.append((a.name, float(first if first is not None else (a.low if a.low is not None else 0.5))))
        elif a.kind == INTS:
            out.append((a.name, [1, 1]))
        elif a.kind == FLOATS:
            out.append((a.name, [0.5]))
        elif a.kind == STRING:
            v = first if first is not None else "x"
            out.append((a.name, v.encode() if isinstance(v, str) else v))
        elif a.kind == STRINGS:
            out.append((a.name, [b"x"]))
        elif a.kind == NET:
            out.append((a.name, NetDef(name=f"fuzz_{a.name}")))
    if "Y_scale" in schema.args and not schema.args["Y_scale"].required:  # quantized ops: the creator's scale
        out.append(("Y_scale", 0.1))
    return tuple(out)


def _arg_candidates(a: Any) -> list:
    """Values to try for an argument a refusal mentions, most plausible first."""
    if a.choices:
        return [c.encode() if isinstance(c, str) else c for c in sorted(a.choices, key=str)]
    return {
        INT: [1, 2, 0, 3],
        BOOL: [1, 0],
        FLOAT: [1.0, 0.5, 0.0],
        INTS: [[2, 2], [1], [1, 1, 1], [0, 1]],
        FLOATS: [[1.0], [0.5, 1.0]],
        STRING: [b"NHWC", b"a"],
        STRINGS: [[b"a"]],
        NET: [NetDef(name=f"fuzz_{a.name}")],
    }.get(a.kind, [])


def _repair_args(schema: OpSchema, args: dict, message: str, tried: dict) -> bool:
    """Set the next candidate value of the first argument the message names (not yet exhausted)."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))
    said = [int(v) for v in re.findall(r"(?<![\w.])(\d{1,4})(?![\w.])", message)]  # sizes the refusal mentions
    for name, a in schema.args.items():
        if name not in words:
            continue
        from_message = {INT: said, INTS: [[v, v] for v in said]}.get(a.kind, []) if not a.choices else []
        done = tried.setdefault(name, [])
        for cand in from_message + _arg_candidates(a):
            if cand not in done:
                done.append(cand)
                args[name] = cand
                return True
    return False


_KINDS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "floats": lambda x: _numeric(x).astype(np.float32),
    "numbers": lambda x: _numeric(x).astype(np.float32),
    "integers": lambda x: _numeric(x).astype(np.int32),
    "integer": lambda x: _numeric(x).astype(np.int64),
    "int32 or int64": lambda x: _numeric(x).astype(np.int64),
    "bools": lambda x: _numeric(x).astype(bool),
    "strings": lambda x: np.array([b"a"] * max(x.size, 1), dtype=object).reshape(x.shape or (1,)),
}


def _numeric(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "O":
        return np.arange(x.size).reshape(x.shape)
    return np.abs(np.nan_to_num(x)).round()


def _with_rank(x: np.ndarray, r: int) -> np.ndarray:
    shape = (3, 2, 2, 2, 2, 2, 2)[:r] if r <= 7 else (1,) * r
    base = x.reshape(-1)[:1] if x.size else np.zeros(1, x.dtype)
    return np.resize(base if x.dtype.kind == "O" else x.reshape(-1) if x.size else base, shape).astype(x.dtype)


_IN = r"input (\d+) \('[^']*'\)"
REPAIRS: list[tuple[re.Pattern, Callable[[list, re.Match], bool]]] = []


def _repair(pattern: str) -> Callable:
    def deco(fn: Callable[[list, re.Match], bool]) -> Callable:
        REPAIRS.append((re.compile(pattern), fn))
        return fn

    return deco


@_repair(_IN + r" must hold ([^,]+?)(?: indices| lengths)?, got")
def _retype(vals: list, m: re.Match) -> bool:
    i, kind = int(m.group(1)), m.group(2).strip()
    if i >= len(vals):
        return False
    fix = _KINDS.get(kind)
    if fix is None:
        names = [t.strip() for t in kind.split(" or ")]
        try:
            dt = np.dtype(names[0])
        except TypeError:
            return False
        fix = lambda x: _numeric(x).astype(dt)  # noqa: E731
    vals[i] = fix(vals[i])
    return True


@_repair(_IN + r" must have rank (?:>= )?(\d+)")
def _rerank(vals: list, m: re.Match) -> bool:
    i, r = int(m.group(1)), int(m.group(2))
    if i >= len(vals) or not isinstance(vals[i], np.ndarray) or vals[i].ndim == r:
        return False
    vals[i] = _with_rank(vals[i], r)
    return True


@_repair(_IN + r" holds (\S+) but " + _IN + r" holds (\S+)")
def _same_type(vals: list, m: re.Match) -> bool:
    i, j = int(m.group(1)), int(m.group(3))
    if max(i, j) >= len(vals):
        return False
    if vals[i].dtype == vals[j].dtype:
        vals[i] = vals[j].copy()  # a shape mismatch worded as a type check elsewhere
    elif vals[j].dtype.kind == "O" or vals[i].dtype.kind == "O":
        vals[i] = vals[j].copy()
    else:
        vals[i] = vals[i].astype(vals[j].dtype)
    return True


@_repair(_IN + r" (?:has shape|holds [^ ]+ \[).*but " + _IN)
def _same_shape(vals: list, m: re.Match) -> bool:
    i, j = int(m.group(1)), int(m.group(2))
    if max(i, j) >= len(vals) or vals[i].shape == vals[j].shape:
        return False
    vals[i] = np.resize(vals[i], vals[j].shape) if vals[i].size else np.zeros(vals[j].shape, vals[i].dtype)
    return True


@_repair(_IN + r" must have shape \[([-\d, ]*)\]")
def _reshape(vals: list, m: re.Match) -> bool:
    i = int(m.group(1))
    shape = tuple(abs(int(d)) for d in m.group(2).split(",") if d.strip())
    if i >= len(vals) or not isinstance(vals[i], np.ndarray) or vals[i].shape == shape:
        return False
    vals[i] = np.resize(vals[i], shape) if vals[i].size else np.zeros(shape, vals[i].dtype)
    return True


@_repair(r"'in(\d+)'[^,;]*? (?:must have shape|has shape \S+, expected) [\[(]([-\d, ]*)[\])]")
def _reshape_named(vals: list, m: re.Match) -> bool:
    return _reshape(vals, m)


@_repair(_IN + r" must hold (\d+) values")
def _resize_values(vals: list, m: re.Match) -> bool:
    return _resize(vals, m)


@_repair(_IN + r" must have (\d+) elements")
def _resize(vals: list, m: re.Match) -> bool:
    i, n = int(m.group(1)), int(m.group(2))
    if i >= len(vals) or not isinstance(vals[i], np.ndarray) or vals[i].size == n:
        return False
    vals[i] = np.resize(vals[i] if vals[i].size else np.zeros(1, vals[i].dtype), (n,))
    return True


@_repair(_IN + r" holds index -?\d+, out of range \[(-?\d+), (\d+)\)")
def _wrap_index(vals: list, m: re.Match) -> bool:
    i, hi = int(m.group(1)), int(m.group(3))
    if i >= len(vals) or not isinstance(vals[i], np.ndarray) or hi <= 0 or vals[i].dtype.kind not in "iu":
        return False
    vals[i] = (np.abs(vals[i]) % hi).astype(vals[i].dtype)
    return True


@_repair(_IN + r" sums to \d+ but must sum to (\d+)")
def _resum(vals: list, m: re.Match) -> bool:
    i, total = int(m.group(1)), int(m.group(2))
    if i >= len(vals) or not isinstance(vals[i], np.ndarray):
        return False
    x = np.zeros(max(vals[i].size, 1), vals[i].dtype)
    x[0] = total
    vals[i] = x
    return True


@_repair(_IN + r" must hold one element")
def _one(vals: list, m: re.Match) -> bool:
    i = int(m.group(1))
    if i >= len(vals) or not isinstance(vals[i], np.ndarray) or vals[i].size == 1:
        return False
    vals[i] = vals[i].reshape(-1)[:1] if vals[i].size else np.ones(1, vals[i].dtype)
    return True


_DTYPE_WORDS = [
    ("float16", np.float16),
    ("uint8", np.uint8),
    ("bool", np.bool_),
    ("int32", np.int32),
    ("int64", np.int64),
    ("integer", np.int64),
    ("int", np.int64),
    ("double", np.float64),
    ("float", np.float32),
]


def _named_input(vals: list, message: str) -> tuple[int, str] | None:
    """The input a message is about (the first blob 'inK' it names) and the text after that name, up to
    what it says was found ("got ...")."""
    m = re.search(r"'in(\d+)'", message)
    i = int(m.group(1)) if m else 0
    if i >= len(vals):
        return None
    clause = message[m.end() :] if m else message
    return i, re.split(r"\b(?:got|found|but)\b", clause)[0]


def _repair_by_name(vals: list, message: str) -> bool:
    """What a free-form refusal asks of the blob it names: a type ("must be a 1-D integer tensor"), a rank
    ("3-D", "needs >= 2 dims") or a shape ("N x C x H x W", "R x 4")."""
    found = _named_input(vals, message)
    if found is None or not isinstance(vals[found[0]], np.ndarray):
        return False
    i, clause = found
    x = vals[i]
    made = next((c for c in CREATORS if c in clause), None)
    if made and "expected" in clause:
        vals[i] = CREATORS[made]
        return True
    y = x
    values = re.search(r"expected (\d+) values", clause)
    if values and x.size != int(values.group(1)):
        vals[i] = np.resize(x if x.size else np.zeros(1, x.dtype), (int(values.group(1)),))
        return True
    want = next((dt for w, dt in _DTYPE_WORDS if re.search(rf"\b{w}\b", clause)), None)
    if want is not None and x.dtype != want:
        y = _numeric(x).astype(want)
    grid = re.search(r"\b([A-Z0-9]+(?: x [A-Z0-9]+)+)\b", clause)
    rank = (
        re.search(r"\b(\d)-D\b", clause)
        or re.search(r"(?:>= |have |must be |at least )(\d+) dims", clause)
        or re.search(r"N-d with N >= (\d+)", clause)
    )
    if grid:
        shape = tuple(int(t) if t.isdigit() else 2 for t in grid.group(1).split(" x "))
        if y.shape != shape:
            y = np.resize(y if y.size else np.zeros(1, y.dtype), shape)
    elif rank and y.ndim != int(rank.group(1)):
        y = _with_rank(y, int(rank.group(1)))
    if y is x:
        return False
    vals[i] = y
    return True


def _repaired(vals: list, message: str) -> bool:
    for pattern, fix in REPAIRS:
        m = pattern.search(message)
        if m and fix(vals, m):
            return True
    return _repair_by_name(vals, message)


def _counts_asked(schema: OpSchema, message: str, n_in: int, n_out: int) -> list[tuple[int, int]]:
    """Input/output counts a refusal asks for ("needs 10 inputs", "has 5 outputs")."""
    out = []
    for m in re.finditer(r"(\d+) (?:x \d+ )?inputs?\b", message):
        if schema.input_count_ok(int(m.group(1))):
            out.append((int(m.group(1)), n_out))
    for m in re.finditer(r"(\d+) outputs?\b", message):
        if schema.output_count_ok(int(m.group(1))):
            out.append((n_in, int(m.group(1))))
    if "second output" in message and schema.output_count_ok(2):
        out.append((n_in, 2))
    return out


def _outputs(schema: OpSchema) -> int:
    outs = _counts(schema.num_outputs)
    return next((n for n in outs if n >= 1), outs[0] if outs else 1)


def _input_counts(schema: OpSchema) -> list[int]:
    ins = _counts(schema.num_inputs)
    return sorted({ins[0], ins[-1]}) if ins else [0]


def seed_search(schema: OpSchema, budget: int, violations: list[str], refusals: list[str]) -> tuple[Case | None, int]:
    """The first accepted case (or None) and the number of attempts; violations and refusals met are appended."""
    required = dict(_required_args(schema))
    work = [(n_in, _outputs(schema)) for n_in in _input_counts(schema)]
    tried = 0
    for n_in, n_out in work:  # grows while refusals name other counts
        for start, make in STARTS.items():
            vals = make(schema, n_in)
            args, arg_tries = dict(required), {}
            for _ in range(SEED_REPAIRS):
                if tried >= budget:
                    return None, tried
                inputs = tuple(v.copy() if isinstance(v, np.ndarray) else v for v in vals)
                case = Case(f"seed {start} x{n_in}", inputs, tuple(args.items()), n_out)
                tried += 1
                status, text = attempt(schema, case)
                if status == "ok":
                    return case, tried
                if status == "violation":
                    violations.append(f"[{case.label}] {text.splitlines()[0][:300]}")
                    break
                refusals.append(text.split("\n", 1)[0])
                work.extend(c for c in _counts_asked(schema, text, n_in, n_out) if c not in work)
                if not (_repaired(vals, text) or _repair_args(schema, args, text, arg_tries)):
                    break
            if n_in == 0 and not arg_tries:
                break
    return None, tried


# -- hostile variants --------------------------------------------------------------------------------


def _input_variants(x: np.ndarray) -> list[tuple[str, np.ndarray]]:
    out: list[tuple[str, np.ndarray]] = [
        ("empty", np.zeros((0,), x.dtype)),
        ("zero-dim", np.zeros((0,) + x.shape[1:], x.dtype) if x.ndim else np.zeros((0,), x.dtype)),
        ("0-d", x.reshape(-1)[:1].reshape(()) if x.size else np.zeros((), x.dtype)),
        ("rank+1", x.reshape((1,) + x.shape) if x.size else np.zeros((1, 1), x.dtype)),
        ("flat", x.reshape(-1)),
        ("strings", np.array([b"a"] * max(x.size, 1), dtype=object)),
    ]
    if x.dtype.kind == "f":
        out.append(("nan-inf", np.resize(np.array([np.nan, np.inf, -np.inf], x.dtype), x.shape)))
        out.append(("negative", -np.abs(x) - 1))
        out.append(("as-int64", x.astype(np.int64)))
    elif x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        out.append(("negative", np.full(x.shape, -7).astype(x.dtype) if x.dtype.kind == "i" else x + 7))
        out.append(("huge", np.full(x.shape, min(HUGE, info.max), x.dtype)))
        out.append(("int-max", np.full(x.shape, info.max, x.dtype)))
        out.append(("as-float", x.astype(np.float32)))
        if x.dtype.kind == "i":
            out.append(("int-min", np.full(x.shape, info.min, x.dtype)))
    elif x.dtype.kind == "b":
        out.append(("as-float", x.astype(np.float32)))
    else:
        out.append(("as-float", np.ones(x.shape, np.float32)))
    return out


def hostile_variants(schema: OpSchema, seed: Case) -> list[Case]:
    """Every one-change hostile variant of an accepted case (outputs preset, to check atomicity)."""
    out: list[Case] = []
    for j, x in enumerate(seed.inputs):
        if not isinstance(x, np.ndarray):  # an object blob: a tensor in its place
            vals = seed.inputs[:j] + (_f32((3, 2)),) + seed.inputs[j + 1 :]
            out.append(Case(f"in{j} tensor-for-object", vals, seed.args, seed.n_out, preset_outputs=True))
            continue
        for label, v in _input_variants(x):
            vals = seed.inputs[:j] + (v,) + seed.inputs[j + 1 :]
            out.append(Case(f"in{j} {label}", vals, seed.args, seed.n_out, preset_outputs=True))
    if seed.inputs:
        out.append(Case("uninitialized in0", (None,) + seed.inputs[1:], seed.args, seed.n_out, preset_outputs=True))
    seeded = dict(seed.args)
    for label, args in _arg_cases(schema):
        merged = tuple({**seeded, **dict(args)}.items())
        out.append(Case(f"arg {label}", seed.inputs, merged, seed.n_out, preset_outputs=True))
    for name, a in schema.args.items():  # dims declared in arguments: one huge, one negative
        if a.kind == INTS:
            for label, v in (("[huge,1]", [2**40, 1]), ("[-3,2]", [-3, 2]), ("[int-max]", [2**63 - 1])):
                merged = tuple({**seeded, name: v}.items())
                out.append(Case(f"arg {name}={label}", seed.inputs, merged, seed.n_out, preset_outputs=True))
        elif a.kind == INT:
            merged = tuple({**seeded, name: 2**63 - 1}.items())
            out.append(Case(f"arg {name}=int-max", seed.inputs, merged, seed.n_out, preset_outputs=True))
    return out


def _sample(op_type: str, variants: list[Case], k: int) -> list[Case]:
    """``k`` variants spread over the list, the offset fixed per op type (no randomness)."""
    if len(variants) <= k:
        return variants
    step = len(variants) / k
    off = zlib.crc32(op_type.encode()) % max(int(step), 1)
    return [variants[min(int(i * step) + off, len(variants) - 1)] for i in range(k)]


# Ops that wait by design on input the fuzzer cannot make without a second thread: they only get a case
# with tensors where their object inputs belong (refused at once).
BLOCKING = {
    "DequeueBlobs": "an empty queue blocks until a producer enqueues or closes it (Caffe2's semantics)",
    "SafeDequeueBlobs": "as DequeueBlobs",
    "WeightedSampleDequeueBlobs": "as DequeueBlobs",
    "DequeueRebatchingQueue": "as DequeueBlobs",
    "EnqueueRebatchingQueue": "a full queue blocks until a consumer dequeues",
    "While": "loops while its condition holds; an empty body never clears it",
}


def fuzz_op(schema: OpSchema, full: bool = False) -> OpReport:
    """Seed search then hostile variants for one op type (a fixed sample unless ``full``)."""
    violations: list[str] = []
    if schema.type in BLOCKING:
        n_in = _input_counts(schema)[0]
        case = Case("tensors for objects", tuple(_f32((3, 2), k) for k in range(n_in)), (), _outputs(schema), True)
        status, text = attempt(schema, case)
        bad = [f"[{case.label}] {text.splitlines()[0][:300]}"] if status == "violation" else []
        return OpReport(schema.type, None, 1, 1, bad, BLOCKING[schema.type])
    refusals: list[str] = []
    seed, tried = seed_search(schema, 200 if full else 40, violations, refusals)
    hostile = 0
    if seed is not None:
        variants = hostile_variants(schema, seed)
        for case in variants if full else _sample(schema.type, variants, SAMPLE_VARIANTS):
            hostile += 1
            status, text = attempt(schema, case)
            if status == "violation":
                violations.append(f"[{case.label}] {text.splitlines()[0][:300]}")
    refusal = "" if seed is not None or not refusals else refusals[-1][:300]
    return OpReport(schema.type, seed, tried + hostile, hostile, violations, refusal)
