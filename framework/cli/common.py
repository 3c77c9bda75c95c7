"""Helpers shared by the subcommands: loading nets and inputs, printing arrays."""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import numpy as np

import framework.ops  # noqa: F401  (installs the blob-type loader: a checkpoint's blobs may need an op family)
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.runtime.state import RUNTIME


class CLIError(FrameworkError):
    """A command-line mistake, with a hint for the next step."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def read_net(path: str) -> Any:
    """A NetDef from a text or binary protobuf file (named in errors)."""
    from framework.proto.io import read_net as _read

    if not os.path.exists(path):
        raise CLIError(f"net file not found: {path}", "pass the path of a .pbtxt or .pb NetDef")
    net = _read(path)
    if not net.name:
        net.name = os.path.splitext(os.path.basename(path))[0]
    crash = _crash_op(net, f'net "{net.name}"')
    if crash is not None and os.environ.get("FRAMEWORK_ALLOW_CRASH_OP") != "1":
        raise CLIError(
            f"{path}: {crash} is a Crash op (it would abort the process); refused in nets read from files",
            "set FRAMEWORK_ALLOW_CRASH_OP=1 to run it anyway",
        )
    return net


def _crash_op(net: Any, where: str, depth: int = 0) -> str | None:
    """Where the first ``Crash`` op of ``net`` (or of a net nested in its arguments) is, or None."""
    for i, op in enumerate(net.op):
        here = f"{where} op #{i}"
        if op.type == "Crash":
            return here
        if depth >= 64:  # deeper nesting is refused when the net is built
            continue
        for arg in op.arg:
            for sub in ([arg.n] if arg.HasField("n") else []) + list(arg.nets):
                found = _crash_op(sub, f"{here} / {arg.name}", depth + 1)
                if found is not None:
                    return found
    return None


def read_onnx(path: str) -> tuple[Any, Any]:
    """(init NetDef, predict NetDef) of an ONNX model file, or CLIError listing the nodes we cannot run."""
    try:
        import onnx  # noqa: F401  (a clear error when onnx is missing)
    except ImportError as e:
        raise CLIError("reading .onnx files needs the onnx package", "pip install 'framework[onnx]'") from e
    from framework.onnx.backend import Caffe2Backend, load_model
    from framework.onnx.importer import OnnxImportError

    if not os.path.exists(path):
        raise CLIError(f"ONNX file not found: {path}")
    try:
        model = load_model(path)
    except OnnxImportError as e:
        raise CLIError(str(e), "pass an ONNX model file (as onnx.save writes it)") from None
    try:
        return Caffe2Backend.onnx_graph_to_caffe2_net(model)
    except OnnxImportError as e:
        hint = "these ONNX ops have no exact translation to our ops yet" if e.nodes else ""
        raise CLIError(f"{path}: {e}", hint) from None


def parse_inputs(
    specs: Iterable[str], default_names: list[str] | None = None, known: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """``NAME=FILE.npy`` pairs (or bare FILE.npy for the next default name) -> arrays.

    With ``known`` (the blobs the net reads), a name outside it is an error with suggestions; a name
    given twice is an error too.
    """
    from framework.memory.workspace import suggest

    out: dict[str, np.ndarray] = {}
    defaults = list(default_names or [])
    known = list(dict.fromkeys(known)) if known is not None else None
    for spec in specs:
        if "=" in spec:
            name, path = spec.split("=", 1)
        else:
            if not defaults:
                raise CLIError(f"input '{spec}' has no blob name", "write it as NAME=FILE.npy")
            name, path = defaults.pop(0), spec
        if name in out:
            raise CLIError(f"--input {name} is given twice", "feed each blob once")
        if known is not None and name not in known:
            raise CLIError(
                f"--input {name}: the net reads no blob '{name}'.{suggest(name, known)}",
                f"the net's inputs: {', '.join(known[:12])}" + (" ..." if len(known) > 12 else ""),
            )
        out[name] = load_npy(path)
        if defaults and defaults[0] == name:
            defaults.pop(0)
    return out


def load_npy(path: str) -> np.ndarray:
    if not os.path.exists(path):
        raise CLIError(f"input file not found: {path}", "inputs are .npy files written by numpy.save")
    with open(path, "rb") as f:
        head = f.read(6)
    if head != b"\x93NUMPY":
        what = "a .npz archive" if head.startswith(b"PK") else f"it starts with {head!r}"
        raise CLIError(
            f"{path} is not a .npy file ({what})",
            "save arrays with numpy.save(path, array); a text table loads with numpy.loadtxt, then numpy.save",
        )
    try:
        _check_npy_header(path)
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError, MemoryError, OverflowError) as e:
        raise CLIError(f"cannot read {path} as a .npy array: {e}", "object arrays are refused (no pickle)") from e


def _check_npy_header(path: str) -> None:
    """ValueError when the .npy header at ``path`` declares more data than the file holds or than the
    allocation limit allows (numpy would try to allocate it first)."""
    from numpy.lib import format as npy_format

    from framework.memory.allocator import check_elements

    with open(path, "rb") as f:
        version = npy_format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(f)
        else:
            shape, _, dtype = npy_format.read_array_header_2_0(f)
        start = f.tell()
    if dtype.hasobject:
        return  # np.load refuses it (no pickle)
    try:
        n = check_elements(shape, dtype.itemsize, f"{path}'s array")
    except MemoryError as e:  # ResourceLimitError
        raise ValueError(str(e)) from None
    have = os.path.getsize(path) - start
    if n * dtype.itemsize > have:
        raise ValueError(
            f"its header declares shape {list(shape)} {dtype} ({n * dtype.itemsize} bytes) but the file holds "
            f"{have} bytes of data (truncated or damaged)"
        )


def summarize(name: str, value: Any, limit: int = 8) -> str:
    """One or two lines describing a fetched blob."""
    if isinstance(value, bytes):
        return f"{name}: string ({len(value)} bytes) {value[:60]!r}"
    if not isinstance(value, np.ndarray):
        return f"{name}: {type(value).__name__}"
    head = f"{name}: shape {list(value.shape)} {value.dtype}"
    if value.size == 0:
        return head + " (empty)"
    if value.dtype.kind in "fiub":
        v = value.astype(np.float64)
        stats = f" min {v.min():.6g} max {v.max():.6g} mean {v.mean():.6g}"
    else:
        stats = ""
    flat = value.reshape(-1)[:limit]
    more = " ..." if value.size > limit else ""
    values = np.array2string(flat, precision=5, separator=", ", max_line_width=200)
    return f"{head}{stats}\n  {values}{more}"


# Where nets run by the CLI may write (--root, --allow-write): a net read from disk is confined.
_WRITE_POLICY: list = RUNTIME.held("cli.write_policy", lambda: [None, ()])


def set_write_policy(root: str | None, allow_write: Sequence[str] = ()) -> None:
    """The CLI's --root (None: the current folder) and --allow-write folders."""
    _WRITE_POLICY[:] = [root, tuple(allow_write or ())]


