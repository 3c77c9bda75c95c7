"""Run Caffe2's own test files unchanged through our import hook and count the outcomes.

``python -m bench.caffe2_suite --tree /tmp/c2/2018 --suite operator|python [--files PATTERN] [--legacy]``

Each test file of the tree (``caffe2/python/operator_test/*_test.py`` for ``operator``, every other
``caffe2/python/**/*_test.py`` for ``python``) is copied alone into a scratch folder and run by pytest in a
subprocess with a timeout. The only things added are a ``conftest.py`` in that scratch folder that calls
``framework.caffe2.install()`` and loads a hypothesis profile (10 examples, derandomized, no deadline), and a
reporter that writes one JSON line per test phase. Deadlines a test sets itself (``@settings(deadline=...)``)
are lifted as well. The tree itself is never written to.

Outcomes per test: passed, failed, error (setup/teardown/collection, or the file timed out before the test
ran), skipped, and ``legacy``: failed only because the test file itself uses an API that numpy or hypothesis
removed since (``np.float``, ``np.asscalar``, ``np.unicode_``, ``np.sum(generator)``, ``np.fromstring``...,
``settings(timeout=...)``, ``lists(average_size=...)``, ``@settings`` without ``@given``, one ``@given`` test
run by several subclasses (hypothesis' ``differing_executors`` check), ``@example`` given strategies,
``np.set_printoptions(threshold=np.nan)``, a list of slices or a float array used as an index, a size-1 array
used as a scalar or a Python int wrapped into int32 in the test's own code; likewise onnx's ``onnx.mapping`` and
``make_tensor(raw=True)`` size check, scipy's
``scipy.misc.logsumexp``, ``interp2d``) or ``torch.ops._caffe2`` (a PyTorch build of Caffe2's ops), recognised
by the failure's traceback.
With ``--legacy`` the conftest installs the hook in its legacy mode (``framework.caffe2.install(legacy=True)``,
which restores most of those APIs: ``framework/caffe2/legacy.py``), and a failure naming an API that mode
restores counts as what it is (passed or failed), no longer as legacy; the others stay legacy.
A file that does not import counts each test function it defines as one error (or
legacy). Tests that need a GPU or MKL-DNN are skipped by Caffe2's own decorators on a CPU build, so they count
as skipped.

Caffe2's ``onnx/tests/onnx_backend_test.py`` loads onnx's backend-test report plugin, which needs ``tabulate``
(``pip install tabulate``; not a dependency of ours: only that file of Caffe2's needs it).

Prints a table per file and the tree's totals, and writes the full results (with each failure's last
error line) to ``--json`` (default ``/tmp/c2/results/<tree>-<suite>.json``).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("passed", "failed", "error", "skipped", "legacy")

# A failure whose text matches one of these is the test file's own use of a removed API.
LEGACY_PATTERNS = {
    "numpy alias removed": re.compile(
        r"module 'numpy' has no attribute '(float|int|bool|object|str|long|complex|unicode|asscalar)'"
        r"|`np\.\w+` was removed in the NumPy 2\.0 release"
    ),
    "np.sum(generator) removed": re.compile(r"Calling np\.sum\(generator\) is deprecated"),
    "np.fromstring binary mode removed": re.compile(r"The binary mode of fromstring is removed"),
    "hypothesis settings(timeout=)": re.compile(r"unexpected keyword argument 'timeout'"),
    "hypothesis lists(average_size=)": re.compile(r"unexpected keyword argument 'average_size'"),
    "hypothesis @settings without @given": re.compile(r"Using `@settings` on a test without `@given`"),
    "hypothesis arrays(elements) positional": re.compile(r"arrays\(\) takes 2 positional arguments but 3 were given"),
    "scipy API removed": re.compile(r"cannot import name '\w+' from 'scipy\.misc'"),
    "scipy interp2d removed": re.compile(r"`interp2d` has been removed in SciPy"),
    "onnx.mapping removed": re.compile(
        r"cannot import name 'mapping' from 'onnx'|module 'onnx' has no attribute 'mapping'"
    ),
    "onnx make_tensor checks raw data size": re.compile(r"Raw data size does not match tensor's size"),
    "inspect.getargspec removed (Python 3.11)": re.compile(r"module 'inspect' has no attribute 'getargspec'"),
    "torch.ops._caffe2": re.compile(r"'_caffe2' object has no attribute|torch\.ops\._caffe2"),
    "numpy set_printoptions(threshold=nan) refused": re.compile(r"threshold must be non-NAN"),
    "hypothesis HealthCheck.differing_executors": re.compile(r"HealthCheck\.differing_executors"),
    "hypothesis @example given strategies": re.compile(r"@example\(\) decorator expects to be passed values"),
}

# The reasons above whose API the hook's legacy mode restores: with --legacy such a failure is a real one.
RESTORED_BY_LEGACY_MODE = frozenset(
    {
        "numpy alias removed",
        "np.sum(generator) removed",
        "hypothesis settings(timeout=)",
        "hypothesis lists(average_size=)",
        "hypothesis @settings without @given",
        "hypothesis arrays(elements) positional",
        "scipy API removed",
        "scipy interp2d removed",
        "inspect.getargspec removed (Python 3.11)",
        "numpy set_printoptions(threshold=nan) refused",
        "hypothesis HealthCheck.differing_executors",
    }
)

# Written into the scratch folder; runs inside the pytest subprocess.
CONFTEST = """\
import json
import os
import re

