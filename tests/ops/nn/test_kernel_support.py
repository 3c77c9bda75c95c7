"""The compiled kernels run only where they can (framework/kernels/kernel_support.py): a CPU without FMA
or AVX-512 gets the kernels that fit it (or the numpy ones), and a kernel whose compile fails is
disabled with one warning while the op runs its numpy kernel: every path gives the numpy path's values."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.kernels import conv_strategies, kernel_support, window_jit
from framework.memory.workspace import Workspace
from framework.ops import create_operator

numba = pytest.importorskip("numba")
llvm = pytest.importorskip("llvmlite.binding")

_RNG = np.random.default_rng(7)


def _conv(name, c, m, hw, k, **kw):
    x = _RNG.standard_normal((2, c, hw, hw)).astype(np.float32)
    w = _RNG.standard_normal((m, c // kw.get("group", 1), k, k)).astype(np.float32)
    b = _RNG.standard_normal(m).astype(np.float32)
    op = CreateOperator("ConvFusion", ["X", "W", "b"], ["Y"], kernel=k, fusion_type=1, **kw)
    return name, op, {"X": x, "W": w, "b": b}


def _pool(name, op_type, k, s, pad, hw=13):
    x = _RNG.standard_normal((2, 6, hw, hw)).astype(np.float32)
    return name, CreateOperator(op_type, ["X"], ["Y"], kernel=k, stride=s, pad=pad), {"X": x}


def _bn():
    x = _RNG.standard_normal((2, 5, 7, 7)).astype(np.float32)
    feeds = {"X": x, "s": _RNG.random(5, np.float32) + 0.5, "o": _RNG.standard_normal(5).astype(np.float32)}
    feeds |= {"mu": _RNG.standard_normal(5).astype(np.float32), "var": _RNG.random(5, np.float32) + 0.5}
    return "scale_shift", CreateOperator("SpatialBN", ["X", "s", "o", "mu", "var"], ["Y"], is_test=1), feeds


# (family, op, feeds): each op's first compiled kernel is the family's (conv_nchw.conv_kind's rules)
CASES = [
    _conv("direct", 8, 16, 20, 3, pad=1),
    _conv("channel", 16, 32, 8, 3, pad=1),
    _conv("pointwise", 16, 32, 17, 1),
    _conv("winograd", 192, 64, 16, 3, pad=1),
    _conv("depthwise3", 8, 8, 12, 3, pad=1, group=8),
    _conv("direct_depthwise", 8, 8, 12, 7, pad=3, group=8),
    _conv("depthwise", 8, 8, 12, 7, pad=3, stride=2, group=8),
    _conv("epilogue", 8, 48, 12, 3, pad=2, dilation=2),
    _pool("max_pool", "MaxPool", 3, 2, 1),
    _pool("pool", "AveragePool", 3, 2, 1),
    _pool("pool2x2", "MaxPool", 2, 2, 0, hw=12),
    _bn(),
]
# the compiled function behind each family: (module, attribute) where window_jit looks it up per call
KERNELS = {
    "direct": ("microkernel", "_conv"),
    "channel": ("channel_kernel", "_conv"),
    "pointwise": ("microkernel", "_pointwise"),
    "winograd": ("winograd_kernels", "_input"),
    "depthwise3": ("depthwise3", "_depthwise3"),
    "direct_depthwise": ("microkernel", "_depthwise"),
    "depthwise": ("window_kernels", "_depthwise"),
    "epilogue": ("window_kernels", "_epilogue"),
    "max_pool": ("window_kernels", "_max_pool"),
    "pool": ("window_kernels", "_pool"),
    "pool2x2": ("window_kernels", "_pool2x2"),
    "scale_shift": ("window_kernels", "_scale_shift"),
}


def _run(op_def, feeds, jit=True, times=1):
    """Output of ``op_def`` (run ``times`` times) with the compiled kernels on or off; (output, op)."""
    with pytest.MonkeyPatch.context() as mp:
        if not jit:
            mp.setattr(window_jit, "_kernels", None)
        ws = Workspace()
        for k, v in feeds.items():
            ws.feed_blob(k, v)
        op = create_operator(op_def, ws)
        for _ in range(times):
            op.run()
        return ws.fetch_blob(op_def.output[0]).copy(), op


@pytest.fixture
def fresh(monkeypatch):
    """No family disabled and no kernel called yet, as in a new process (restored afterwards)."""
    monkeypatch.setattr(kernel_support, "_DISABLED", {})
    monkeypatch.setattr(kernel_support, "_COMPILED", set())
    monkeypatch.setattr(window_jit, "_CALLED", set())
    return monkeypatch


def _host() -> frozenset:
    return frozenset(f[1:] for f in llvm.get_host_cpu_features().flatten().split(",") if f.startswith("+"))


def test_features_are_the_hosts_and_the_ir_kernels_need_avx2_and_fma(monkeypatch):
    host = _host()
    assert kernel_support.host_features() <= host
    monkeypatch.setattr(kernel_support, "_FEATURES", [frozenset({"avx2", "fma", "sse4.2"})])
    assert kernel_support.missing("direct", lanes=8) == ()
    assert kernel_support.missing("direct", lanes=16) == ("avx512f",)
    assert kernel_support.missing("depthwise", lanes=16) == ()  # plain numba loops: any CPU
    monkeypatch.setattr(kernel_support, "_FEATURES", [frozenset({"avx", "sse4.2"})])  # x86-64-v2 + AVX
    assert kernel_support.missing("channel", lanes=8) == ("avx2", "fma")
    assert kernel_support.missing("max_pool", lanes=8) == ("avx2",)  # no multiplies: no FMA needed
    monkeypatch.setattr(kernel_support.platform, "machine", lambda: "aarch64")
    assert kernel_support.missing("direct", lanes=8) and not kernel_support.missing("winograd", lanes=8)


def test_masked_features_env(monkeypatch):
    monkeypatch.setattr(kernel_support, "_FEATURES", [])
    monkeypatch.setenv("FRAMEWORK_CPU_FEATURES", "-fma, -avx512f,+bogus")
    got = kernel_support.host_features()
    assert "fma" not in got and "avx512f" not in got and "bogus" not in got
    assert got == _host() - {"fma", "avx512f"}


@pytest.mark.skipif(not {"avx2", "fma"} <= _host(), reason="the compiled IR kernels need AVX2 and FMA")
@pytest.mark.parametrize("family, op_def, feeds", CASES, ids=[c[0] for c in CASES])
def test_without_fma_the_numpy_or_loop_kernels_run(family, op_def, feeds, fresh):
    """A CPU without FMA: no IR kernel that multiplies is chosen, nothing warns, values as numpy's."""
    got, op = _run(op_def, feeds)  # with FMA, this machine's choice
    if family in ("direct", "channel", "pointwise", "depthwise3", "direct_depthwise"):
        assert _uses(op, family)
    fresh.setattr(kernel_support, "_FEATURES", [kernel_support.host_features() - {"fma"}])
    want, _ = _run(op_def, feeds, jit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, op = _run(op_def, feeds, times=2)
    if kernel_support.NEEDS[family]:
        assert not _uses(op, family)
    _close(got, want)


@pytest.mark.parametrize("family, op_def, feeds", CASES, ids=[c[0] for c in CASES])
def test_a_failed_compile_warns_once_and_runs_the_numpy_kernel(family, op_def, feeds, fresh):
    """The family's compiled function raises numba's LoweringError on its first call (a compile that
    fails): one RuntimeWarning naming it, over two ops and two runs each; the values are the numpy
    path's; the family is disabled for the process (``usable`` False, not chosen again)."""
    if not kernel_support.usable(family):
        pytest.skip(f"'{family}' is not usable on this CPU: {kernel_support.missing(family)}")
    if family == "winograd":
        fresh.setattr(conv_strategies.CHANNEL, "enabled", False)
    want, _ = _run(op_def, feeds, jit=False)
    _, op = _run(op_def, feeds)
    assert _uses(op, family), f"the case does not reach '{family}'"
    calls = []

    def broken(*args):
        calls.append(1)
        raise numba.core.errors.LoweringError("injected: LLVM cannot select this intrinsic")

    module, attr = KERNELS[family]
    fresh.setattr(__import__(f"framework.kernels.{module}", fromlist=[attr]), attr, broken)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got, op = _run(op_def, feeds, times=2)
        again, op2 = _run(op_def, feeds, times=2)
    ours = [w for w in seen if issubclass(w.category, RuntimeWarning) and f"'{family}'" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in seen]
    assert "LoweringError" in str(ours[0].message)
    assert not kernel_support.usable(family) and family in kernel_support.disabled()
    assert len(calls) == 1  # tried once, then never chosen
    assert not _uses(op2, family)
    _close(got, want)
    np.testing.assert_array_equal(again, got)


def test_an_error_after_the_compile_propagates(fresh):
    """A kernel that compiled and then raised while running is not a machine problem: the error
    reaches the caller and nothing is disabled."""

    @numba.njit
    def bad(a):
        return 1 // a

    with pytest.raises(ZeroDivisionError):
        kernel_support.call("direct", bad, (0,))
    assert kernel_support.usable("direct") == (not kernel_support.missing("direct"))


def test_a_new_signature_that_fails_to_compile_disables_the_family(fresh):
    """numba compiles a kernel anew for each argument-type signature: a later call whose new signature
    cannot be typed is guarded as a first call is (one warning, the family disabled, KernelUnavailable),
    while a later signature that compiles and then raises is the kernel's own error."""

    @numba.njit
    def first_row(a, out):
        out[0] = a[0] + 1

    out = np.zeros(1, np.float32)
    assert kernel_support.call("direct", first_row, (np.ones(3, np.float32), out))  # compiles
    assert not kernel_support.call("direct", first_row, (np.full(3, 2, np.float32), out))
    assert out[0] == 3
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(kernel_support.KernelUnavailable):  # a[0] is a row: no scalar store types
            kernel_support.call("direct", first_row, (np.ones((2, 3), np.float32), out))
        with pytest.raises(kernel_support.KernelUnavailable):  # disabled: not tried again
            kernel_support.call("direct", first_row, (np.ones((2, 3), np.float32), out))
    ours = [w for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(ours) == 1 and "'direct'" in str(ours[0].message) and "TypingError" in str(ours[0].message)
    assert "direct" in kernel_support.disabled() and out[0] == 3

    @numba.njit
    def bad(a):
        return 1 // a

    assert kernel_support.call("channel", bad, (1,))
    with pytest.raises(ZeroDivisionError):  # a compiled signature raising
        kernel_support.call("channel", bad, (0,))
    with pytest.raises(ZeroDivisionError):  # a new signature that compiles, then raises
        kernel_support.call("channel", bad, (0.0,))
    assert "channel" not in kernel_support.disabled()


def test_an_ops_later_kernel_call_failing_to_compile_runs_the_numpy_kernel(fresh):
    """A pooling op's kernel already called in this process (so its calls are not first calls) raising
    numba's TypingError, as a new signature that cannot be typed would: one warning, numpy values."""
    family, op_def, feeds = next(c for c in CASES if c[0] == "max_pool")
    if not kernel_support.usable(family):
        pytest.skip(f"'{family}' is not usable on this CPU: {kernel_support.missing(family)}")
    want, _ = _run(op_def, feeds, jit=False)

    def broken(*args):
        raise numba.core.errors.TypingError("injected: no implementation for these argument types")

    from framework.kernels import window_kernels

    fresh.setattr(window_kernels, "_max_pool", broken)
    fresh.setattr(kernel_support, "_COMPILED", {broken})  # as if called before with other types
    fresh.setattr(window_jit, "_CALLED", {broken})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got, op = _run(op_def, feeds, times=2)
    ours = [w for w in seen if issubclass(w.category, RuntimeWarning) and "'max_pool'" in str(w.message)]
    assert len(ours) == 1 and family in kernel_support.disabled()
    _close(got, want)


def test_concatenated_channels_survive_a_fallback(fresh):
    """ConvFusion writing channels 3:19 of a concatenation through a kernel that writes slices
    (direct) whose compile fails: the fallback (im2col) writes its own buffer, copied into them."""
    if not kernel_support.usable("direct"):
        pytest.skip("direct is not usable on this CPU")
    _, op_def, feeds = CASES[0]
    op_def = CreateOperator(
        "ConvFusion", ["X", "W", "b"], ["Y"], kernel=3, pad=1, fusion_type=1, out_channels=24, out_channel_offset=3
    )
    want, _ = _run(op_def, feeds, jit=False)

    def broken(*args):
        raise numba.core.errors.TypingError("injected")

    from framework.kernels import microkernel

    fresh.setattr(microkernel, "_conv", broken)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        got, op = _run(op_def, feeds, times=2)
    assert op._kernel._slice_out is not None
    _close(got[:, 3:19], want[:, 3:19])


def _close(got, want) -> None:
    """Equal up to float32 rounding of sums as long as a conv's (relative to the outputs' scale)."""
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def _uses(op, family: str) -> bool:
    """Whether ``op``'s prepared kernel is ``family``'s compiled one."""
    k = getattr(op, "_kernel", None)
    sep = getattr(op, "_sep", None)
    if family in ("direct", "channel", "winograd"):
        return k is not None and k.kind == family
    if family == "pointwise":
        return k is not None and k.mk
    if family == "depthwise3":
        return k is not None and k.dw3
    if family == "direct_depthwise":
        return k is not None and k.dmk
    if family == "depthwise":
        return k is not None and k.jit and not (k.dw3 or k.dmk)
    if family == "epilogue":
        return k is not None and k.kind == "im2col" and k.jit_epilogue and kernel_support.usable("epilogue")
    if family == "max_pool":
        return sep is not None and getattr(sep, "direct", False) and sep._fallback is None
    if family == "pool":
        return sep is not None and hasattr(sep, "jit") and not sep.direct and not sep.two and sep._fallback is None
    if family == "pool2x2":
        return sep is not None and getattr(sep, "two", False) and sep._fallback is None
    if family == "scale_shift":
        return kernel_support.usable("scale_shift") and window_jit.available()
    raise AssertionError(family)


_SUBPROCESS = """
import warnings
import numpy as np
from framework.kernels import kernel_support, simd_ir
from tests.ops.nn.test_kernel_support import CASES, _close, _run, _uses
print("lanes", simd_ir.L)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for family, op_def, feeds in CASES:
        if family in FAMILIES:
            want, _ = _run(op_def, feeds, jit=False)
            got, op = _run(op_def, feeds, times=2)
            _close(got, want)
            print(family, "compiled" if _uses(op, family) else "numpy")
print("warnings", len([w for w in seen if issubclass(w.category, RuntimeWarning)]))
print("disabled", sorted(kernel_support.disabled()))
"""


def _subprocess(tmp_path, families, prelude="", then="", **env) -> str:
    code = prelude + _SUBPROCESS.replace("FAMILIES", repr(families)) + then
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), **env)  # an empty cache: it compiles
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    run = subprocess.run
    out = run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


