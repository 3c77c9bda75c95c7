"""ConvFusion: a convolution with its Relu and/or residual Sum fused into the output write.

Caffe2 registers this op for its IDEEP (MKL-DNN) backend (caffe2/ideep/operators/conv_fusion_op.cc),
and its graph optimizer (caffe2/opt/optimize_ideep.cc) rewrites Conv+Relu and Conv+Sum(+Relu) into
it. Here it is what the inference optimization pass (framework/net/optimize.py) emits; the kernel is
conv_nchw's, whose epilogue adds the bias, the residual and applies the Relu on each image's output
while it is in cache, instead of separate full passes.

Arguments and inputs as Caffe2: ``fusion_type`` 1 = Conv+Relu, 2 = Conv+Sum, 3 = Conv+Sum+Relu;
inputs X, filter, then bias (optional), then S, the tensor to add (types 2 and 3 only; it is the
last input and must be the same blob as the output Y: the sum is done in place, as Caffe2 enforces).
So with types 2/3 three inputs mean X, filter, S (no bias) and four mean X, filter, bias, S.
Departures: NCHW and 2-D only (as IDEEP), but groups are allowed (IDEEP refuses them); no gradient.
This framework's own arguments ``out_channels`` and ``out_channel_offset`` (fusion_type 1, or 0 =
no fusion, which only they allow) make Y a tensor of out_channels channels of which the conv writes M
from the offset on, leaving the others as they are: the inference pass makes the convs feeding a
channel Concat write its output directly (SqueezeNet's expand convs, DenseNet's growing
concatenations), with no copy. Its argument ``relu6`` (with fusion_type 1 or 3) caps the Relu at 6: min(max(0, y),
6) with NaN kept, what Clip(min=0, max=6) gives after the conv (MobileNet's Relu6), in the kernel's stores; its
``activation`` 'HardSwish' (y * min(max(y / 6 + 1/2, 0), 1)) or 'Swish' (y * sigmoid(y)), with fusion_type 0 or
2 (no Relu), applies that after the conv (and sum) likewise (MobileNetV3, EfficientNet).
"""

from __future__ import annotations

from framework.errors import ShapeError
from framework.kernels import window_jit
from framework.kernels.conv_nchw import ConvNCHW
from framework.memory.allocator import allocate_array
from framework.ops.gradient import no_gradient
from framework.ops.nn.conv import _CONV_ARGS, ConvOpBase, _cost_conv, check_conv_sizes, conv_geometry
from framework.ops.nn.conv_args import join_layout, parse_conv_pool
from framework.ops.prepared_states import prepare_for
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec
from framework.runtime.parallel import get_num_threads

PLAIN, RELU, SUM, SUM_RELU = 0, 1, 2, 3
_ACTIVATIONS = {"identity": 0, "HardSwish": window_jit.HARDSWISH, "Swish": window_jit.SWISH}


def _infer(args, ins):
    x, w = ins[0], ins[1]
    if x.shape is None or w.shape is None:
        return [TensorSpec(None, x.dtype)] if x.shape is None else [UNKNOWN]
    spec = parse_conv_pool(args, "ConvFusion", "ConvFusion")
    geo, n, _, m = conv_geometry(spec, x.shape, w.shape, "ConvFusion")
    return [TensorSpec(join_layout(n, args.out_channels or m, geo.out, spec.order), x.dtype)]


def _cost(args, ins, outs):
    has_sum = args.fusion_type in (SUM, SUM_RELU)
    ins = ins[:-1] if has_sum else ins
    return _cost_conv(args, ins[:3], None if args.out_channels else outs)


