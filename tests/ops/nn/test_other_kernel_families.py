"""The compiled families outside the conv and pool strategies (framework/kernels/catalog.OTHERS: recurrent,
activation, int8, bn_train, range_search): ``framework warmup`` compiles each, and a first compile that fails
disables the family (bn_train's native tasks: that task) with one RuntimeWarning while the op runs its numpy
path and gives the numpy path's values."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.cli import warmup
from framework.core import CreateOperator
from framework.kernels import (
    activation_jit,
    bn_train,
    catalog,
    int8_gemm_path,
    kernel_support,
    native_pool,
    recurrent,
)
from framework.ops.quantized import int8_kernels, range_search
from framework.ops.testing import run_op_on

numba = pytest.importorskip("numba")
_RNG = np.random.default_rng(11)


@pytest.fixture
def fresh(monkeypatch):
    """No family disabled and no kernel called yet, as in a new process (restored afterwards)."""
    monkeypatch.setattr(kernel_support, "_DISABLED", {})
    monkeypatch.setattr(kernel_support, "_COMPILED", set())
    return monkeypatch


def _broken(calls):
    def broken(*args):
        calls.append(1)
        raise numba.core.errors.LoweringError("injected: LLVM cannot select this intrinsic")

    return broken


def _one_warning(seen, family):
    ours = [w for w in seen if issubclass(w.category, RuntimeWarning) and f"'{family}'" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in seen]
    assert "LoweringError" in str(ours[0].message)
    assert family in kernel_support.disabled()


def test_every_other_family_is_known_and_has_a_warm_up():
    """catalog.OTHERS names families kernel_support knows (none of a strategy's) and modules with
    ``warm_up`` and ``available``."""
    families = [f for f, _, _ in catalog.OTHERS]
    assert len(set(families)) == len(families)
    assert set(families) <= set(kernel_support.NEEDS) and not set(families) & set(catalog.families())
    for _, _, name in catalog.OTHERS:
        module = importlib.import_module(name)
        assert callable(module.warm_up) and callable(module.available)


def test_warm_up_compiles_every_other_family(fresh, capsys):
    """warm_others compiles (or loads) every kernel of each family where it can run here: afterwards
    each family's compiled functions have been called once through the guard, and none failed."""
    if not all(m.available() for m in (recurrent, activation_jit, int8_kernels, bn_train, range_search)):
        pytest.skip("numba or scipy missing: nothing to compile")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        done = warmup.warm_others()
    assert [f for f, _, _ in done] == [f for f, _, _ in catalog.OTHERS]
    cells, act = recurrent._cells, activation_jit._k
    compiled = kernel_support._COMPILED
    for fn in (cells.lstm_seq, cells.gru_seq, cells.rnn_seq, cells.lstm_unit, cells.lstm_unit_grad):
        assert fn in compiled, fn
    for fn in (act.erf_flat, act.erf_in_place, act.gelu_rows, act.gelu_rows_in_place, act.layer_norm_rows):
        assert fn in compiled and len(fn.overloads) >= 2, fn  # float32 and float64
    for name in ("add", "requantize", "depthwise"):
        assert int8_kernels._COMPILED[name] in compiled, name
    assert range_search._COMPILED[0] in compiled
    bn = bn_train._module()
    for fn in (bn._relu_grad, bn._max_pool_grad, bn._momentum_update):
        assert fn in compiled, fn
    for name in ("_bn_stats", "_scale_shift", "_bn_grad_stats", "_affine2"):  # SpatialBN's native tasks
        assert name in bn._TASKS, name
    if int8_gemm_path.available():  # AVX-512 VNNI
        gemm = int8_gemm_path._module()._gemm
        assert gemm in compiled and len(gemm.overloads) >= 3  # uint8, int8 and int32 outputs
    for family, _, module in done:
        want = "ready" if not kernel_support.missing(family) else "not for this CPU"
        assert catalog.other_status(family, module).startswith(want)
    assert not kernel_support.disabled()


def _lstm_unit():
    h, c = _RNG.standard_normal((2, 1, 3, 5)).astype(np.float32)
    gates = (3 * _RNG.standard_normal((1, 3, 20))).astype(np.float32)
    op = CreateOperator("LSTMUnit", ["h", "c", "gates", "t"], ["h_out", "c_out"], forget_bias=0.5, sequence_lengths=0)
    return op, [h, c, gates, np.array([0], np.int32)]


def test_recurrent_failed_compile_falls_back(fresh):
    if not recurrent.available():
        pytest.skip("numba or scipy missing: no compiled recurrent kernel")
    op, ins = _lstm_unit()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(recurrent, "available", lambda: False)
        want = run_op_on(op, ins)
    calls = []
    fresh.setattr(recurrent._cells, "lstm_unit", _broken(calls))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = run_op_on(op, ins)
        again = run_op_on(op, ins)
    _one_warning(seen, "recurrent")
    assert len(calls) == 1 and not recurrent.available()
    for a, b, c in zip(got, want, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, b)


@pytest.mark.parametrize(
    "op_type, kernel, kw",
    [("Gelu", "gelu_rows", {}), ("Erf", "erf_flat", {}), ("LayerNorm", "layer_norm_rows", {"axis": 1})],
)
def test_activation_failed_compile_falls_back(op_type, kernel, kw, fresh):
    if not activation_jit.available():
        pytest.skip("numba missing: no compiled activation kernel")
    x = _RNG.standard_normal((8, 24)).astype(np.float32)
    outs = ["Y", "mean", "std"] if op_type == "LayerNorm" else ["Y"]
    op = CreateOperator(op_type, ["X"], outs, **kw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(activation_jit, "_k", None)
        want = run_op_on(op, [x])
    calls = []
    fresh.setattr(activation_jit._k, kernel, _broken(calls))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = run_op_on(op, [x])
        again = run_op_on(op, [x])
    _one_warning(seen, "activation")
    assert len(calls) == 1 and not activation_jit.available()
    for a, b, c in zip(got, want, again):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)  # the numpy path, as without numba
        np.testing.assert_array_equal(c, a)


def test_int8_failed_compile_falls_back(fresh):
    """Each int8 loop, broken at its first call: one warning for the family, the numpy passes' bytes."""
    if not int8_kernels.available():
        pytest.skip("numba missing: no compiled int8 kernel")
    from framework.kernels.geometry import Geometry

    a, b = _RNG.integers(0, 256, (2, 3, 7)).astype(np.uint8)
    acc = np.rint(_RNG.standard_normal((2, 6, 4)) * 3000).astype(np.float32)
    bias = _RNG.integers(-500, 500, 4).astype(np.int64)
    x = _RNG.integers(0, 256, (1, 5, 5, 3)).astype(np.uint8)
    wc = _RNG.integers(-100, 100, (3, 3, 3)).astype(np.int32)
    geo = Geometry((5, 5), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (5, 5))
    params, qparams = (1 << 30, 9), (1 << 30, 12)

    def run():
        add = np.empty((3, 7), np.uint8)
        if not int8_kernels.add_into(a, 3, b, 5, params + (20,), 7, 0, add):
            add = None
        req = np.empty((6, 4), np.uint8)
        int8_kernels.requantize_into(acc, bias, qparams, 9, 0, req)
        dw = np.empty((1, 5, 5, 3), np.uint8)
        int8_kernels.depthwise_into(x, 4, wc, bias[:3], geo, qparams, 9, 9, dw)
        return add, req, dw

    with pytest.MonkeyPatch.context() as m:
        m.setattr(int8_kernels, "_kernel", lambda name: None)
        want = run()
    calls = []
    for name in ("add", "requantize", "depthwise"):
        fresh.setitem(int8_kernels._COMPILED, name, _broken(calls))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = run()
    _one_warning(seen, "int8")
    assert len(calls) == 1 and not int8_kernels.available()
    assert want[0] is None and got[0] is None  # Int8Add then runs its own numpy pass
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, w)


