"""ONNX -> our ops: signal processing. DFT/STFT run on ONNXDFT/ONNXSTFT; the
window generators (Hann/Hamming/Blackman) and MelWeightMatrix take only scalar inputs, so they
become constants at translation (the backend specializes fed scalars at run time), computed with
the formulas of the ONNX spec."""

from __future__ import annotations

import numpy as np

from framework.onnx.importer import FLOATS, ImportContext, Node, Unsupported, translator

F16 = (np.dtype(np.float16),)


def _scalar(ctx: ImportContext, name: str) -> np.ndarray:
    v = ctx.const(name)
    if v.size != 1:
        raise Unsupported(f"'{name}' must hold one value")
    return v.reshape(())


def _out_type(node: Node, default: int = 1) -> np.dtype:
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(node.attr("output_datatype", default))))
    except Exception as e:
        raise Unsupported(f"output_datatype {node.attr('output_datatype')}") from e


@translator("DFT")
def _dft(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS + F16, [0])
    length = int(_scalar(ctx, node.input(1))) if node.input(1) else 0
    if ctx.opset >= 20:
        axis = int(_scalar(ctx, node.input(2))) if node.input(2) else -2
    else:
        axis = int(node.attr("axis", 1))
    rank = ctx.rank(node.input(0))
    if not -rank <= axis < rank or axis % rank == rank - 1:
        raise Unsupported(f"axis {axis} for rank {rank}")
    args = {"inverse": int(node.attr("inverse", 0)), "onesided": int(node.attr("onesided", 0))}
    ctx.op("ONNXDFT", [node.input(0)], [node.outputs[0]], axis=axis % rank, dft_length=length, **args)


@translator("STFT")
def _stft(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, FLOATS + F16, [0, 2])
    step = int(_scalar(ctx, node.input(1)))
    length = int(_scalar(ctx, node.input(3))) if node.input(3) else 0
    ins = [node.input(0)] + ([node.input(2)] if node.input(2) else [])
    if not node.input(2) and not length:
        raise Unsupported("neither a window nor a frame_length")
    args = {"frame_step": step, "frame_length": length, "onesided": int(node.attr("onesided", 1))}
    ctx.op("ONNXSTFT", ins, [node.outputs[0]], **args)


@translator("HannWindow", "HammingWindow", "BlackmanWindow")
def _window(ctx: ImportContext, node: Node) -> None:
    size = int(_scalar(ctx, node.input(0)))
    if size < 0:
        raise Unsupported(f"size {size}")
    n_1 = size if node.attr("periodic", 1) else size - 1
    t = 2 * np.pi * np.arange(size, dtype=np.float64) / (n_1 if n_1 else 1)
    if node.op_type == "HannWindow":
        w = 0.5 - 0.5 * np.cos(t)
    elif node.op_type == "HammingWindow":
        alpha = 25.0 / 46.0
        w = alpha - (1 - alpha) * np.cos(t)
    else:
        w = 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t)
    ctx.values[node.outputs[0]] = w.astype(_out_type(node))


@translator("MelWeightMatrix")
def _mel_weight_matrix(ctx: ImportContext, node: Node) -> None:
    """Triangular mel filters over the bins of a one-sided spectrum: the spec's function body
    (integer bin edges from the mel scale, as onnx's reference computes them)."""
    bins, dft_length, rate = (int(_scalar(ctx, node.input(i))) for i in range(3))
    lo, hi = _scalar(ctx, node.input(3)), _scalar(ctx, node.input(4))
    if bins < 1 or dft_length < 1 or rate < 1 or lo.dtype.kind != "f" or hi.dtype.kind != "f":
        raise Unsupported("sizes must be >= 1 and the edges floats")
    n_spec = dft_length // 2 + 1
    points = np.arange(0, bins + 2)
    lo_mel = 2595 * np.log1p(lo / 700) / np.log(10)  # in the edges' float type, as the spec's body
    hi_mel = 2595 * np.log1p(hi / 700) / np.log(10)
    step = (hi_mel - lo_mel) / points.shape[0]
    hz = 700 * np.expm1((points * step + lo_mel) / 2595 * np.log(10))
    edges = (((dft_length + 1) * hz) // rate).astype(int)
    if edges.min() < 0 or edges.max() >= n_spec + 1:
        raise Unsupported("mel edges outside the spectrum")
    out = np.zeros((n_spec, bins))
    for i in range(bins):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        if centre == left:
            if centre < n_spec:
                out[centre, i] = 1
        else:
            j = np.arange(left, min(centre + 1, n_spec))
            out[j, i] = (j - left) / (centre - left)
        if right > centre:
            j = np.arange(centre, min(right, n_spec))
            out[j, i] = (right - j) / (right - centre)
    ctx.values[node.outputs[0]] = out.astype(_out_type(node))


@translator("ImageDecoder")
def _image_decoder(ctx: ImportContext, node: Node) -> None:
    ctx.require(node, (np.dtype(np.uint8),))
    ctx.op("ONNXImageDecoder", [node.input(0)], [node.outputs[0]], pixel_format=node.attr("pixel_format", "RGB"))