import framework.caffe2

framework.caffe2.install()

from hypothesis import settings

settings.register_profile("caffe2_suite", max_examples=10, derandomize=True, deadline=None, database=None)
settings.load_profile("caffe2_suite")

# hypothesis reads constants out of the source of each newly imported module outside site-packages before a
# draw. Caffe2's modules were installed, so it never read them; ours sit in a checkout and load lazily (op
# families) while tests run, and reading them takes seconds that its too_slow health check bills to data
# generation. They are treated as the installed library they stand for.
try:
    from hypothesis.internal.conjecture import providers as _providers

    _FRAMEWORK_DIR = os.path.dirname(framework.__file__) + os.sep
    _is_local = _providers.is_local_module_file
    _providers.is_local_module_file = lambda path: not path.startswith(_FRAMEWORK_DIR) and _is_local(path)
except Exception:
    pass

_OUT = os.environ["CAFFE2_SUITE_OUT"]


def _write(record):
    with open(_OUT, "a") as f:
        f.write(json.dumps(record) + "\\n")


def pytest_collection_modifyitems(session, config, items):
    # the test module may have loaded a profile of its own on import
    settings.load_profile("caffe2_suite")
    # a test's own @settings(deadline=...) is lifted too: time on a shared machine is not what it checks
    for item in items:
        fn = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        own = getattr(fn, "_hypothesis_internal_use_settings", None)
        if own is not None and own.deadline is not None:
            fn._hypothesis_internal_use_settings = settings(own, deadline=None)


def pytest_collectreport(report):
    if report.failed:
        _write({"nodeid": report.nodeid, "when": "collect", "outcome": "failed", "text": report.longreprtext})


def pytest_runtest_logreport(report):
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "skipped" if outcome == "skipped" else "passed"
    text = report.longreprtext if outcome != "passed" else ""
    if len(text) > 6000:  # keep the tail, and every frame's location line (where the error arose)
        frames = [ln for ln in text[:-6000].splitlines() if re.match(r"\\S+\\.py:\\d+: \\w+", ln)]
        text = "\\n".join(frames + [text[-6000:]])
    _write({"nodeid": report.nodeid, "when": report.when, "outcome": outcome, "text": text})
"""


def test_files(tree: Path, suite: str, pattern: str | None) -> list[Path]:
    """The tree's test files of ``suite``, sorted, filtered by comma-separated globs on the basename (or
    the path relative to caffe2/python)."""
    py = tree / "caffe2" / "python"
    if suite == "operator":
        files = sorted((py / "operator_test").glob("*_test.py"))
    elif suite == "python":
        files = sorted(p for p in py.rglob("*_test.py") if "operator_test" not in p.relative_to(py).parts)
    else:
        raise SystemExit(f"unknown suite {suite!r}: operator or python")
    if pattern:
        globs = [g.strip() for g in pattern.split(",") if g.strip()]
        files = [
            p for p in files if any(fnmatch.fnmatch(n, g) for g in globs for n in (p.name, str(p.relative_to(py))))
        ]
    return files


def count_test_functions(path: Path) -> int:
    """How many test functions a file defines (module level or in classes): counted for a file that fails to import."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return 1
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            n += 1
    return max(n, 1)