@pytest.mark.skipif(not {"avx2", "fma"} <= _host(), reason="the compiled IR kernels need AVX2 and FMA")
def test_without_avx512_the_8_lane_kernels_run(tmp_path):
    """A CPU without AVX-512 (masked off): 8-lane IR kernels, compiled and equal to numpy's, and on more
    geometries equal to float64 references (test_window_jit.check_8_lane_kernels, in the same process: one
    compile of the 8-lane kernels); 16 lanes forced on it: not used (the numpy kernels run), no warning
    either way."""
    then = "from tests.ops.nn.test_window_jit import check_8_lane_kernels\ncheck_8_lane_kernels()\nprint('refs ok')\n"
    out = _subprocess(tmp_path, ["direct", "depthwise3", "max_pool"], then=then, FRAMEWORK_CPU_FEATURES="-avx512f")
    assert "lanes 8" in out and "direct compiled" in out and "depthwise3 compiled" in out, out
    assert "max_pool compiled" in out and "warnings 0" in out and "refs ok" in out, out
    out = _subprocess(
        tmp_path, ["direct", "max_pool"], FRAMEWORK_CPU_FEATURES="-avx512f", FRAMEWORK_MICROKERNEL_LANES="16"
    )
    assert "lanes 16" in out and "direct numpy" in out and "max_pool numpy" in out and "warnings 0" in out, out


