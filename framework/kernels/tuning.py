"""Measure the conv kernels on this machine and derive the dispatch thresholds that depend most on it
(``framework tune``); the result is written as this machine's table (dispatch_table.write).

Each *sweep* is one threshold: a family of conv shapes along one axis (input channels, output
width), every shape run with the kernel the threshold gives it on one side and the kernel it gives
it on the other (forced by setting the thresholds of dispatch_table.THRESHOLDS for the measurement), 1 thread, batch 1
(16 where the shipped default was measured at 16), bias + Relu; the threshold becomes the point along
the axis where the other kernel starts to win. Times are the process's CPU time, the best of several
rounds. Thresholds without a sweep keep their shipped defaults (dispatch_table.DEFAULTS), and so does
a sweep's threshold where a kernel it compares is not usable here (no numba, a CPU without what the
kernel needs).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Callable, NamedTuple

import numpy as np

from framework.kernels import conv_nchw, conv_strategies, window_jit
from framework.kernels.dispatch_table import THRESHOLDS
from framework.kernels.geometry import Geometry
from framework.kernels.kernel_support import usable


class Sweep(NamedTuple):
    name: str  # the threshold
    doc: str
    axis: tuple  # values along the sweep's axis
    shape: Callable  # axis value -> (c, m, kernel, stride, pad, output size)
    first: dict  # thresholds giving every shape the kernel used at the low end of the axis
    second: dict  # ... the kernel used at the high end
    strategies: tuple  # the conv strategies (conv_strategies names) the sweep compares
    rule: str  # "last_first": the last axis value the first kernel wins; "first_second": the first the second wins
    batch: int = 1  # images per run

    @property
    def needs(self) -> tuple:
        """The compiled kernel families (kernel_support) the compared strategies call."""
        return tuple(dict.fromkeys(f for name in self.strategies for f in conv_strategies.BY_NAME[name].families))


_BIG = 1 << 30
SWEEPS = (
    Sweep(
        "POINTWISE_MK_C",
        "1x1 convs up to this many input channels on the micro-kernel, over more on BLAS's GEMM",
        (32, 64, 128, 256, 512, 1024, 2048),
        lambda c: (c, 128, 1, 1, 0, 28),
        {"POINTWISE_MK_C": _BIG},
        {"POINTWISE_MK_C": 0, "POINTWISE_MK_MAX_C": 0},
        ("pointwise_mk", "pointwise"),
        "last_first",
    ),
    Sweep(
        "WINOGRAD_NARROW_C",
        "narrow 3x3 stride-1 convs that Winograd fits (batch 16) on it from this many channels, under it on the"
        " channel-lane kernel",
        (64, 96, 128, 192, 256, 384),
        lambda c: (c, c, 3, 1, 1, 14),
        {"WINOGRAD_NARROW_C": _BIG},
        {"WINOGRAD_NARROW_C": 0, "WINOGRAD_C": 0, "WINOGRAD_M": 0},
        ("channel", "winograd"),
        "first_second",
        16,
    ),
    Sweep(
        "CHANNEL_WIDE_C",
        "wide 3x3 stride-1 convs under this many input channels on the channel-lane kernel, from it on Winograd"
        " (batch 16)",
        (64, 96, 128, 192, 256, 384),
        lambda c: (c, c, 3, 1, 1, 14),
        {"CHANNEL_WIDE_C": _BIG, "WINOGRAD_NARROW_C": _BIG},
        {"CHANNEL_WIDE_C": 0, "CHANNEL_OW": 0, "WINOGRAD_C": 0, "WINOGRAD_M": 0, "WINOGRAD_T": 0},
        ("channel", "winograd"),
        "first_second",
        16,  # Winograd's 16 GEMMs need columns (tiles of the batch) to win: its default was measured at batch 16
    ),
    Sweep(
        "CHANNEL_OW",
        "3x3 convs over many channels with outputs up to this wide on the channel-lane kernel, wider on the"
        " direct kernel or Winograd",
        (7, 10, 14, 20, 28),
        lambda ow: (256, 256, 3, 1, 1, ow),
        {"CHANNEL_OW": _BIG, "CHANNEL_WIDE_C": 0, "WINOGRAD_NARROW_C": _BIG},
        {"CHANNEL_OW": 0, "CHANNEL_WIDE_C": 0},
        ("channel", "direct", "winograd"),
        "last_first",
    ),
)


@contextlib.contextmanager
def overridden(values: dict):
    """The dispatch thresholds (dispatch_table.THRESHOLDS) set to ``values`` inside the block (restored after)."""
    old = {k: THRESHOLDS[k] for k in values}
    try:
        THRESHOLDS.update(values)
        yield
    finally:
        THRESHOLDS.update(old)


def _geometry(k, s, pad, out):
    h = (out - 1) * s + k - 2 * pad
    return Geometry((h, h), (k, k), (s, s), (1, 1), (pad, pad), (pad, pad), (out, out))


def kinds(sweep: Sweep, v) -> tuple[str, str]:
    """The kernels the two sides of ``sweep`` give the shape at axis value ``v`` (as time_conv names them)."""
    c, m, k, s, pad, out = sweep.shape(v)
    got = []
    for values in (sweep.first, sweep.second):
        with overridden(values):
            conv = conv_nchw.ConvNCHW(sweep.batch, c, m, 1, _geometry(k, s, pad, out), np.float32, True, relu=True)
        got.append("pointwise-mk" if conv.mk else conv.kind)
    return got[0], got[1]


def time_conv(c, m, k, s, pad, out, n: int = 1, rounds: int = 7, budget: float = 0.02) -> tuple[float, str]:
    """(best CPU seconds per run, kernel kind) of a prepared ConvNCHW of that shape (``n`` images, bias,
    Relu) under the current constants; the first run (compile, filter packing) is not timed. CPU time
    of the process (one thread runs): other processes on the cores do not add to it, as they add to
    wall time."""
    geo = _geometry(k, s, pad, out)
    h = geo.spatial[0]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, h), np.float32)
    w = rng.standard_normal((m, c, k, k), np.float32)
    b = rng.standard_normal(m, np.float32)
    y = np.empty((n, m, out, out), np.float32)
    conv = conv_nchw.ConvNCHW(n, c, m, 1, geo, np.float32, True, relu=True)
    kind = "pointwise-mk" if conv.mk else conv.kind
    clock = time.process_time
    conv.run(x, w, b, y)
    t = clock()
    conv.run(x, w, b, y)
    reps = max(1, int(budget / max(clock() - t, 1e-6)))
    best = float("inf")
    for _ in range(rounds):
        t = clock()
        for _ in range(reps):
            conv.run(x, w, b, y)
        best = min(best, (clock() - t) / reps)
    return best, kind


def run_sweep(sweep: Sweep, log=print) -> tuple[int | None, list]:
    """(the threshold, rows (axis value, first kind, first s, second kind, second s)); None where
    a kernel it compares is not usable here (or both sides ran the same kernel)."""
    if not window_jit.available() or not all(usable(f) for f in sweep.needs):
        return None, []
    rows = []
    for v in sweep.axis:
        c, m, k, s, pad, out = sweep.shape(v)
        with overridden(sweep.first):
            t1, k1 = time_conv(c, m, k, s, pad, out, sweep.batch)
        with overridden(sweep.second):
            t2, k2 = time_conv(c, m, k, s, pad, out, sweep.batch)
        rows.append((v, k1, t1, k2, t2))
        log(f"  {sweep.name} {v:>5}: {k1} {t1 * 1e3:8.3f} ms   {k2} {t2 * 1e3:8.3f} ms")
        if k1 == k2:  # the forced constants did not separate the kernels: nothing to decide
            log(f"  both sides ran {k1}: {sweep.name} not measured")
            return None, rows
    return crossover(rows, sweep.rule, sweep.axis), rows


def crossover(rows, rule: str, axis) -> int:
    """The threshold that would have run the sweep's shapes fastest, counting each shape alike (the sum
    of log time ratios, so one large shape does not outweigh the rest and one noisy point does not
    end a run of wins): ``last_first`` the axis value up to which the first kernel runs (0: never),
    ``first_second`` the one from which the second runs (past the axis, its last value + 1: never).
    Ties keep the first kernel on more shapes."""
    gain = [math.log(t1 / t2) for _, _, t1, _, t2 in rows]  # < 0 where the first kernel is faster
    values = [v for v, *_ in rows]
    if rule == "last_first":  # first kernel on rows[:i]
        costs = [(sum(gain[:i]), -i) for i in range(len(rows) + 1)]
        best = min(range(len(costs)), key=costs.__getitem__)
        return values[best - 1] if best else 0
    costs = [(-sum(gain[i:]), -i) for i in range(len(rows) + 1)]  # second kernel on rows[i:]
    best = min(range(len(costs)), key=costs.__getitem__)
    return values[best] if best < len(rows) else axis[-1] + 1


def tune(log=print) -> tuple[dict, dict]:
    """(thresholds measured here, the measurements) over SWEEPS, on one thread."""
    from framework.runtime.parallel import get_num_threads, set_num_threads

    threads = get_num_threads()
    set_num_threads(1)
    values, measured = {}, {}
    try:
        for sweep in SWEEPS:
            log(f"{sweep.name}: {sweep.doc} (strategies: {', '.join(sweep.strategies)})")
            got, rows = run_sweep(sweep, log)
            if got is None:
                log(f"  not measured ({', '.join(sweep.needs)} not usable here): the default stays")
                continue
            values[sweep.name] = got
            measured[sweep.name] = [[v, k1, round(t1 * 1e6, 1), k2, round(t2 * 1e6, 1)] for v, k1, t1, k2, t2 in rows]
            log(f"  -> {sweep.name} = {got}")
    finally:
        set_num_threads(threads)
    return values, measured