def new_workspace(root_folder: str | None = None) -> Workspace:
    """A workspace whose ops write only inside the root folder (--root) and --allow-write folders."""
    root = root_folder if root_folder is not None else (_WRITE_POLICY[0] or ".")
    if not os.path.isdir(root):
        raise CLIError(f"--root {root}: not a folder")
    return Workspace(root_folder=root, name="cli", allow_paths=_WRITE_POLICY[1])


def load_checkpoint(ws: Workspace, path: str) -> list[str]:
    from framework import checkpoint

    if not os.path.exists(path):
        raise CLIError(f"checkpoint not found: {path}", "train first (framework train ... --checkpoint PATH)")
    return checkpoint.load(ws, path)


MODEL_PATH_HELP = (
    "a NetDef or PlanDef file (.pbtxt text or .pb binary), an .onnx file, a model folder (init_net.pbtxt + "
    "predict_net.pbtxt), a deployable pair folder (init_net.pb + predict_net.pb) or a folder with only a predict net"
)


def add_net_arguments(p: Any, default_iters: int) -> None:
    """The arguments of commands that run one net on inputs: NET, --init, --checkpoint, --input, --iters."""
    p.add_argument("net", help=MODEL_PATH_HELP)
    p.add_argument("--init", help="init net to run once first (creates parameters)")
    p.add_argument("--checkpoint", help="checkpoint DB to load parameters from (minidb file or lmdb folder)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="feed a blob (repeatable)")
    p.add_argument("--iters", type=int, default=default_iters, help=f"run the net N times (default {default_iters})")
    p.add_argument(
        "--no-optimize",
        action="store_true",
        help="run the net as written (default: the inference optimization pass folds BN into convs, fuses "
        "Relu/Sum, drops test-mode Dropout and shares buffers; only the shown outputs are kept)",
    )


def optimized(args: Any, net_def: Any, ws: Workspace, outputs: list[str]) -> Any:
    """``net_def`` through the inference optimization pass (framework.net.optimize) keeping ``outputs``,
    unless --no-optimize or no outputs are known (then every blob may be looked at)."""
    if getattr(args, "no_optimize", False) or not outputs:
        return net_def
    from framework.net.optimize import optimize_inference

    return optimize_inference(net_def, ws, outputs=outputs)


def run_net(ws: Workspace, net: Any, written: Any = None, iters: int = 1) -> None:
    """Run the created ``net`` ``iters`` times. ``written``: the NetDef ``net`` is an optimized copy of
    (None: ``net`` runs as written); when the copy fails, the error names the user's ops and blobs
    (framework.net.optimize.explain_failure)."""
    try:
        for _ in range(iters):
            net.run()
    except FrameworkError as e:
        if written is None:
            raise
        from framework.net.optimize import explain_failure

        err = explain_failure(ws, written, e)
        raise err from err.__cause__


def prepare(args: Any) -> tuple[Any, Workspace]:
    """(Source, workspace) for ``args.net`` (any model path: framework/cli/sources.py): the path's init net
    run (a model folder's: only the ops its predict net needs), then --init, --checkpoint, inputs fed."""
    if args.iters < 1:
        raise CLIError(f"--iters must be at least 1, got {args.iters}")
    from framework.cli.sources import data_inputs, open_source

    src = open_source(args.net)
    ws = new_workspace()
    if src.init is not None and not args.init:
        if src.kind == "model":  # a training init net: parameters only, no data readers
            from framework.onnx.exporter import needed_init_ops

            for op in needed_init_ops(src.init, src.net):
                ws.run_operator_once(op)
        else:
            ws.run_net_once(src.init)
    if args.init:
        ws.run_net_once(read_net(args.init))
    if args.checkpoint:
        load_checkpoint(ws, args.checkpoint)
    nets = src.nets()
    reads = [b for net in nets for b in (*net.external_input, *(i for op in net.op for i in op.input))]
    defaults = data_inputs(src.net, ws.has_blob) if src.plan is None else None
    for name, value in parse_inputs(args.input, defaults, known=reads).items():
        ws.feed_blob(name, value)
    return src, ws


def parse_shapes(specs: Iterable[str], known: Iterable[str] | None = None) -> dict[str, tuple[tuple, Any]]:
    """``--shape NAME=D1,D2,...[:DTYPE]`` values -> {name: (dims, numpy dtype or None)}.

    ``NAME=`` is a scalar (no dims). With ``known`` (the blobs the nets read), a name outside it is a
    CLIError with did-you-mean suggestions; a name given twice is one too.
    """
    from framework.errors import ResourceLimitError
    from framework.memory.allocator import check_elements
    from framework.memory.workspace import suggest

    known = list(dict.fromkeys(known)) if known is not None else None
    out: dict[str, tuple[tuple, Any]] = {}
    for spec in specs:
        name, eq, rest = spec.partition("=")
        if not eq or not name:
            raise CLIError(
                f"--shape {spec}: expected NAME=D1,D2,...", "write it as data=1,3,224,224 (or data=8,16:int32)"
            )
        dims, _, dtype = rest.partition(":")
        try:
            shape = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError as e:
            raise CLIError(f"--shape {spec}: dimensions must be integers", "write it as NAME=64,1,8,8") from e
        if any(d < 0 for d in shape):
            raise CLIError(f"--shape {spec}: dimensions must not be negative", "write it as NAME=64,1,8,8")
        try:
            check_elements(shape, 4, f"--shape {name}")
        except ResourceLimitError as e:
            raise CLIError(str(e), "give the shape of one batch") from None
        dt = None
        if dtype.strip():
            try:
                dt = np.dtype(dtype.strip())
            except TypeError as e:
                raise CLIError(
                    f"--shape {spec}: unknown dtype '{dtype.strip()}'", "e.g. float32, int32, int64, uint8"
                ) from e
        if name in out:
            raise CLIError(f"--shape {name} is given twice")
        if known is not None and name not in known:
            raise CLIError(
                f"--shape {name}: the net reads no blob '{name}'.{suggest(name, known)}",
                f"the net's inputs: {', '.join(known[:12])}" + (" ..." if len(known) > 12 else ""),
            )
        out[name] = (shape, dt)
    return out
