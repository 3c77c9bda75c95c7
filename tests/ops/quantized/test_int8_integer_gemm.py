"""The integer GEMM kernel (uint8 x int8 -> int32, AVX-512 VNNI) and the Int8 ops on it: exact against int64
numpy references (hypothesis over shapes, every panel width and row tail, codes and zero points at 0 and 255,
extreme products), the ops' dispatch (the kernel runs where the centred weights fit int8; the float32 GEMM runs
elsewhere, without the CPU features and after a failed compile), and no allocation in a second run."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import int8_gemm_path, kernel_support
from tests.ops.quantized.int8_helpers import check_int8, q8
from tests.ops.quantized.test_int8_gemm_paths import conv_reference, requantize_all

pytestmark = pytest.mark.skipif(not int8_gemm_path.available(), reason="the CPU lacks AVX-512 VNNI (or no numba)")


@contextmanager
def spy_calls():
    """Inside the block, records whether each integer-GEMM dispatch ran the kernel."""
    calls: list[bool] = []
    real = int8_gemm_path.run

    def spy(*args, **kwargs):
        ran = real(*args, **kwargs)
        calls.append(ran)
        return ran

    int8_gemm_path.run = spy
    try:
        yield calls
    finally:
        int8_gemm_path.run = real


@contextmanager
def implicit_windows(on: bool):
    """Inside the block (``on``), every conv whose channels divide by 4 reads its windows in place, however
    short its output rows (the implicit-GEMM path, with register blocks cut at every row end)."""
    saved = int8_gemm_path.IMPLICIT_MIN_WIDTH
    int8_gemm_path.IMPLICIT_MIN_WIDTH = 1 if on else saved
    try:
        yield
    finally:
        int8_gemm_path.IMPLICIT_MIN_WIDTH = saved


@contextmanager
def wrapping_epilogue(on: bool):
    """Inside the block (``on``), the kernel's epilogue takes its int32-wrapping form for every K (the form
    only a K above int8_gemm.WRAP_FREE_K needs): both forms must give the same codes."""
    mod = int8_gemm_path._module()
    saved = mod.WRAP_FREE_K
    mod.WRAP_FREE_K = -1 if on else saved
    try:
        yield
    finally:
        mod.WRAP_FREE_K = saved


@pytest.fixture
def kernel_calls():
    with spy_calls() as calls:
        yield calls


def _codes(rng, shape, lo, hi, extreme):
    """Integers in [lo, hi]: uniform, or (``extreme``) only the two ends, where the products are largest."""
    if extreme:
        return rng.choice(np.array([lo, hi]), shape)
    return rng.integers(lo, hi + 1, shape)


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(0, 70), k=st.integers(1, 70), m=st.integers(1, 150), xz=st.sampled_from([0, 1, 128, 255]),
    extreme=st.booleans(), transposed=st.booleans(), wrap=st.booleans(), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_kernel_int32_sums_are_exact(p, k, m, xz, extreme, transposed, wrap, seed):
    rng = np.random.default_rng(seed)
    a = _codes(rng, (p, k), 0, 255, extreme).astype(np.uint8)
    wc = _codes(rng, (m, k), -128, 127, extreme).astype(np.int32)
    packed = int8_gemm_path.pack_centered(wc)
    k4 = -(-k // 4) * 4
    rows = rng.integers(0, 256, (max(p, 1), k4)).astype(np.uint8)  # the bytes past K hold anything
    rows[:p, :k] = a
    out = np.full((m, p) if transposed else (p, m), -7, np.int32)
    holder = type("Holder", (), {})()
    params = (0, 0, 0, 0.0, 0, 0)
    a_rows = int8_gemm_path.rows(holder, rows[:p]) if p else int8_gemm_path.rows(holder, rows)
    with wrapping_epilogue(wrap):
        assert int8_gemm_path.run(holder, a_rows, p, packed, xz, None, None, None, params, 1, transposed, out)
    expected = (a.astype(np.int64) - xz) @ wc.T.astype(np.int64)
    np.testing.assert_array_equal(out, expected.T if transposed else expected)


def _fit_weights(rng, shape, wz, extreme):
    """uint8 weights whose centred values w - wz fit int8 (the kernel's condition)."""
    lo, hi = max(0, wz - 128), min(255, wz + 127)
    return _codes(rng, shape, lo, hi, extreme).astype(np.uint8)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(), relu=st.booleans(), extreme=st.booleans(), implicit=st.booleans(),
    xz=st.sampled_from([0, 3, 128, 255]), wz=st.sampled_from([0, 128, 200, 255]), y_zp=st.integers(0, 255),
    ys=st.floats(0.01, 1.0), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_int8_conv_on_the_kernel_matches_reference(data, relu, extreme, implicit, xz, wz, y_zp, ys, seed):
    rng = np.random.default_rng(seed)
    kh, kw = data.draw(st.sampled_from([1, 3])), data.draw(st.sampled_from([1, 2, 3]))
    stride, dil = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    pads = tuple(data.draw(st.integers(0, 2)) for _ in range(4))
    h = data.draw(st.integers(max(1, dil * (kh - 1) + 1 - pads[0] - pads[2]), 9))
    wd = data.draw(st.integers(max(1, dil * (kw - 1) + 1 - pads[1] - pads[3]), 7))
    n, m = data.draw(st.integers(0, 2)), data.draw(st.integers(1, 40))
    c = 4 * data.draw(st.integers(1, 6)) if implicit else data.draw(st.integers(1, 20))
    x = _codes(rng, (n, h, wd, c), 0, 255, extreme).astype(np.uint8)
    w = _fit_weights(rng, (m, kh, kw, c), wz, extreme)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    xs, ws = 0.02, 0.01
    op = CreateOperator(
        "Int8ConvRelu" if relu else "Int8Conv", ["X", "W", "b"], ["Y"], kernels=[kh, kw], strides=[stride, stride],
        pads=list(pads), dilations=[dil, dil], order="NHWC", Y_scale=ys, Y_zero_point=y_zp,
    )  # fmt: skip
    acc = conv_reference(x, xz, w, wz, b, stride, pads, dil, 1)
    expected = requantize_all(acc, xs, ws, ys, y_zp, y_zp if relu else 0)
    with spy_calls() as calls, implicit_windows(implicit):
        check_int8(op, [q8(x, xs, xz), q8(w, ws, wz), q8(b, xs * ws, 0)], [(expected, ys, y_zp)])
    assert calls and all(calls)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(0, 30), k=st.integers(1, 90), n=st.integers(1, 70), xz=st.sampled_from([0, 255, 77]),
    wz=st.sampled_from([0, 128, 255]), extreme=st.booleans(), wrap=st.booleans(), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_int8_fc_on_the_kernel_matches_reference(rows, k, n, xz, wz, extreme, wrap, seed):
    rng = np.random.default_rng(seed)
    x = _codes(rng, (rows, k), 0, 255, extreme).astype(np.uint8)
    w = _fit_weights(rng, (n, k), wz, extreme)
    b = rng.integers(-(10**5), 10**5, n).astype(np.int32)
    acc = (x.astype(np.int64) - xz) @ (w.astype(np.int64) - wz).T + b
    expected = requantize_all(acc, 0.01, 0.002, 5.0, 100, 0)
    op = CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=5.0, Y_zero_point=100)
    with spy_calls() as calls, wrapping_epilogue(wrap):
        check_int8(op, [q8(x, 0.01, xz), q8(w, 0.002, wz), q8(b, 0.01 * 0.002, 0)], [(expected, 5.0, 100)])
    assert calls and all(calls)