# numpy 2 no longer converts a size-1 array of ndim > 0 to a scalar, nor wraps an out-of-range Python int
# into a fixed-size integer; legacy only where the error is raised in the test file's own code (its
# reference), never in the framework
_SCALAR_CONVERSION = re.compile(
    r"setting an array element with a sequence|only 0-dimensional arrays can be converted to Python scalars"
    r"|Python integer -?\d+ out of bounds for u?int\d+"
)
_RAISED_AT = re.compile(r"^(\S+\.py):\d+: \w+", re.MULTILINE)
# numpy >= 1.23 refuses a list of slices as an index (``x[[slice(None), slice(1, 2)]]``).
_LIST_OF_SLICES = re.compile(r"only integers, slices \(`:`\), ellipsis \(`\.\.\.`\)")
_FRAME = re.compile(r'File "([^"]+)", line \d+')


# numpy >= 1.19 refuses a float array as an index, even an empty one (``np.delete(x, np.array([]))``).
_FLOAT_INDEX = re.compile(r"arrays used as indices must be of integer \(or boolean\) type")


def _raised_in_test_file(text: str) -> bool:
    """True if the innermost frame of the traceback (pytest's or a hypothesis group's) outside numpy
    is the test file's."""
    where = _RAISED_AT.findall(text) or _FRAME.findall(text)
    where = [w for w in where if "/numpy/" not in w]
    return bool(where) and where[-1].endswith("_test.py") and "framework/" not in where[-1]


def legacy_reason(text: str, legacy_mode: bool = False) -> str | None:
    """The removed API a failure's text names (None: a real failure); under ``legacy_mode`` the APIs that mode
    restores are not reasons."""
    for name, pattern in LEGACY_PATTERNS.items():
        if legacy_mode and name in RESTORED_BY_LEGACY_MODE:
            continue
        if pattern.search(text):
            return name
    if _SCALAR_CONVERSION.search(text) and _raised_in_test_file(text):
        return "numpy 2 scalar conversion"
    if _LIST_OF_SLICES.search(text) and _raised_in_test_file(text):
        return "numpy list of slices as an index"
    if _FLOAT_INDEX.search(text) and _raised_in_test_file(text):
        return "numpy float array as an index"
    return None


def last_error_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
    errors = [ln for ln in lines if re.match(r"E\s+[\w.]*(Error|Exception|Failure|Exit)\b", ln)]
    lines = errors or lines
    if lines:
        return lines[-1][1:].strip()[:300]
    rest = [ln for ln in text.strip().splitlines() if ln.strip()]
    return rest[-1].strip()[:300] if rest else ""


def classify(records: list[dict], legacy_mode: bool = False) -> dict[str, dict]:
    """Per test id: outcome and reason, from the reporter's per-phase records."""
    tests: dict[str, dict] = {}
    for rec in records:
        entry = tests.setdefault(rec["nodeid"], {"phases": {}})
        entry["phases"][rec["when"]] = rec
    result = {}
    for nodeid, entry in tests.items():
        phases = entry["phases"]
        outcome, text = "passed", ""
        for when in ("collect", "setup", "call", "teardown"):
            rec = phases.get(when)
            if rec is None:
                continue
            if rec["outcome"] == "failed":
                outcome, text = ("failed" if when == "call" else "error"), rec["text"]
                break
            if rec["outcome"] == "skipped":
                outcome, text = "skipped", rec["text"]
        if "call" not in phases and outcome == "passed":
            outcome = "error"
        reason = legacy_reason(text, legacy_mode) if outcome in ("failed", "error") else None
        if reason:
            outcome = "legacy"
        result[nodeid] = {"outcome": outcome, "reason": reason or last_error_line(text)}
    return result


