"""The thresholds that choose between the conv kernels (conv_nchw.conv_kind and ConvNCHW, window_jit,
winograd): shipped defaults, replaced by a per-machine table where ``framework tune`` wrote one.

conv_nchw, window_jit and winograd take their module constants from ``THRESHOLDS`` when first
imported (each constant's comment there says what it decides and what it was measured on). A tuned
table is ``<cache_dir>/dispatch/<machine_key>.json`` (machine.py):

    {"key": "<machine_key>", "thresholds": {"DIRECT_OW": 6, ...}, "measured": {...}}

It is read only when its key is this machine's (CPU model, numba and numpy versions): a table copied
from another machine, or left from other library versions, is ignored. Unknown names and values that
are not non-negative integers are ignored too; names it lacks keep their defaults.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from framework.kernels import machine

# The defaults, as measured on the project's machines (see the comments at each constant).
DEFAULTS: dict[str, int] = {
    # conv_nchw
    "BLOCK_P": 128,
    "BLOCK_BYTES": 4 << 20,
    "SPLIT_MIN_FLOPS": 16_000_000,
    # convs whose parts run as native jobs (native_pool: ~3 us a split, bench.split_cost) split from here
    # (~45 us of work at 90 GFLOP/s): ResNet-20's 1x1 shortcuts and strided-dX phase convs at batch 32 do
    "NATIVE_SPLIT_MIN_FLOPS": 4_000_000,
    "THIN_M": 32,
    "THIN_P": 1024,
    "DIRECT_OW": 5,
    "DIRECT_S2_M": 64,
    "DIRECT_K": 512,
    "POINTWISE_MK_C": 4096,
    "POINTWISE_MK_MAX_C": 1024,
    "POINTWISE_MK_MIN_P": 2,
    "WINOGRAD_C": 96,
    "WINOGRAD_M": 64,
    "WINOGRAD_T": 128,
    # narrow 3x3 outputs that Winograd fits go to it over channel-lane from this harmonic mean of the channel
    # counts (conv_strategies._winograd_narrow)
    "WINOGRAD_NARROW_C": 128,
    "CHANNEL_OW": 14,
    "CHANNEL_S2_K": 64,
    "CHANNEL_S2_1X1_C": 64,
    "CHANNEL_S2_M": 32,
    "CHANNEL_WIDE_C": 192,
    "CHANNEL_1X1_P": 64,
    # window_jit
    "BAND_BYTES": 256 << 10,
    "DIRECT_WIDE_OW": 12,
    "POINTWISE_KC": 128,
    "POINTWISE_KC_BAND": 64,
    # winograd
    "WINOGRAD_BLOCK_BYTES": 8 << 20,
}


def table_path(key: str | None = None) -> Path:
    """Where the tuned table of machine ``key`` (this machine's by default) is."""
    return machine.cache_dir() / "dispatch" / f"{key or machine.machine_key()}.json"


def load(path: Path | None = None, key: str | None = None) -> dict[str, int]:
    """The tuned values at ``path`` (this machine's table by default) whose key is ``key`` (this
    machine's): only known names with non-negative integer values; empty when there is none, it is
    unreadable or it belongs to another machine."""
    key = key or machine.machine_key()
    path = path or table_path(key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("thresholds"), dict):
        return {}
    got = data["thresholds"]
    return {k: v for k, v in got.items() if k in DEFAULTS and type(v) is int and v >= 0}


def thresholds() -> dict[str, int]:
    """The defaults, updated by this machine's tuned table if there is one (``FRAMEWORK_NO_TUNED=1``:
    the defaults alone)."""
    values = dict(DEFAULTS)
    if os.environ.get("FRAMEWORK_NO_TUNED", "") in ("", "0"):
        values.update(load())
    return values


def write(values: dict[str, int], measured: dict | None = None, key: str | None = None) -> Path:
    """Write ``values`` (known names only) as this machine's tuned table, atomically; its path."""
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown dispatch thresholds {unknown}; known: {sorted(DEFAULTS)}")
    key = key or machine.machine_key()
    path = table_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"key": key, "thresholds": values, "measured": measured or {}}, indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".dispatch-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


THRESHOLDS = thresholds()  # what dispatch uses in this process