def _fc_case(wz=128):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (5, 12)).astype(np.uint8)
    w = rng.integers(0, 256, (7, 12)).astype(np.uint8)
    b = rng.integers(-1000, 1000, 7).astype(np.int32)
    acc = (x.astype(np.int64) - 9) @ (w.astype(np.int64) - wz).T + b
    expected = requantize_all(acc, 0.01, 0.002, 0.5, 3, 0)
    op = CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=0.5, Y_zero_point=3)
    return op, [q8(x, 0.01, 9), q8(w, 0.002, wz), q8(b, 0.01 * 0.002, 0)], [(expected, 0.5, 3)]


def test_weights_outside_int8_run_the_float_gemm(kernel_calls):
    op, inputs, expected = _fc_case(wz=0)  # w - 0 reaches 255: not int8
    check_int8(op, inputs, expected)
    assert kernel_calls == []


def test_a_failed_compile_falls_back_to_the_float_gemm(monkeypatch, kernel_calls):
    class Broken:
        overloads: dict = {}

        def __call__(self, *args):
            raise RuntimeError("LLVM cannot select this intrinsic")

    module = int8_gemm_path._module()
    monkeypatch.setattr(module, "_gemm", Broken())
    monkeypatch.setattr(kernel_support, "_DISABLED", {})  # the process's own record stays as it was
    with pytest.warns(RuntimeWarning, match="int8_gemm"):
        op, inputs, expected = _fc_case()
        check_int8(op, inputs, expected)
    assert kernel_calls == [False]
    assert not int8_gemm_path.available()


