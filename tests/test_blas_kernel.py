"""framework/runtime/blas_kernel.py: which OpenBLAS kernels the framework asks for, when, and that a user's choice wins.

The choice acts when the OpenBLAS numpy loads starts up, so each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from framework.runtime.blas_kernel import _cpu, blas_kernel_info, preferred_coretype, same_kernels_env

_PROBE = (
    "import os, json{pre}; import framework; from framework.runtime.blas_kernel import blas_kernel_info; "
    "print(json.dumps([os.environ.get('OPENBLAS_CORETYPE'), blas_kernel_info()]))"
)


def _probe(env_extra: dict, numpy_first: bool = False) -> tuple:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "FRAMEWORK_BLAS_CORETYPE")}
    env.update(env_extra)
    code = _PROBE.format(pre="; import numpy" if numpy_first else "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    core, info = json.loads(out.stdout.strip().splitlines()[-1])
    return core, info


@pytest.mark.parametrize(
    "vendor, flags, want",
    [
        ("AuthenticAMD", {"avx2", "avx512f", "fma"}, "Zen"),  # Zen 4/5: AVX-512 as two 256-bit halves
        ("AuthenticAMD", {"avx2", "fma"}, None),  # Zen 1-3: OpenBLAS already picks its Zen kernels
        ("GenuineIntel", {"avx2", "avx512f"}, None),  # Intel AVX-512: SkylakeX kernels are the right ones
        ("", set(), None),  # no /proc/cpuinfo
    ],
)
def test_preferred_coretype(vendor, flags, want):
    assert preferred_coretype(vendor, flags) == want


def test_auto_choice_follows_the_cpu():
    core, info = _probe({"FRAMEWORK_BLAS_CORETYPE": "auto"})
    assert core == preferred_coretype(*_cpu())
    assert info["chosen"] == core
    assert info["why"]


def test_importing_the_package_changes_nothing_unasked():
    core, info = _probe({})
    assert core is None and info["chosen"] is None and "not asked" in info["why"]


def test_the_framework_command_chooses_for_its_own_process():
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "FRAMEWORK_BLAS_CORETYPE")}
    code = "import os, sys; import framework.cli; print(os.environ.get('OPENBLAS_CORETYPE'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(preferred_coretype(*_cpu()))


def test_user_setting_wins():
    core, info = _probe({"OPENBLAS_CORETYPE": "Haswell"})
    assert core == "Haswell"
    assert "set by the user" in info["why"]


def test_keep_leaves_openblas_alone():
    core, info = _probe({"FRAMEWORK_BLAS_CORETYPE": "keep"})
    assert core is None
    assert info["chosen"] is None


def test_named_coretype_is_applied():
    core, info = _probe({"FRAMEWORK_BLAS_CORETYPE": "Haswell"})
    assert core == "Haswell"
    vendor, flags = _cpu()
    if info.get("library") == "openblas" and "avx2" in flags and "fma" in flags:
        assert info["kernel"] == "Haswell"  # OpenBLAS really runs the kernels asked for


def test_numpy_imported_first_is_reported_not_changed():
    core, info = _probe({}, numpy_first=True)
    assert core is None
    assert "numpy was imported before framework" in info["why"]


def test_same_kernels_env_gives_a_child_this_process_kernels():
    mine = blas_kernel_info().get("kernel")
    env = same_kernels_env({"PATH": os.environ.get("PATH", "")})
    if mine is None:  # no BLAS threadpoolctl can see: nothing to pin
        assert "OPENBLAS_CORETYPE" not in env
        return
    assert env["OPENBLAS_CORETYPE"] == mine
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import framework, json; from framework.runtime.blas_kernel import blas_kernel_info; "
            "print(json.dumps(blas_kernel_info()))",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    child = json.loads(out.stdout.strip().splitlines()[-1])
    assert child["kernel"] == mine and "set by the user" in child["why"]