@register_op(
    "ConvFusion",
    inputs=(2, 4),
    args=_CONV_ARGS
    + [
        Arg("fusion_type", INT, 0, "1: Conv+Relu, 2: Conv+Sum, 3: Conv+Sum+Relu (0: none, with out_channels)"),
        Arg("out_channels", INT, 0, "this framework's: Y has this many channels, the conv writes M of them"),
        Arg("out_channel_offset", INT, 0, "this framework's: the first of Y's channels the conv writes"),
        Arg("relu6", INT, 0, "this framework's: with fusion_type 1 or 3, min(Relu(y), 6) (a Clip 0..6 after it)"),
    ],
    input_docs=[
        ("X", "input (N, C, H, W)"),
        ("filter", "(M, C/group, kh, kw)"),
        ("bias", "optional (M,) (with fusion_type 2/3 and 3 inputs, input 2 is S)"),
        ("S", "fusion_type 2/3: the tensor added to the convolution, the same blob as Y"),
    ],
    output_docs=[("Y", "conv(X) + bias (+ S), then Relu for fusion_type 1 and 3 (Relu6 with relu6=1)")],
    infer=_infer,
    cost=_cost,
    allow_inplace={(2, 0), (3, 0)},
    category="conv",
)
class ConvFusion(ConvOpBase):
    """Convolution with a fused Relu (fusion_type 1), residual Sum (2) or both (3); see module doc."""

    def check_args(self) -> None:
        t = self.args.fusion_type
        if self.order != "NCHW":
            raise self.arg_error(f"only order NCHW is supported (as Caffe2's IDEEP ConvFusion), got {self.order}")
        act = self.args.activation
        if act not in _ACTIVATIONS or (act != "identity" and t in (RELU, SUM_RELU)):
            raise self.arg_error(
                f"activation must be one of {sorted(_ACTIVATIONS)}, and not 'identity' only with fusion_type 0 or 2, "
                f"got {act!r} with fusion_type {t}"
            )
        if t not in (RELU, SUM, SUM_RELU) and not (t == PLAIN and (self.args.out_channels or act != "identity")):
            raise self.arg_error(
                f"fusion_type must be 1 (Conv+Relu), 2 (Conv+Sum) or 3 (Conv+Sum+Relu) (0 only with out_channels or an "
                f"activation), got {t}"
            )
        self.has_sum = t in (SUM, SUM_RELU)
        self.relu = _ACTIVATIONS[act] if act != "identity" else t in (RELU, SUM_RELU)
        if self.args.relu6 not in (0, 1) or (self.args.relu6 and t not in (RELU, SUM_RELU)):
            raise self.arg_error(f"relu6 must be 0 or 1, and 1 only with fusion_type 1 or 3, got {self.args.relu6}")
        if self.args.relu6:
            self.relu = 2  # ConvNCHW's Relu6
        n_in = len(self.inputs)
        if self.has_sum:
            if n_in < 3:
                raise self.arg_error("fusion_type 2/3 needs the summed tensor S as the last input")
            if self.input_names[-1] != self.output_names[0]:
                raise self.arg_error(
                    f"the summed input '{self.input_names[-1]}' must be the output blob "
                    f"'{self.output_names[0]}' (the sum is done in place, as Caffe2 enforces)"
                )
        elif n_in == 4:
            raise self.arg_error("fusion_type 1 (Conv+Relu) takes X, filter and an optional bias (2 or 3 inputs)")
        self.has_bias = n_in == (4 if self.has_sum else 3)
        self.out_channels, self.out_offset = self.args.out_channels, self.args.out_channel_offset
        if self.out_channels or self.out_offset:
            if self.has_sum:
                raise self.arg_error(
                    "out_channels/out_channel_offset (writing a concatenation's channels) need fusion_type 0 or 1"
                )
            if self.out_channels <= 0 or self.out_offset < 0:
                raise self.arg_error(
                    "out_channels must be > 0 and out_channel_offset >= 0, "
                    f"got {self.out_channels} and {self.out_offset}"
                )

    def _prepare(self, x, w, b, s) -> None:
        dt = self._dtype([x, w, b, s])
        geo, n, c, m = conv_geometry(self.spec, x.shape, w.shape, self.describe(), self.input_names)
        check_conv_sizes(self, geo, n, c, m)
        if len(geo.kernel) != 2:
            raise ShapeError(f"{self.describe()}: only 2-D convolutions (4-D input) are supported, got {x.shape}")
        self._check_shape("bias", b, (m,))
        yshape = join_layout(n, m, geo.out, "NCHW")
        if s is not None and s.shape != yshape:
            raise ShapeError(
                f"{self.describe()}: summed input '{self.input_names[-1]}' must have the output shape {yshape}, "
                f"got {s.shape}"
            )
        self._tmp = None
        if self.out_channels:  # channels out_offset: out_offset + m of a concatenation's Y
            if self.out_offset + m > self.out_channels:
                raise ShapeError(
                    f"{self.describe()}: out_channel_offset {self.out_offset} + {m} filter rows exceed out_channels "
                    f"{self.out_channels}"
                )
            yshape = join_layout(n, self.out_channels, geo.out, "NCHW")
        self._yshape = yshape
        self._kernel = ConvNCHW(
            n,
            c,
            m,
            self.spec.group,
            geo,
            dt,
            b is not None,
            relu=self.relu,
            residual=s is not None,
            inplace_residual=True,
        )
        self._key = (x.shape, w.shape, dt, s.shape if s is not None else None, get_num_threads())
        if self.out_channels:
            if self._kernel.writes_slices:
                self._kernel.moff = self.out_offset
            else:  # kernels writing (N, M, ...) only: their output, then copied into the channels
                self._tmp = allocate_array(self._kernel.oshape, dt)

    def run(self) -> None:
        x, w = self.input(0), self.input(1)
        b = self.input(2) if self.has_bias else None
        s = self.input(len(self.inputs) - 1) if self.has_sum else None
        key = (x.shape, w.shape, x.dtype, s.shape if s is not None else None, get_num_threads())
        if self._key != key or w.dtype != x.dtype or (b is not None and b.dtype != x.dtype):
            # a signature seen before gets its prepared kernel back (framework/ops/prepared_states.py)
            full = (*key, w.dtype, b.dtype if b is not None else None)
            prepare_for(self, full, lambda: self._prepare(x, w, b, s))
        # The output is S's tensor (in place): output() keeps its buffer, so S's values are intact here.
        # With out_channels the other ops writing Y's other channels found (and keep) the same buffer.
        y = self.output(0, self._yshape, x.dtype)
        if self._tmp is not None:
            self._kernel.run(x, w, b, self._tmp, None, wt=self.inputs[1].held)
            y[:, self.out_offset : self.out_offset + self._tmp.shape[1]] = self._tmp
            return
        self._kernel.run(x, w, b, y, y if s is not None else None, wt=self.inputs[1].held)

    def compile(self):
        """The kernel call on the arrays bound now (see ConvNCHW.bound and framework/net/program.py)."""
        if self._tmp is not None or self._key is None:
            return None
        a = [blob.array for blob in self.inputs]
        y = self.outputs[0].array
        b = a[2] if self.has_bias else None
        if self._key != (a[0].shape, a[1].shape, a[0].dtype, a[-1].shape if self.has_sum else None, get_num_threads()):
            return None
        return self._kernel.bound(a[0], a[1], b, y, y if self.has_sum else None, self.inputs[1].held, self.run)


no_gradient("ConvFusion")
