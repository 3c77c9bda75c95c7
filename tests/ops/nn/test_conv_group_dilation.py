"""Conv with group and dilation together (Caffe2 allows it on the CPU since 2018's ConvPoolOpBase
dropped the restriction), against a direct numpy loop, both layouts, with gradients."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.ops.testing import assert_gradient_checks, assert_reference_checks


def _grouped_dilated_conv(x, w, b, group, dil, pad, stride):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - (dil * (kh - 1) + 1)) // stride + 1
    ow = (wd + 2 * pad - (dil * (kw - 1) + 1)) // stride + 1
    y = np.zeros((n, m, oh, ow))
    for oc in range(m):
        g = oc // (m // group)
        for ci in range(cg):
            for i in range(kh):
                for j in range(kw):
                    patch = xp[
                        :,
                        g * cg + ci,
                        i * dil : i * dil + stride * oh : stride,
                        j * dil : j * dil + stride * ow : stride,
                    ]
                    y[:, oc] += w[oc, ci, i, j] * patch
        y[:, oc] += b[oc]
    return y


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize("group,dil,pad,stride", [(2, 2, 1, 1), (3, 2, 0, 2), (2, 3, 2, 1)])
def test_conv_group_with_dilation(order, group, dil, pad, stride):
    rng = np.random.default_rng(group * 10 + dil)
    c, m = 2 * group, 2 * group
    x = rng.standard_normal((2, c, 7, 8))
    w = rng.standard_normal((m, c // group, 3, 2))
    b = rng.standard_normal(m)
    expected = _grouped_dilated_conv(x, w, b, group, dil, pad, stride)
    op = CreateOperator(
        "Conv", ["X", "w", "b"], ["Y"], kernel_h=3, kernel_w=2, dilation=dil, group=group, pad=pad, stride=stride,
        order=order,
    )  # fmt: skip
    if order == "NHWC":
        x, w = x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1)
        expected = expected.transpose(0, 2, 3, 1)
    assert_reference_checks(op, [x, w, b], lambda *a: [expected])
    for i in range(3):
        assert_gradient_checks(op, [x, w, b], i)
