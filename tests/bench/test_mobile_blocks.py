"""bench/mobile_blocks.py's nets: the Predictor (inference pass: BN folds, fused Relu6/HardSwish/Swish, depthwise
kernels) gives the unoptimized net's values, fuses every activation that follows a conv and every
squeeze-excitation block, and allocates nothing per run once warm (no timing here: speed is measured by the
benchmark)."""

from __future__ import annotations

import numpy as np
import pytest

from bench import mobile_blocks
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace


def _unoptimized(net, params, x):
    ws = Workspace()
    for k, v in params.items():
        ws.feed_blob(k, v)
    ws.feed_blob("data", x)
    ws.create_net(net).run()
    return ws.fetch_blob(net.external_output[0])


@pytest.mark.parametrize("name", ["v2_s1", "v2_s2", "v3_se", "eff_se", "mnas5"])
def test_block_predictor_equals_the_plain_net_and_allocates_nothing_warm(name):
    net, params, x = mobile_blocks.build(name)
    want = _unoptimized(net, params, x)
    pred, run, get = mobile_blocks.ours_runner(net, params, x)
    run()
    np.testing.assert_allclose(get(), want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    types = [op.type for op in pred.optimized_net.op]
    assert not {"SpatialBN", "Clip", "Swish", "Relu"} & set(types), types
    # the squeeze-excitation blocks (global pool, two 1x1 convs, gate, Mul) are one op each
    assert types.count("SqueezeExcite") == (1 if name in ("v3_se", "eff_se") else 0), types
    assert not {"HardSigmoid", "Sigmoid", "Mul", "AveragePool"} & set(types), types
    rep = memory_reporter()
    run()
    before = rep.allocations
    for _ in range(3):
        run()
    assert rep.allocations == before
