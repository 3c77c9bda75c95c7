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


def _widened(ref, out):
    """``(ref, out)`` with every ml_dtypes array pair (float8, float4, int4...) but bfloat16 widened to
    float32 or int64, after checking both have the same dtype; other values as they are.

    onnx's runner compares with ``np.testing.assert_allclose``, whose ``isclose`` asks numpy for
    ``result_type(y, 1.)``: before numpy 2 (value-based promotion) a Python float meets a float8 array as
    float16, which has no common dtype with it ("do not have a common DType"), so every float8/float4
    output fails in the comparison whatever the backend computed. Widening is exact (every float8/float4
    value is a float32, every int4 an int64), so the comparison is the same one at any numpy version;
    onnx widens bfloat16 itself, with a bfloat16 tolerance, and keeps it."""
    import numpy as np

    if isinstance(out, (list, tuple)) and isinstance(ref, (list, tuple)) and len(out) == len(ref):
        pairs = [_widened(r, o) for r, o in zip(ref, out)]
        return [r for r, _ in pairs], [o for _, o in pairs]
    if not (isinstance(out, np.ndarray) and isinstance(ref, np.ndarray)):
        return ref, out
    small = [
        a.dtype for a in (ref, out) if a.dtype.type.__module__.startswith("ml_dtypes") and a.dtype.name != "bfloat16"
    ]
    if not small:
        return ref, out
    if ref.dtype != out.dtype:
        raise AssertionError(f"output dtype {out.dtype}, expected {ref.dtype}")
    wide = np.float32 if "float" in ref.dtype.name else np.int64
    return ref.astype(wide), out.astype(wide)


def _backend_test():
    """onnx's BackendTest whose comparison widens ml_dtypes outputs first (see ``_widened``)."""
    import onnx.backend.test

    class BackendTest(onnx.backend.test.BackendTest):
        @classmethod
        def assert_similar_outputs(cls, ref_outputs, outputs, rtol, atol, model_dir=None):
            ref_outputs, outputs = _widened(ref_outputs, outputs)
            super().assert_similar_outputs(ref_outputs, outputs, rtol, atol, model_dir=model_dir)

    return BackendTest


def _group(test: unittest.TestCase) -> str:
    return next((g for k, g in GROUPS.items() if k in test.id()), "other")


def run_suite(pattern: str | None = None, groups: tuple[str, ...] | None = None) -> tuple[dict, list, list]:
    """({group: Counter(total, passed, failed, skipped)}, failures [(id, traceback)], skips [(id, reason)])."""
    from framework.onnx.backend import Caffe2Backend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = _backend_test()(Caffe2Backend, "framework_onnx_suite")
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
