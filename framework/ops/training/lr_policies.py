"""LearningRate's policies: ``lr = base_lr * f(iter)``, f as Caffe2's learning-rate functors
(single-precision arithmetic, as Caffe2's float kernel).

===========================  ===================================================================
fixed                        1
step                         gamma ** floor(iter / stepsize)
exp                          gamma ** iter
inv                          (1 + gamma * iter) ** -power
poly                         (1 - iter / max_iter) ** power
linearWarmup                 start_multiplier + (1 - start_multiplier) * iter / num_iter
                             while iter < num_iter, then 1
constantWarmup               multiplier while iter < num_iter, then 1
pieceWarmup                  m1 while iter < n1, m2 while iter < n2, then m3
gate                         multiplier_1 while iter < num_iter, then multiplier_2
slope                        multiplier_1 while iter < num_iter_1, then the line through
                             (num_iter_1, multiplier_1) and (num_iter_2, multiplier_2), bounded
                             below by multiplier_2
alter                        1 during active periods, 0 during inactive ones
                             (period active_period + inactive_period; active_first)
hill                         linearWarmup for num_iter iterations, then
                             max(end_multiplier, inv(iter - num_iter))
constantThenLinearWarmup     start_warmup_multiplier for constant_warmup_num_iter iterations,
                             then a linear warm-up from it over linear_warmup_num_iter, then 1
cyclical                     triangle between 1 and |max_lr / base_lr| with half-period stepsize,
                             its height times decay ** cycle
cosine                       min_lr + (max_lr - min_lr) (1 + cos(pi t / T)) / 2 within restarts
                             of length period (times t_mult each restart), both bounds times
                             lr_shrink ** restart
composite                    sub-policies in turn: sub-policy i (its arguments prefixed
                             ``sub_policy_<i>_``, ``policy`` included) for the next
                             sub_policy_num_iters[i] iterations counted from iteration 1, times its
                             ``sub_policy_<i>_lr_scale`` (default 1); each sees the global iteration
===========================  ===================================================================
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from framework.ops.arguments import convert
from framework.ops.schema import BOOL, FLOAT, INT, INTS, Arg

POLICIES = (
    "fixed",
    "step",
    "exp",
    "inv",
    "poly",
    "linearWarmup",
    "constantWarmup",
    "pieceWarmup",
    "gate",
    "slope",
    "alter",
    "hill",
    "constantThenLinearWarmup",
    "cyclical",
    "cosine",
    "composite",
)

# Arguments the policies read (a composite's sub-policy reads them under its prefix).
POLICY_ARGS = [
    Arg("stepsize", INT, 0, "step/cyclical: iterations per step"),
    Arg("gamma", FLOAT, 0.0, "step/exp/inv/hill: decay factor"),
    Arg("power", FLOAT, 0.0, "inv/poly/hill: exponent"),
    Arg("max_iter", INT, -1, "poly: the iteration where the rate reaches 0"),
    Arg("num_iter", INT, 0, "linearWarmup/constantWarmup/hill/gate: warm-up iterations"),
    Arg("start_multiplier", FLOAT, 0.0, "linearWarmup/hill: multiplier at iteration 0"),
    Arg("multiplier", FLOAT, 0.5, "constantWarmup: multiplier during warm-up"),
    Arg("active_first", BOOL, True, "alter: start with an active period"),
    Arg("active_period", INT, -1, "alter: length of active periods"),
    Arg("inactive_period", INT, -1, "alter: length of inactive periods"),
    Arg("end_multiplier", FLOAT, 0.0, "hill: lower bound of the multiplier"),
    Arg("multiplier_1", FLOAT, None, "gate (default 1) / slope (default 0): the first multiplier"),
    Arg("multiplier_2", FLOAT, None, "gate (default 1) / slope (default 0): the second multiplier"),
    Arg("num_iter_1", INT, 0, "slope: iterations at multiplier_1"),
    Arg("num_iter_2", INT, 0, "slope: the iteration where the line reaches multiplier_2"),
    Arg("m1", FLOAT, 0.5, "pieceWarmup: multiplier before n1"),
    Arg("n1", INT, 0, "pieceWarmup: end of the first piece"),
    Arg("m2", FLOAT, 0.5, "pieceWarmup: multiplier before n2"),
    Arg("n2", INT, 0, "pieceWarmup: end of the second piece"),
    Arg("m3", FLOAT, 0.5, "pieceWarmup: multiplier from n2 on"),
    Arg("start_warmup_multiplier", FLOAT, 0.1, "constantThenLinearWarmup: the constant multiplier"),
    Arg("constant_warmup_num_iter", INT, 10000000, "constantThenLinearWarmup: constant iterations"),
    Arg("linear_warmup_num_iter", INT, 10000000, "constantThenLinearWarmup: linear warm-up iterations"),
    Arg("max_lr", FLOAT, None, "cyclical (default 0.005) / cosine (default 0.5): the upper rate"),
    Arg("decay", FLOAT, 1.0, "cyclical: height factor per cycle"),
    Arg("min_lr", FLOAT, 0.1, "cosine: the lower rate"),
    Arg("period", INT, 50, "cosine: length of the first restart period"),
    Arg("t_mult", FLOAT, 1.0, "cosine: factor on the period at each restart"),
    Arg("lr_shrink", FLOAT, 0.99, "cosine: factor on both bounds at each restart"),
    Arg("sub_policy_num_iters", INTS, [], "composite: iterations of each sub-policy"),
]
_SPECS = {a.name: a for a in POLICY_ARGS}
_POLICY_DEFAULTS = {
    ("gate", "multiplier_1"): 1.0,
    ("gate", "multiplier_2"): 1.0,
    ("slope", "multiplier_1"): 0.0,
    ("slope", "multiplier_2"): 0.0,
    ("cyclical", "max_lr"): 0.005,
    ("cosine", "max_lr"): 0.5,
}

Functor = Callable[[int], float]
f32 = np.float32


class _SubArgs:
    """A composite sub-policy's view of the op's arguments: ``name`` reads ``<prefix>name``."""

    def __init__(self, args: Any, prefix: str, where: str) -> None:
        self._args, self._prefix, self._where = args, prefix, where

    def __getattr__(self, name: str) -> Any:
        key = self._prefix + name
        if key in self._args.extra:
            return convert(key, _SPECS[name].kind, self._args.extra[key], self._where)
        return _SPECS[name].default


def _arg(a: Any, policy: str, name: str) -> Any:
    value = getattr(a, name)
    return _POLICY_DEFAULTS.get((policy, name), value) if value is None else value


def lr_functor(policy: str, a: Any, base_lr: float, where: str = "LearningRate") -> Functor:
    """f(iter) of a LearningRate policy from parsed arguments ``a``; ValueError on a bad policy
    or bad arguments."""
    if policy == "composite":
        return _composite(a, base_lr, where)
    simple = _SIMPLE.get(policy)
    if simple is None:
        raise ValueError(f"unknown learning rate policy '{policy}'; one of {', '.join(POLICIES)}")
    return simple(lambda name: _arg(a, policy, name), base_lr)


def _composite(a: Any, base_lr: float, where: str) -> Functor:
    lengths = a.sub_policy_num_iters
    if not lengths:
        raise ValueError("policy 'composite' needs at least one sub-policy (sub_policy_num_iters)")
    if any(n <= 0 for n in lengths):
        raise ValueError(f"policy 'composite' needs positive sub_policy_num_iters, got {list(lengths)}")
    starts, parts = [], []
    start = 1
    for i, n in enumerate(lengths):
        prefix = f"sub_policy_{i}_"
        sub_policy = a.extra.get(prefix + "policy", b"")
        sub_policy = convert(prefix + "policy", "string", sub_policy, where)
        if sub_policy == "composite":
            raise ValueError("a composite policy cannot have a composite sub-policy")
        scale = a.extra.get(prefix + "lr_scale", 1.0)
        scale = f32(convert(prefix + "lr_scale", FLOAT, scale, where))
        f = lr_functor(sub_policy, _SubArgs(a, prefix, where), base_lr, where)
        starts.append(start)
        parts.append((f, scale))
        start += n

    def composite(it: int) -> float:
        # Iterations before the first start (Caffe2 reads outside its table there) use the first
        # sub-policy; after the last one's span, the last sub-policy continues.
        k = max(int(np.searchsorted(starts, it, side="right")) - 1, 0)
        f, scale = parts[k]
        return f32(f(it)) * scale

    return composite


def _step(g: Callable[[str], Any], base_lr: float) -> Functor:
    if g("stepsize") <= 0:
        raise ValueError(f"policy 'step' needs stepsize > 0, got {g('stepsize')}")
    gamma, stepsize = f32(g("gamma")), g("stepsize")
    return lambda it: gamma ** f32(it // stepsize)


def _exp(g: Callable[[str], Any], base_lr: float) -> Functor:
    gamma = f32(g("gamma"))
    return lambda it: gamma ** f32(it)


def _inv(g: Callable[[str], Any], base_lr: float) -> Functor:
    gamma, power = f32(g("gamma")), f32(g("power"))
    return lambda it: (f32(1) + gamma * f32(it)) ** -power


def _poly(g: Callable[[str], Any], base_lr: float) -> Functor:
    power, max_iter = f32(g("power")), f32(g("max_iter"))
    return lambda it: (f32(1) - f32(it) / max_iter) ** power


def _linear_warmup(start: np.float32, num_iter: int) -> Functor:
    def warm(it: int) -> float:
        if it >= num_iter:
            return 1.0
        return start + (f32(1) - start) * f32(it) / f32(num_iter)

    return warm


def _constant_warmup(g: Callable[[str], Any], base_lr: float) -> Functor:
    mult, num_iter = f32(g("multiplier")), g("num_iter")
    return lambda it: mult if it < num_iter else 1.0


def _piece_warmup(g: Callable[[str], Any], base_lr: float) -> Functor:
    m1, m2, m3, n1, n2 = f32(g("m1")), f32(g("m2")), f32(g("m3")), g("n1"), g("n2")
    return lambda it: m1 if it < n1 else (m2 if it < n2 else m3)


def _gate(g: Callable[[str], Any], base_lr: float) -> Functor:
    m1, m2, num_iter = f32(g("multiplier_1")), f32(g("multiplier_2")), g("num_iter")
    return lambda it: m2 if it >= num_iter else m1


def _slope(g: Callable[[str], Any], base_lr: float) -> Functor:
    m1, m2, n1, n2 = f32(g("multiplier_1")), f32(g("multiplier_2")), g("num_iter_1"), g("num_iter_2")
    if n1 <= 0 or n2 <= n1:
        raise ValueError(f"policy 'slope' needs 0 < num_iter_1 < num_iter_2, got {n1}, {n2}")
    rate = (m2 - m1) / f32(n2 - n1)
    return lambda it: m1 if it < n1 else max(m1 + f32(it - n1) * rate, m2)


def _alter(g: Callable[[str], Any], base_lr: float) -> Functor:
    active, inactive, first = g("active_period"), g("inactive_period"), g("active_first")
    if active < 0 or inactive < 0 or active + inactive == 0:
        raise ValueError(f"policy 'alter' needs active_period and inactive_period >= 0, got {active}, {inactive}")

    def alter(it: int) -> float:
        in_first = it % (active + inactive) < (active if first else inactive)
        return float(in_first == first)

    return alter


def _hill(g: Callable[[str], Any], base_lr: float) -> Functor:
    warm = _linear_warmup(f32(g("start_multiplier")), g("num_iter"))
    gamma, power, end, num_iter = f32(g("gamma")), f32(g("power")), f32(g("end_multiplier")), g("num_iter")
    return lambda it: warm(it) if it < num_iter else max(end, (f32(1) + gamma * f32(it - num_iter)) ** -power)


def _constant_then_linear(g: Callable[[str], Any], base_lr: float) -> Functor:
    start = f32(g("start_warmup_multiplier"))
    n_const, n_lin = g("constant_warmup_num_iter"), g("linear_warmup_num_iter")
    warm = _linear_warmup(start, n_lin)
    return lambda it: start if it < n_const else (warm(it - n_const) if it < n_const + n_lin else 1.0)


def _cyclical(g: Callable[[str], Any], base_lr: float) -> Functor:
    stepsize, decay = g("stepsize"), f32(g("decay"))
    if stepsize <= 0:
        raise ValueError(f"policy 'cyclical' needs stepsize > 0, got {stepsize}")
    height = f32(abs(g("max_lr"))) / f32(abs(base_lr)) - f32(1)

    def cyclical(it: int) -> float:
        cycle = it // (2 * stepsize)
        x = abs(f32(it) / f32(stepsize) - f32(2 * (cycle + 1)) + f32(1))
        return f32(1) + height * max(f32(0), f32(1) - x) * decay ** f32(cycle)

    return cyclical


def _cosine(g: Callable[[str], Any], base_lr: float) -> Functor:
    lo, hi, period = f32(g("min_lr")), f32(g("max_lr")), g("period")
    t_mult, shrink = f32(g("t_mult")), f32(g("lr_shrink"))
    if period <= 0:
        raise ValueError(f"policy 'cosine' needs period > 0, got {period}")

    def cosine(it: int) -> float:
        if t_mult != 1:
            i = math.floor(math.log(1 - it / period * (1 - float(t_mult))) / math.log(float(t_mult)))
            t_i = float(t_mult) ** i * period
            t_curr = it - (1 - float(t_mult) ** i) / (1 - float(t_mult)) * period
        else:
            i = math.floor(it / period)
            t_i = period
            t_curr = it - t_i * i
        s = shrink ** f32(i)
        return f32(lo * s + f32(0.5) * (hi * s - lo * s) * f32(1 + math.cos(math.pi * t_curr / t_i)))

    return cosine


_SIMPLE: dict[str, Callable[[Callable[[str], Any], float], Functor]] = {
    "fixed": lambda g, base_lr: lambda it: 1.0,
    "step": _step,
    "exp": _exp,
    "inv": _inv,
    "poly": _poly,
    "linearWarmup": lambda g, base_lr: _linear_warmup(f32(g("start_multiplier")), g("num_iter")),
    "constantWarmup": _constant_warmup,
    "pieceWarmup": _piece_warmup,
    "gate": _gate,
    "slope": _slope,
    "alter": _alter,
    "hill": _hill,
    "constantThenLinearWarmup": _constant_then_linear,
    "cyclical": _cyclical,
    "cosine": _cosine,
}
