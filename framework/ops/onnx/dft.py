"""ONNX DFT and STFT: discrete Fourier transforms of real or complex signals (numpy's FFT).

Signals hold a trailing dim of 1 (real) or 2 (real, imaginary); results always hold 2, except
the inverse one-sided transform, which gives a real signal (trailing dim 1).

- ``ONNXDFT(x)``: the transform along ``axis`` (not the trailing dim) of length ``dft_length``
  (0: the axis length, or ``2 (n - 1)`` for an inverse one-sided transform; shorter signals are
  zero-padded, longer ones truncated). ``inverse=1`` divides by the length. ``onesided=1``: the
  forward transform keeps bins ``0 .. length // 2`` (of a real signal's Hermitian spectrum); the
  inverse one then takes such bins and returns the real signal (numpy's ``irfft``).
- ``ONNXSTFT(signal[, window])``: signal ``[batch, length, 1 or 2]``; frames of ``len(window)``
  samples every ``frame_step``, ``1 + (length - frame_length) // frame_step`` of them, each
  multiplied by the window (ones when absent) and transformed with ``frame_length`` points;
  output ``[batch, frames, bins, 2]`` (``bins = frame_length // 2 + 1`` with ``onesided=1``).

Computed in complex128, cast back to the input's type. No gradients: these ops serve the ONNX
backend (inference).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec


def _complex(op: Operator, x: np.ndarray) -> np.ndarray:
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise ShapeError(
            f"{op.describe()}: '{op.input_names[0]}' {list(x.shape)} must end with a dim of 1 (real) or 2 (complex)"
        )
    return x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


@register_op(
    "ONNXDFT",
    inputs=1,
    args=[
        Arg("axis", INT, 1, "the signal axis (not the trailing real/imaginary dim)"),
        Arg("dft_length", INT, 0, "points of the transform; 0: from the axis length", low=0),
        Arg("inverse", INT, 0, "1: the inverse transform", choices=(0, 1)),
        Arg("onesided", INT, 0, "1: half spectrum (forward) / from a half spectrum (inverse)", choices=(0, 1)),
    ],
    input_docs=[("x", "float [..., n, ..., 1 or 2]")],
    output_docs=[("y", "the transform, trailing dim 2 (1 for the inverse one-sided transform)")],
    input_types="float",
    ranks={0: (2, None)},
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXDFT(Operator):
    """ONNX DFT (opsets 17, 20): the discrete Fourier transform along one axis."""

    def run(self) -> None:
        x = self.input(0)
        z = _complex(self, x)
        a = self.args
        if not -z.ndim <= a.axis < z.ndim:
            raise ShapeError(f"{self.describe()}: axis {a.axis} is not a signal axis of {list(x.shape)}")
        axis = a.axis % z.ndim
        n = a.dft_length or (2 * (z.shape[axis] - 1) if a.inverse and a.onesided else z.shape[axis])
        if n < 1:
            raise ShapeError(f"{self.describe()}: a transform of {n} points")
        shape = list(z.shape)
        shape[axis] = n // 2 + 1 if a.onesided and not a.inverse else n
        check_elements(shape + [2], 16, f"{self.describe()} output")
        if not a.inverse:
            out = np.fft.fft(z, n=n, axis=axis)
            if a.onesided:
                out = np.take(out, np.arange(n // 2 + 1), axis=axis)
            res = _pairs(out)
        elif a.onesided:
            res = np.fft.irfft(z, n=n, axis=axis)[..., None]
        else:
            res = _pairs(np.fft.ifft(z, n=n, axis=axis))
        self.output(0, res.shape, x.dtype)[...] = res


@register_op(
    "ONNXSTFT",
    inputs=(1, 2),
    args=[
        Arg("frame_step", INT, 1, "samples between frame starts", low=1),
        Arg("frame_length", INT, 0, "points of each frame's transform; 0: the window length", low=0),
        Arg("onesided", INT, 1, "1: keep bins 0 .. frame_length // 2", choices=(0, 1)),
    ],
    input_docs=[("signal", "float [batch, length, 1 or 2]"), ("window", "optional float [window length]")],
    output_docs=[("output", "float [batch, frames, bins, 2]")],
    input_types="float",
    same_type=[(0, 1)],
    ranks={0: 3, 1: 1},
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXSTFT(Operator):
    """ONNX STFT (opset 17): the short-time Fourier transform of windowed frames."""

    def run(self) -> None:
        x = self.input(0)
        z = _complex(self, x)
        window = self.input(1) if len(self.inputs) > 1 else None
        fl = self.args.frame_length or (window.shape[0] if window is not None else 0)
        if fl < 1:
            raise ShapeError(f"{self.describe()}: give frame_length or a window")
        wl = window.shape[0] if window is not None else fl
        step = self.args.frame_step
        length = z.shape[1]
        if wl < 1 or length < fl:
            raise ShapeError(f"{self.describe()}: signal of length {length} shorter than a frame ({fl})")
        frames = 1 + (length - fl) // step
        need = (frames - 1) * step + wl
        if need > length:  # frames running past the end read zeros
            z = np.concatenate([z, np.zeros((z.shape[0], need - length), z.dtype)], axis=1)
        bins = fl // 2 + 1 if self.args.onesided else fl
        check_elements((z.shape[0], frames, bins, 2), 16, f"{self.describe()} output")
        starts = np.arange(frames) * step
        idx = starts[:, None] + np.arange(wl)[None, :]
        w = window.astype(np.float64) if window is not None else np.ones(wl)
        framed = z[:, idx] * w  # [batch, frames, wl]
        out = np.fft.fft(framed, n=fl, axis=-1)
        if self.args.onesided:
            out = out[..., :bins]
        res = _pairs(out)
        self.output(0, res.shape, x.dtype)[...] = res


no_gradient("ONNXDFT", "ONNXSTFT")
