"""ONNXDFT and ONNXSTFT against explicit DFT sums; the window / mel translators against onnx's
ReferenceEvaluator."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_inferred_shapes, assert_reference_checks, run_op_on


def _dft(z, n, inverse=False):
    """Explicit sum: X[k] = sum_t z[t] exp(-+2 pi i k t / n) (zero-padded/truncated to n)."""
    z = np.concatenate([z, np.zeros(max(n - len(z), 0))])[:n]
    sign = 1 if inverse else -1
    k = np.arange(n)
    out = np.array([np.sum(z * np.exp(sign * 2j * np.pi * kk * k / n)) for kk in k])
    return out / n if inverse else out


def _check(op, inputs, ref):
    outs = assert_reference_checks(op, inputs, ref, check_inference=False, threshold=1e-6)
    assert_inferred_shapes(op, inputs, outs, require_known=False)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_dft(data):
    batch, length, comp = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 2))
    n = data.draw(st.sampled_from([0, 1, 4, 7]))
    inverse, onesided = data.draw(st.integers(0, 1)), data.draw(st.integers(0, 1))
    if inverse and onesided:
        comp = 2
    x = data.draw(arrays([batch, length, comp], np.float64))

    def ref(x):
        z = x[..., 0] + (1j * x[..., 1] if comp == 2 else 0)
        npts = n or (2 * (length - 1) if inverse and onesided else length)
        rows = []
        for b in range(batch):
            if inverse and onesided:  # Hermitian extension of the half spectrum, then the real part
                half = np.concatenate([z[b], np.zeros(max(npts // 2 + 1 - length, 0))])[: npts // 2 + 1]
                full = np.concatenate([half, np.conj(half[1 : (npts + 1) // 2][::-1])])
                full[0] = full[0].real
                if npts % 2 == 0:
                    full[npts // 2] = full[npts // 2].real
                rows.append(_dft(full, npts, inverse=True).real[:, None])
                continue
            y = _dft(z[b], npts, inverse=bool(inverse))
            if onesided and not inverse:
                y = y[: npts // 2 + 1]
            rows.append(np.stack([y.real, y.imag], axis=-1))
        return np.stack(rows)

    op = CreateOperator("ONNXDFT", ["x"], ["y"], axis=1, dft_length=n, inverse=inverse, onesided=onesided)
    if (n or length) < 1 or (inverse and onesided and not n and length < 2):
        with pytest.raises(FrameworkError, match="ONNXDFT"):
            run_op_on(op, [x])
        return
    _check(op, [x], ref)


@pytest.mark.parametrize("onesided", [0, 1])
def test_stft(onesided):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 11, 1))
    win = np.hanning(4)
    op = CreateOperator("ONNXSTFT", ["x", "w"], ["y"], frame_step=3, frame_length=4, onesided=onesided)

    def ref(x, win):
        frames = 1 + (11 - 4) // 3
        out = []
        for b in range(2):
            rows = []
            for f in range(frames):
                y = _dft(x[b, f * 3 : f * 3 + 4, 0] * win, 4)
                y = y[:3] if onesided else y
                rows.append(np.stack([y.real, y.imag], axis=-1))
            out.append(rows)
        return np.array(out)

    _check(op, [x, win], ref)
    with pytest.raises(FrameworkError, match="ONNXSTFT.*'x'"):
        run_op_on(op, [x[..., :0], win])


@pytest.mark.parametrize("kind", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_and_mel_match_onnx_reference(kind, periodic):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    from framework.onnx import backend

    node = helper.make_node(kind, ["n"], ["w"], periodic=periodic)
    size = np.array(10, np.int64)
    (got,) = backend.run_node(node, [size], opset_version=17)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, None)])  # fmt: skip
    (want,) = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])).run(
        None, {"n": size}
    )
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert got.dtype == np.float32
    if kind == "HannWindow" and periodic:
        mel = helper.make_node("MelWeightMatrix", ["b", "d", "r", "lo", "hi"], ["m"])
        ins = [np.array(8, np.int64), np.array(64, np.int64), np.array(8000, np.int64),
               np.array(20.0, np.float32), np.array(4000.0, np.float32)]  # fmt: skip
        (got,) = backend.run_node(mel, ins, opset_version=17)
        names = ["b", "d", "r", "lo", "hi"]
        vis = [
            helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(v.dtype), []) for nm, v in zip(names, ins)
        ]
        g = helper.make_graph([mel], "g", vis, [helper.make_tensor_value_info("m", onnx.TensorProto.FLOAT, None)])
        (want,) = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])).run(
            None, dict(zip(names, ins))
        )
        np.testing.assert_allclose(got, want, rtol=1e-6)