_OLD_LLVMLITE = """
import types
from llvmlite import ir
from framework.kernels import channel_kernel, depthwise3, microkernel, pool_columns
def _typed_only(pointee, *args, **kw):  # llvmlite < 0.44: no opaque pointers
    return ir.PointerType(pointee, *args, **kw)
old = types.SimpleNamespace(**{k: getattr(ir, k) for k in dir(ir) if not k.startswith("_")})
old.PointerType = _typed_only
for module in (channel_kernel, depthwise3, microkernel, pool_columns):  # the IR our kernels build
    module.ir = old
"""


@pytest.mark.skipif(not {"avx2", "fma"} <= _host(), reason="the compiled IR kernels need AVX2 and FMA")
def test_an_llvmlite_without_opaque_pointers_falls_back(tmp_path):
    """The IR kernels built against an llvmlite whose ``ir.PointerType()`` needs a pointee (0.43, as
    numba 0.60 brings): their compile fails inside numba; each family warns once, the numpy kernels
    give the same values, the plain numba loops still compile."""
    out = _subprocess(tmp_path, ["direct", "channel", "depthwise", "max_pool"], prelude=_OLD_LLVMLITE)
    assert "direct numpy" in out and "channel numpy" in out and "depthwise compiled" in out, out
    assert "max_pool numpy" in out and "warnings 3" in out, out
    assert "disabled ['channel', 'direct', 'max_pool']" in out, out
