"""bench.caffe2_suite on a tiny tree of our own: each outcome counted where it belongs."""

import json
import textwrap

from bench import caffe2_suite

OUTCOMES_FILE = """
import unittest

import numpy as np
from hypothesis import given, settings
import hypothesis.strategies as st

from caffe2.python import core, workspace


class TestTiny(unittest.TestCase):
    def test_passes_through_hook(self):
        workspace.FeedBlob("x", np.array([1.0, -2.0], dtype=np.float32))
        workspace.RunOperatorOnce(core.CreateOperator("Relu", ["x"], ["y"]))
        np.testing.assert_array_equal(workspace.FetchBlob("y"), [1.0, 0.0])

    def test_fails(self):
        self.assertEqual(1, 2)

    @unittest.skip("not on this build")
    def test_skipped(self):
        pass

    def test_legacy_numpy(self):
        np.zeros(2, dtype=np.float)

    @given(st.integers())
    def test_profile(self, n):
        assert settings.default.max_examples == 10
        assert settings.default.derandomize and settings.default.deadline is None
"""

IMPORT_FAILS = """
import numpy as np

ONE = np.asscalar(np.ones(1))


def test_a():
    pass


def test_b():
    pass
"""


def test_runner_counts_each_outcome(tmp_path, capsys):
    folder = tmp_path / "tree" / "caffe2" / "python" / "operator_test"
    folder.mkdir(parents=True)
    (folder / "tiny_test.py").write_text(textwrap.dedent(OUTCOMES_FILE))
    (folder / "old_import_test.py").write_text(IMPORT_FAILS)
    (folder / "not_a_test_helper.py").write_text("raise SystemExit('never run')\n")
    out = tmp_path / "result.json"

    assert caffe2_suite.main(["--tree", str(tmp_path / "tree"), "--suite", "operator", "--json", str(out)]) == 0

    result = json.loads(out.read_text())
    tiny = result["files"]["operator_test/tiny_test.py"]["counts"]
    assert tiny == {"passed": 2, "failed": 1, "error": 0, "skipped": 1, "legacy": 1, "total": 5}
    old = result["files"]["operator_test/old_import_test.py"]
    assert old["counts"]["legacy"] == 2 and old["counts"]["total"] == 2
    assert sorted(result["files"]) == ["operator_test/old_import_test.py", "operator_test/tiny_test.py"]
    assert result["totals"]["total"] == 7 and result["totals"]["passed"] == 2
    printed = capsys.readouterr().out
    assert "TOTAL tree operator (2 files)" in printed
    # the tree is only read
    assert sorted(p.name for p in folder.iterdir()) == ["not_a_test_helper.py", "old_import_test.py", "tiny_test.py"]


def test_classify_phases():
    no_caffe2_ops = "E   AttributeError: '_OpNamespace' '_caffe2' object has no attribute 'X'"
    records = [
        {"nodeid": "a", "when": "setup", "outcome": "failed", "text": "E   ValueError: boom"},
        {"nodeid": "b", "when": "setup", "outcome": "passed", "text": ""},
        {"nodeid": "b", "when": "call", "outcome": "failed", "text": no_caffe2_ops},
        {"nodeid": "c", "when": "setup", "outcome": "passed", "text": ""},
        {"nodeid": "c", "when": "call", "outcome": "passed", "text": ""},
        {"nodeid": "c", "when": "teardown", "outcome": "failed", "text": "E   RuntimeError: leak"},
    ]
    records.append(
        {
            "nodeid": "d",
            "when": "call",
            "outcome": "failed",
            "text": "E   TypeError: Calling np.sum(generator) is deprecated.",
        }
    )
    tests = caffe2_suite.classify(records)
    assert tests["d"]["outcome"] == "legacy"
    for text in (
        "E   TypeError: lists() got an unexpected keyword argument 'average_size'",
        "E   ImportError: cannot import name 'logsumexp' from 'scipy.misc' (/x)",
        "E   AttributeError: `np.unicode_` was removed in the NumPy 2.0 release. Use `np.str_` instead.",
        "E   AttributeError: module 'inspect' has no attribute 'getargspec'",
        "E   ImportError: cannot import name 'mapping' from 'onnx' (/x/onnx/__init__.py)",
        "E   ValueError: Raw data size does not match tensor's size. Expected 24 bytes, but got 10 bytes.",
        "E   ValueError: The binary mode of fromstring is removed, use frombuffer instead",
        "E   hypothesis.errors.InvalidArgument: Using `@settings` on a test without `@given` is completely pointless.",
        "E   ValueError: threshold must be non-NAN, try sys.maxsize for untruncated representation",
        "E   hypothesis.errors.HypothesisWarning: The @example() decorator expects to be passed values, but you",
        "E   hypothesis.errors.FailedHealthCheck: ... HealthCheck.differing_executors warns about a correctness issue",
    ):
        assert caffe2_suite.legacy_reason(text) is not None
    assert caffe2_suite.legacy_reason("E   TypeError: f() got an unexpected keyword argument 'axis'") is None
    in_test = "E   ValueError: setting an array element with a sequence.\n\nadam_test.py:170: ValueError"
    in_framework = "E   ValueError: setting an array element with a sequence.\n\n/w/framework/ops/x.py:9: ValueError"
    assert caffe2_suite.legacy_reason(in_test) == "numpy 2 scalar conversion"
    wrap = "E   OverflowError: Python integer 3735928559 out of bounds for int32\n\nindex_hash_ops_test.py:31: Overf"
    assert caffe2_suite.legacy_reason(wrap + "lowError") == "numpy 2 scalar conversion"
    assert caffe2_suite.legacy_reason(in_framework) is None
    slices = "IndexError: only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer"
    frame = '    |   File "/tmp/x/utility_ops_test.py", line 49, in slice_ref\n'
    group = f"{frame}    |     return [x[slc]]\n    | {slices}"
    assert caffe2_suite.legacy_reason(group) == "numpy list of slices as an index"
    ours = f'    |   File "/w/framework/ops/tensor/slice.py", line 9, in run\n    | {slices}'
    assert caffe2_suite.legacy_reason(ours) is None
    floats = "E   IndexError: arrays used as indices must be of integer (or boolean) type"
    numpy_frame = "\n\n/v/site-packages/numpy/lib/_function_base_impl.py:5377: IndexError"
    in_reference = "sequence_ops_test.py:269: in op_ref\n    np.delete(data, idx)\n" + floats + numpy_frame
    assert caffe2_suite.legacy_reason(in_reference) == "numpy float array as an index"
    in_op = "/w/framework/ops/sparse/partition.py:19: in run\n" + floats + numpy_frame
    assert caffe2_suite.legacy_reason(in_op) is None
    assert tests["a"] == {"outcome": "error", "reason": "ValueError: boom"}
    assert tests["b"]["outcome"] == "legacy" and tests["b"]["reason"] == "torch.ops._caffe2"
    assert tests["c"]["outcome"] == "error"