def run_file(path: Path, timeout: float, python: str, legacy_mode: bool = False) -> dict:
    """Run one test file in a fresh scratch folder; its counts and per-test outcomes (``legacy_mode``: the
    hook's legacy mode on, see the module doc)."""
    scratch = Path(tempfile.mkdtemp(prefix="caffe2_suite_"))
    try:
        shutil.copy(path, scratch / path.name)
        conftest = CONFTEST
        if legacy_mode:
            conftest = conftest.replace("framework.caffe2.install()", "framework.caffe2.install(legacy=True)")
        (scratch / "conftest.py").write_text(conftest)
        (scratch / "pytest.ini").write_text("[pytest]\n")
        out = scratch / "results.jsonl"
        env = dict(os.environ)
        env.update(
            CAFFE2_SUITE_OUT=str(out),
            PYTHONPATH=os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
        )
        cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib"]
        cmd += ["-c", str(scratch / "pytest.ini"), "--rootdir", str(scratch), path.name]
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        timed_out = False
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        seconds = time.monotonic() - start
        records = []
        if out.exists():
            for line in out.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass
        tests = classify(records, legacy_mode)
        collect_failure = next((r for r in records if r["when"] == "collect"), None)
        expected = count_test_functions(path)
        ran = len(tests) - (1 if collect_failure else 0)
        missing = 0
        if collect_failure is not None or timed_out or (not tests and proc.returncode not in (0, 5)):
            missing = max(expected - ran, 0 if tests else 1)
        counts = dict.fromkeys(OUTCOMES, 0)
        for nodeid, t in tests.items():
            if collect_failure is not None and nodeid == collect_failure["nodeid"]:
                continue
            counts[t["outcome"]] += 1
        note = ""
        if missing:
            if timed_out:
                note = f"timed out after {timeout:.0f}s"
                kind = "error"
            elif collect_failure is not None:
                reason = legacy_reason(collect_failure["text"], legacy_mode)
                kind = "legacy" if reason else "error"
                note = "import: " + (reason or last_error_line(collect_failure["text"]))
            else:
                kind = "error"
                note = "pytest: " + output.decode(errors="replace").strip()[-300:]
            counts[kind] += missing
        counts["total"] = sum(counts[k] for k in OUTCOMES)
        return {"counts": counts, "seconds": round(seconds, 1), "note": note, "tests": tests}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def summarize(files: dict[str, dict]) -> dict[str, int]:
    totals = dict.fromkeys((*OUTCOMES, "total"), 0)
    for res in files.values():
        for k in totals:
            totals[k] += res["counts"][k]
    return totals


def format_row(name: str, counts: dict, extra: str = "") -> str:
    cells = " ".join(f"{counts[k]:>7}" for k in (*OUTCOMES, "total"))
    return f"{name[:48]:<48} {cells} {extra}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.caffe2_suite", description=__doc__.split("\n")[0])
    parser.add_argument("--tree", required=True, type=Path, help="folder holding caffe2/python of a Caffe2 tree")
    parser.add_argument("--suite", required=True, choices=("operator", "python"))
    parser.add_argument("--files", help="comma-separated globs on the test file's name ('conv*_test.py,gru_test.py')")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test file (default 600)")
    parser.add_argument("--jobs", type=int, default=1, help="test files run at once (default 1)")
    parser.add_argument("--json", type=Path, help="result file (default /tmp/c2/results/<tree>-<suite>.json)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument(
        "--legacy",
        action="store_true",
        help="install the hook in legacy mode (removed numpy/hypothesis/scipy APIs restored) and count the tests "
        "that used them by their real outcome",
    )
    args = parser.parse_args(argv)

    tree = args.tree.resolve()
    if not (tree / "caffe2" / "python").is_dir():
        parser.error(f"{tree} has no caffe2/python folder")
    files = test_files(tree, args.suite, args.files)
    if not files:
        parser.error("no test file matches")
    out_path = args.json or Path("/tmp/c2/results") / f"{tree.name}-{args.suite}.json"
    py = tree / "caffe2" / "python"

    print(format_row("file", {k: k[:7] for k in (*OUTCOMES, "total")}, "seconds"), flush=True)
    results: dict[str, dict] = {}

    def one(path: Path) -> tuple[str, dict]:
        return str(path.relative_to(py)), run_file(path, args.timeout, args.python, args.legacy)

    def save() -> dict[str, int]:
        # rewritten after every file, so an interrupted run keeps what it measured
        totals = summarize(results)
        out_path.write_text(
            json.dumps(
                {"tree": str(tree), "suite": args.suite, "legacy": args.legacy, "totals": totals, "files": results},
                indent=1,
            )
        )
        return totals

    out_path.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        for name, res in pool.map(one, files):
            results[name] = res
            print(format_row(name, res["counts"], f"{res['seconds']:>6} {res['note'][:80]}"), flush=True)
            save()
    totals = save()
    mode = " legacy mode" if args.legacy else ""
    print(format_row(f"TOTAL {tree.name} {args.suite}{mode} ({len(files)} files)", totals), flush=True)
    print(f"results: {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
