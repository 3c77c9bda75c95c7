"""ONNX ImageDecoder: an encoded image (JPEG, PNG, BMP, TIFF, WebP, PNM, JPEG 2000: whatever Pillow
reads) in a 1-D uint8 tensor -> an ``[H, W, C]`` uint8 tensor.

``ONNXImageDecoder(encoded)`` with ``pixel_format``: ``RGB`` / ``BGR`` (3 channels, colour
converted as Pillow converts to RGB) or ``Grayscale`` (1 channel, Pillow's ``L`` conversion).
Bytes Pillow cannot decode raise ``ImageDecodeError`` naming the op. Decoding is
``framework.ops.io.image_transforms.decode`` (ImageInput's); needs the ``image`` extra (Pillow).

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.io.image_transforms import ImageDecodeError, decode
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import STRING, Arg, TensorSpec

U8 = np.dtype(np.uint8)


@register_op(
    "ONNXImageDecoder",
    inputs=1,
    args=[Arg("pixel_format", STRING, "RGB", "RGB | BGR | Grayscale", choices=("RGB", "BGR", "Grayscale"))],
    input_docs=[("encoded", "1-D uint8: the bytes of an image file")],
    output_docs=[("image", "uint8 [H, W, 3] (RGB/BGR) or [H, W, 1] (Grayscale)")],
    input_types=(U8,),
    ranks={0: 1},
    infer=lambda args, ins: [TensorSpec(None, U8)],  # the size is in the bytes
    category="onnx",
)
class ONNXImageDecoder(Operator):
    """ONNX ImageDecoder (opset 20): decodes an image file's bytes to HWC uint8 pixels."""

    def run(self) -> None:
        data = self.input(0).tobytes()
        fmt = self.args.pixel_format
        try:
            img = decode(data, color=fmt != "Grayscale")  # BGR or HW1
        except ImageDecodeError as e:
            raise ImageDecodeError(f"{self.describe()}: '{self.input_names[0]}': {e}") from None
        if fmt == "RGB":
            img = img[:, :, ::-1]
        check_elements(img.shape, 1, f"{self.describe()} output")
        self.output(0, img.shape, U8)[...] = img


no_gradient("ONNXImageDecoder")
