"""ONNXImageDecoder: lossless PNG/BMP round trips give back the pixels (RGB, BGR, gray)."""

import io

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_inferred_shapes, assert_reference_checks, run_op_on

PIL = pytest.importorskip("PIL.Image")


def _encode(pixels, fmt):
    with io.BytesIO() as f:
        PIL.fromarray(pixels).save(f, format=fmt)
        return np.frombuffer(f.getvalue(), np.uint8).copy()


@pytest.mark.parametrize("fmt", ["PNG", "BMP"])
@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder_round_trips(fmt, pixel_format):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    if pixel_format == "Grayscale":  # a gray image: Pillow's L conversion keeps R = G = B exactly
        rgb[...] = rgb[:, :, :1]
    data = _encode(rgb, fmt)
    want = {"RGB": rgb, "BGR": rgb[:, :, ::-1], "Grayscale": rgb[:, :, :1]}[pixel_format]
    op = CreateOperator("ONNXImageDecoder", ["b"], ["img"], pixel_format=pixel_format)
    outs = assert_reference_checks(op, [data], lambda b: want, check_inference=False)
    assert_inferred_shapes(op, [data], outs, require_known=False)


def test_image_decoder_rejects_non_images():
    op = CreateOperator("ONNXImageDecoder", ["b"], ["img"])
    with pytest.raises(FrameworkError, match="ONNXImageDecoder.*'b'"):
        run_op_on(op, [np.frombuffer(b"not an image at all", np.uint8).copy()])