def test_bn_train_failed_compile_falls_back(fresh):
    if not bn_train.available():
        pytest.skip("numba missing: no compiled training SpatialBN kernel")
    x = _RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)
    ins = [x, _RNG.random(3, np.float32) + 0.5, _RNG.standard_normal(3).astype(np.float32)]
    ins += [np.zeros(3, np.float32), np.ones(3, np.float32)]
    op = CreateOperator("SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "rm", "rv", "sm", "sv"], is_test=0)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(bn_train, "_kernels", None)
        want = run_op_on(op, ins)
    calls, mod = [], bn_train._module()
    real_task, broken = mod.task, _broken(calls)
    fresh.setattr(mod, "task", lambda name: broken() if name == "_bn_stats" else real_task(name))
    fresh.setattr(native_pool, "_NO_TASK", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = run_op_on(op, ins)
        again = run_op_on(op, ins)
    ours = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(ours) == 1 and ours[0].startswith("bn_train._bn_stats: its native task did not compile"), ours
    assert "LoweringError" in ours[0] and len(calls) == 1  # not tried again
    for a, b, c in zip(got, want, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, b)


@given(rows=st.integers(1, 5), cols=st.integers(1, 40), bits=st.sampled_from([2, 4, 8]), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_range_search_numpy_losses_equal_the_compiled_ones(rows, cols, bits, seed):
    """The numpy pass (no numba) sums the same float32 values in the same order as the compiled loop."""
    if not range_search.available():
        pytest.skip("numba missing: no compiled loop to compare with")
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * rng.choice([0.01, 1.0, 100.0])).astype(np.float32)
    xmin, xmax = x.min(axis=1), x.max(axis=1)
    xmax[0] = xmin[0] if rows > 1 else xmax[0]  # an empty range too
    got = range_search.quantization_losses(x, xmin, xmax, bits)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(range_search, "_row_losses_kernel", lambda: None)
        want = range_search.quantization_losses(x, xmin, xmax, bits)
    np.testing.assert_array_equal(got, want)


def test_range_search_failed_compile_falls_back(fresh):
    if not range_search.available():
        pytest.skip("numba missing: no compiled loop")
    x = _RNG.standard_normal((3, 50)).astype(np.float32)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(range_search, "_row_losses_kernel", lambda: None)
        want = range_search.greedy_row_ranges(x, 4)
    calls = []
    fresh.setattr(range_search, "_COMPILED", [_broken(calls)])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = range_search.greedy_row_ranges(x, 4)
    _one_warning(seen, "range_search")
    assert len(calls) == 1 and not range_search.available()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_every_family_builds_again_after_a_runtime_reset():
    """RUNTIME.reset() forgets each family's compiled kernels; the next use builds them again from the Python
    functions (a family that had swapped its module's helpers for their dispatchers once jitted those
    dispatchers a second time, a TypeError for every later use). In a subprocess: the reset is process-wide."""
    import subprocess
    import sys

    probe = (
        "import importlib, warnings\n"
        "from framework.kernels import catalog\n"
        "from framework.runtime.state import RUNTIME\n"
        "warnings.simplefilter('error')\n"
        "mods = [importlib.import_module(m) for _, _, m in catalog.OTHERS]\n"
        "for round in range(2):\n"
        "    for m in mods:\n"
        "        if m.available():\n"
        "            m.warm_up()\n"
        "    RUNTIME.reset()\n"
        "print('ok', sum(m.available() for m in mods))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[0] == "ok"