def test_without_vnni_the_ops_run_the_float_gemm():
    code = (
        "import numpy as np\n"
        "from framework.kernels import int8_gemm_path\n"
        "from tests.ops.quantized.test_int8_integer_gemm import _fc_case\n"
        "from tests.ops.quantized.int8_helpers import check_int8\n"
        "assert not int8_gemm_path.available()\n"
        "check_int8(*_fc_case())\n"
        "print('ok')\n"
    )
    env = dict(os.environ, FRAMEWORK_CPU_FEATURES="-avx512vnni")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_wide_3x3_conv_reads_windows_in_place():
    """A 3x3 conv over 40-pixel rows with padding and stride 2 at the default threshold (windows in place)."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 256, (2, 31, 40, 8)).astype(np.uint8)
    w = _fit_weights(rng, (20, 3, 3, 8), 128, False)
    b = rng.integers(-5000, 5000, 20).astype(np.int32)
    for stride in (1, 2):
        op = CreateOperator("Int8ConvRelu", ["X", "W", "b"], ["Y"], kernel=3, pad=1, stride=stride, order="NHWC",
                            Y_scale=0.3, Y_zero_point=5)  # fmt: skip
        acc = conv_reference(x, 7, w, 128, b, stride, (1, 1, 1, 1), 1, 1)
        assert acc.shape[2] >= int8_gemm_path.IMPLICIT_MIN_WIDTH
        expected = requantize_all(acc, 0.02, 0.01, 0.3, 5, 5)
        with spy_calls() as calls:
            check_int8(op, [q8(x, 0.02, 7), q8(w, 0.01, 128), q8(b, 0.0002, 0)], [(expected, 0.3, 5)])
        assert calls and all(calls)


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(), relu=st.booleans(), xz=st.sampled_from([0, 128, 255]), wz=st.sampled_from([0, 128, 255]),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_grouped_int8_conv_runs_one_kernel_gemm_per_group(data, relu, xz, wz, seed):
    rng = np.random.default_rng(seed)
    k = data.draw(st.sampled_from([1, 3]))
    stride, pad = (1, 0) if k == 1 else (data.draw(st.integers(1, 2)), data.draw(st.integers(0, 1)))
    group, cg, mg = data.draw(st.integers(2, 4)), 4 * data.draw(st.integers(1, 3)), data.draw(st.integers(1, 20))
    n, h, wd = data.draw(st.integers(1, 2)), data.draw(st.integers(k, 8)), data.draw(st.integers(k, 8))
    x = rng.integers(0, 256, (n, h, wd, cg * group)).astype(np.uint8)
    w = _fit_weights(rng, (mg * group, k, k, cg), wz, data.draw(st.booleans()))
    b = rng.integers(-5000, 5000, mg * group).astype(np.int32)
    op = CreateOperator(
        "Int8ConvRelu" if relu else "Int8Conv", ["X", "W", "b"], ["Y"], kernel=k, stride=stride, pad=pad,
        group=group, order="NHWC", Y_scale=0.4, Y_zero_point=9,
    )  # fmt: skip
    acc = conv_reference(x, xz, w, wz, b, stride, (pad,) * 4, 1, group)
    expected = requantize_all(acc, 0.02, 0.01, 0.4, 9, 9 if relu else 0)
    with spy_calls() as calls, implicit_windows(True):
        check_int8(op, [q8(x, 0.02, xz), q8(w, 0.01, wz), q8(b, 0.0002, 0)], [(expected, 0.4, 9)])
    assert len(calls) == 2 * group and all(calls)  # two runs (check_int8 runs twice), one GEMM per group each


def test_sums_past_int32_wrap_as_qnnpack_accumulates():
    """K = 67,000 taps of 255 x 127: the dot product passes 2**31 and wraps in the int32 accumulator (QNNPACK's),
    then the bias is added and the Q31 requantization applied; K is past int8_gemm.WRAP_FREE_K, so the epilogue
    takes its wrapping form."""
    k = 67_000
    assert k > int8_gemm_path._module().WRAP_FREE_K
    x = np.full((2, k), 255, np.uint8)
    x[1, :1000] = 0  # the second row stays below 2**31
    w = np.full((3, k), 255, np.uint8)  # centred: 127
    w[2] = 1  # centred: -127, the sum wraps downward... past -2**31
    b = np.array([5, -7, 11], np.int32)
    total = x.astype(np.int64) @ (w.astype(np.int64) - 128).T
    assert total.max() >= 2**31 and total.min() < -(2**31)
    wrapped = ((total + 2**31) % 2**32) - 2**31 + b
    expected = requantize_all(wrapped, 0.01, 0.002, 1e4, 100, 0)
    op = CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=1e4, Y_zero_point=100)
    with spy_calls() as calls:
        check_int8(op, [q8(x, 0.01, 0), q8(w, 0.002, 128), q8(b, 0.01 * 0.002, 0)], [(expected, 1e4, 100)])
    assert calls and all(calls)
