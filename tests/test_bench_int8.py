"""The int8 benchmarks' pieces: the zoo drawing's shape labels, the synthetic int8 weights' quantization (bias
scale X.scale * W.scale traced through the net, requantization scale below 1), and the onnxruntime comparison
run for one tiny round (no timing assertions)."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from bench.int8_weights import _int8_values, anchors, external_weights, svg_shapes
from framework.proto.framework_pb2 import NetDef

SVG = """<svg><g><text x="1">Conv (op#0)</text><text>conv0_bn</text><text>[1, 16, 160, 214]</text>
<text>[rpn]xif3_4_dw_conv_w</text><text>[768, 1, 3, 3]</text><text>anchor</text><text>[15, 4]</text>
<text>rpn_cls_probs</text><text>[1, 15, 20, 27]</text></g></svg>"""


def test_svg_shapes_reads_blob_labels_including_bracketed_names():
    shapes = svg_shapes(SVG)
    assert shapes == {
        "conv0_bn": (1, 16, 160, 214),
        "[rpn]xif3_4_dw_conv_w": (768, 1, 3, 3),
        "anchor": (15, 4),
        "rpn_cls_probs": (1, 15, 20, 27),
    }


def test_anchors_are_detectrons_15_at_stride_16():
    a = anchors()
    assert a.shape == (15, 4) and a.dtype == np.float32
    w, h = a[:, 2] - a[:, 0] + 1, a[:, 3] - a[:, 1] + 1
    np.testing.assert_allclose(np.sqrt(w * h)[1::3], [32, 64, 128, 256, 512], rtol=0.02)  # ratio 1 rows
    np.testing.assert_allclose((a[:, 0] + a[:, 2]) / 2, 7.5)


NET = """
op { input: "data" output: "data_int8" type: "Int8Quantize"
     arg { name: "Y_scale" f: 0.5 } arg { name: "Y_zero_point" i: 0 } }
op { input: "data_int8" input: "c_w_int8" input: "c_b_int8" output: "c_int8" type: "Int8ConvRelu"
     arg { name: "Y_scale" f: 0.02 } arg { name: "Y_zero_point" i: 0 } arg { name: "kernel" i: 1 } }
op { input: "c_int8" input: "d_w_int8" input: "b_zero_generated_c_int8" output: "d_int8" type: "Int8Conv"
     arg { name: "Y_scale" f: 0.04 } arg { name: "group" i: 4 } arg { name: "kernel" i: 3 } }
"""


def test_int8_weights_quantize_the_fp32_values_with_traced_input_scales():
    net = text_format.Parse(NET, NetDef())
    names = external_weights(net)
    assert names == ["c_w_int8", "c_b_int8", "d_w_int8", "b_zero_generated_c_int8"]
    rng = np.random.default_rng(0)
    fp32 = {
        "c_w": rng.normal(0, 0.3, (4, 3, 1, 1)).astype(np.float32),
        "c_b": rng.normal(0, 0.1, 4).astype(np.float32),
        "d_w": rng.normal(0, 0.3, (4, 1, 3, 3)).astype(np.float32),
    }
    vals = _int8_values(net, fp32, names)
    cw, cb = vals["c_w_int8"], vals["c_b_int8"]
    assert cw.data.shape == (4, 1, 1, 3) and cw.data.dtype == np.uint8 and cw.zero_point == 128  # NHWC filter
    np.testing.assert_allclose((cw.data.astype(np.float32) - 128) * cw.scale, fp32["c_w"].transpose(0, 2, 3, 1),
                               atol=cw.scale / 2 + 1e-7)  # fmt: skip
    assert cb.data.dtype == np.int32 and cb.scale == pytest.approx(0.5 * cw.scale, rel=1e-6)
    np.testing.assert_allclose(cb.data * cb.scale, fp32["c_b"], atol=cb.scale)
    dw = vals["d_w_int8"]
    assert 0.02 * dw.scale / 0.04 < 1  # X is c's output: scale 0.02, traced
    assert vals["b_zero_generated_c_int8"].data.tolist() == [0, 0, 0, 0]
    assert vals["b_zero_generated_c_int8"].scale == pytest.approx(0.02 * dw.scale, rel=1e-6)


def test_int8_ort_comparison_runs_one_round(capsys):
    pytest.importorskip("onnxruntime")
    from bench.int8_ort import main

    main(["--rounds", "1"])
    out = capsys.readouterr().out
    diffs = [line for line in out.splitlines() if "max difference" in line]
    assert len(diffs) == 2 and all("max difference 1," in d or "max difference 0," in d for d in diffs), diffs
    assert "| int8 ResNet-style (1x3x224x224) |" in out
    assert "| the same, ai.onnx model through our ONNX backend |" in out


def test_int8_shape_classes_run_one_round(capsys):
    from bench.int8_shapes import CASES, main
    from framework.kernels import int8_gemm_path

    main(["--rounds", "1", "--inner", "1"])
    out = capsys.readouterr().out
    if not int8_gemm_path.available():
        assert "cannot run here" in out
        return
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(table) == len(CASES) + 1  # the header and one row per case (each compared first)
    assert int8_gemm_path.available is not None and int8_gemm_path.available()  # restored
