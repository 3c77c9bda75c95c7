"""ONNXAdagrad / ONNXAdam / ONNXMomentum against numpy references of the ONNX spec's formulas,
with several tensors updated at once."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, ShapeError
from framework.ops.testing import assert_reference_checks, run_op_on


def _tensors(data, n, k):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    shapes = [tuple(rng.integers(0, 4, rng.integers(0, 3))) for _ in range(n)]
    groups = [[rng.standard_normal(s) for s in shapes] for _ in range(k)]
    groups[-1] = [np.abs(a) for a in groups[-1]]  # second moments are non-negative
    return [a for grp in groups for a in grp]


def _op(kind, n, k, **args):
    ins = ["R", "T"] + [f"in{j}" for j in range(n * k)]
    outs = [f"out{j}" for j in range(n * (k - 1))]
    return CreateOperator(kind, ins, outs, **args)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_adagrad(data):
    n = data.draw(st.integers(1, 3))
    t = data.draw(st.integers(0, 5))
    a = dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=data.draw(st.sampled_from([0.0, 0.01])))
    ts = _tensors(data, n, 3)

    def ref(r, t_, *ts):
        rate = r / (1 + t_ * a["decay_factor"])
        xs, hs = [], []
        for x, g, h in zip(ts[:n], ts[n : 2 * n], ts[2 * n :]):
            g = a["norm_coefficient"] * x + g
            h = h + g * g
            xs.append(x - rate * g / (np.sqrt(h) + a["epsilon"]))
            hs.append(h)
        return xs + hs

    assert_reference_checks(_op("ONNXAdagrad", n, 3, **a), [np.array(0.1), np.array(t)] + ts, ref)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_adam(data):
    n = data.draw(st.integers(1, 3))
    t = data.draw(st.integers(0, 5))
    a = dict(alpha=0.95, beta=0.1, epsilon=1e-7, norm_coefficient=0.001, norm_coefficient_post=0.02)
    ts = _tensors(data, n, 4)

    def ref(r, t_, *ts):
        rate = r * np.sqrt(1 - a["beta"] ** t_) / (1 - a["alpha"] ** t_) if t_ > 0 else r
        out = [[], [], []]
        for x, g, v, h in zip(ts[:n], ts[n : 2 * n], ts[2 * n : 3 * n], ts[3 * n :]):
            g = a["norm_coefficient"] * x + g
            v = a["alpha"] * v + (1 - a["alpha"]) * g
            h = a["beta"] * h + (1 - a["beta"]) * g * g
            out[0].append((1 - a["norm_coefficient_post"]) * (x - rate * v / (np.sqrt(h) + a["epsilon"])))
            out[1].append(v)
            out[2].append(h)
        return out[0] + out[1] + out[2]

    assert_reference_checks(_op("ONNXAdam", n, 4, **a), [np.array(0.1), np.array(t)] + ts, ref)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_momentum(mode, data):
    n = data.draw(st.integers(1, 3))
    t = data.draw(st.integers(0, 3))
    a = dict(alpha=0.9, beta=0.3, mode=mode, norm_coefficient=0.01)
    ts = _tensors(data, n, 3)

    def ref(r, t_, *ts):
        b = a["beta"] if t_ > 0 else 1.0
        xs, vs = [], []
        for x, g, v in zip(ts[:n], ts[n : 2 * n], ts[2 * n :]):
            g = a["norm_coefficient"] * x + g
            v = a["alpha"] * v + b * g
            xs.append(x - r * (g + a["alpha"] * v if mode == "nesterov" else v))
            vs.append(v)
        return xs + vs

    assert_reference_checks(_op("ONNXMomentum", n, 3, **a), [np.array(0.05), np.array(t)] + ts, ref)


def test_float32_results_and_errors():
    x = np.ones(3, np.float32)
    (xn, hn) = run_op_on(_op("ONNXAdagrad", 1, 3), [np.array(0.5, np.float32), np.array(0)] + [x, x, x])
    assert xn.dtype == np.float32 and hn.dtype == np.float32
    np.testing.assert_allclose(xn, 1 - 0.5 / np.sqrt(2), rtol=1e-6)
    with pytest.raises(ShapeError, match="ONNXAdagrad.*'in1'"):
        run_op_on(_op("ONNXAdagrad", 1, 3), [np.array(0.5), np.array(0), x, np.ones(2), x])
    with pytest.raises(FrameworkError, match="'R'"):
        run_op_on(_op("ONNXAdagrad", 1, 3), [np.ones(2), np.array(0), x, x, x])
