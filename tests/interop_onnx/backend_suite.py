"""Run onnx's backend test suite (``onnx.backend.test.BackendTest``) with our backend and count
passed / failed / skipped per group (node tests, real, simple, pytorch-converted, pytorch-operator
models). ``python -m tests.interop_onnx.backend_suite`` prints the table and the failures."""

from __future__ import annotations

import collections
import io
import unittest
import warnings

GROUPS = {
    "OnnxBackendNodeModelTest": "node",
    "OnnxBackendRealModelTest": "real",
    "OnnxBackendSimpleModelTest": "simple",
    "OnnxBackendPyTorchConvertedModelTest": "pytorch-converted",
    "OnnxBackendPyTorchOperatorModelTest": "pytorch-operator",
}


# Tests onnx's own runner cannot pass for any backend (checked with onnx's ReferenceEvaluator as the
# backend): counted as skipped with this reason, never run.
UPSTREAM_BROKEN = {
    "test_loop16_seq_none_cpu": "onnx's runner: the expected sequence starts with a 0-d tensor and "
    "assert_similar_outputs calls len() on it (TypeError for every backend, onnx 1.23.2)",
}


def _group(test: unittest.TestCase) -> str:
    return next((g for k, g in GROUPS.items() if k in test.id()), "other")


def run_suite(pattern: str | None = None, groups: tuple[str, ...] | None = None) -> tuple[dict, list, list]:
    """({group: Counter(total, passed, failed, skipped)}, failures [(id, traceback)], skips [(id, reason)])."""
    import onnx.backend.test

    from framework.onnx.backend import Caffe2Backend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = onnx.backend.test.BackendTest(Caffe2Backend, "framework_onnx_suite")
        suite = unittest.TestSuite()
        loader = unittest.TestLoader()
        for case in bt.test_cases.values():
            for name in loader.getTestCaseNames(case):
                if "_cuda" in name or (pattern and pattern not in name):
                    continue
                test = case(name)
                if groups is None or _group(test) in groups:
                    suite.addTest(test)
        counts: dict = collections.defaultdict(collections.Counter)
        for t in suite:
            counts[_group(t)]["total"] += 1
        broken = [t for t in suite if t.id().rsplit(".", 1)[-1] in UPSTREAM_BROKEN]
        runnable = unittest.TestSuite([t for t in suite if t not in broken])
        res = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(runnable)
    fails = [(t.id(), tb) for t, tb in res.failures + res.errors]
    skips = [(t.id(), r) for t, r in res.skipped]
    skips += [(t.id(), UPSTREAM_BROKEN[t.id().rsplit(".", 1)[-1]]) for t in broken]
    for tid, _ in fails:
        counts[_group_id(tid)]["failed"] += 1
    for tid, _ in skips:
        counts[_group_id(tid)]["skipped"] += 1
    for c in counts.values():
        c["passed"] = c["total"] - c["failed"] - c["skipped"]
    return dict(counts), fails, skips


def _group_id(tid: str) -> str:
    return next((g for k, g in GROUPS.items() if k in tid), "other")


def main() -> None:
    import sys

    args = sys.argv[1:]
    groups = tuple(a[len("--group=") :] for a in args if a.startswith("--group="))
    pattern = next((a for a in args if not a.startswith("--")), None)
    counts, fails, _ = run_suite(pattern, groups or None)
    print(f"{'group':<20} {'total':>6} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for g, c in sorted(counts.items()):
        print(f"{g:<20} {c['total']:>6} {c['passed']:>7} {c['failed']:>7} {c['skipped']:>8}")
    for tid, tb in fails:
        print("FAILED", tid, tb.strip().splitlines()[-1][:300])


if __name__ == "__main__":
    main()