def test_legacy_mode_counts_restored_apis_by_their_real_outcome(tmp_path):
    folder = tmp_path / "tree" / "caffe2" / "python" / "operator_test"
    folder.mkdir(parents=True)
    (folder / "tiny_test.py").write_text(textwrap.dedent(OUTCOMES_FILE))
    (folder / "old_import_test.py").write_text(IMPORT_FAILS)
    out = tmp_path / "result.json"
    args = ["--tree", str(tmp_path / "tree"), "--suite", "operator", "--json", str(out), "--legacy"]

    assert caffe2_suite.main(args) == 0

    result = json.loads(out.read_text())
    assert result["legacy"] is True
    tiny = result["files"]["operator_test/tiny_test.py"]["counts"]
    assert tiny == {"passed": 3, "failed": 1, "error": 0, "skipped": 1, "legacy": 0, "total": 5}
    old = result["files"]["operator_test/old_import_test.py"]["counts"]
    assert old["passed"] == 2 and old["total"] == 2


def test_legacy_mode_classification():
    removed_alias = "E   AttributeError: module 'numpy' has no attribute 'float'."
    not_restored = "E   AttributeError: '_OpNamespace' '_caffe2' object has no attribute 'X'"
    assert caffe2_suite.legacy_reason(removed_alias) == "numpy alias removed"
    assert caffe2_suite.legacy_reason(removed_alias, legacy_mode=True) is None
    assert caffe2_suite.legacy_reason(not_restored, legacy_mode=True) == "torch.ops._caffe2"
    records = [{"nodeid": "a", "when": "call", "outcome": "failed", "text": removed_alias}]
    assert caffe2_suite.classify(records, legacy_mode=True)["a"]["outcome"] == "failed"
    assert set(caffe2_suite.RESTORED_BY_LEGACY_MODE) <= set(caffe2_suite.LEGACY_PATTERNS)


LIBRARY_FILE = """
import framework.ops.math.elementwise as installed_module
from hypothesis.internal.conjecture import providers


def test_framework_is_library_code():
    # as Caffe2's installed modules: hypothesis reads no constants out of their source
    assert not providers.is_local_module_file(installed_module.__file__)
    assert providers.is_local_module_file(__file__.replace("_test.py", "_helper.py"))
"""


def test_framework_modules_count_as_installed_library(tmp_path):
    folder = tmp_path / "tree" / "caffe2" / "python" / "operator_test"
    folder.mkdir(parents=True)
    (folder / "library_test.py").write_text(LIBRARY_FILE)
    out = tmp_path / "result.json"
    assert caffe2_suite.main(["--tree", str(tmp_path / "tree"), "--suite", "operator", "--json", str(out)]) == 0
    counts = json.loads(out.read_text())["files"]["operator_test/library_test.py"]["counts"]
    assert counts["passed"] == 1 and counts["total"] == 1
