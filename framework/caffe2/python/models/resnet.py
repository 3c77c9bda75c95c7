"""``caffe2.python.models.resnet``: ResNet / ResNeXt builders on brew (the builder behind resnet50_trainer).

Blob and parameter names, initialisers and hyper-parameters are Caffe2's, so checkpoints and scripts that
name blobs (``conv1_w``, ``comp_0_conv_1``, ``last_out_L1000``...) work unchanged:

- ``ResNetBuilder(model, prev_blob, no_bias, is_test, bn_epsilon=1e-5, bn_momentum=0.9)`` appends components
  after ``prev_blob``: ``add_bottleneck(input_filters, base_filters, output_filters, stride=1, group=1,
  spatial_batch_norm=True)`` (1x1, 3x3 with ``group``, 1x1, each followed by SpatialBN and ReLU except the
  last, whose BN output is summed with the shortcut, then ReLU; a 1x1 projection with its own BN when the
  filter counts differ) and ``add_simple_block(input_filters, num_filters, down_sampling=False,
  spatial_batch_norm=True)`` (two 3x3). Component ``k``'s blobs are ``comp_<k>_conv_<i>``,
  ``comp_<k>_spatbn_<i>``, ``comp_<k>_sum_<i>``, ``shortcut_projection_<k>[_spatbn]``; ReLUs run in place;
  convolutions use MSRAFill weights.
- ``create_resnext(model, data, num_input_channels, num_labels, num_layers, num_groups, num_width_per_group,
  label=None, is_test=False, no_loss=False, no_bias=1, conv1_kernel=7, conv1_stride=2, final_avg_kernel=7,
  log=None, bn_epsilon=1e-5, bn_momentum=0.9)``: conv1 + BN + ReLU + 3x3/2 max pool, four stages of
  bottlenecks (blocks per stage from ``RESNEXT_BLOCK_CONFIG``; 18 and 34 layers use the narrower filter
  counts), global average pooling and ``last_out_L<num_labels>``; returns ``(softmax, loss)`` from
  SoftmaxWithLoss with a ``label``, the logits with ``no_loss``, else a softmax. Like Caffe2, the blocks are
  built with epsilon 1e-5 and momentum 0.9 whatever ``bn_epsilon``/``bn_momentum`` say (those apply to conv1).
- ``create_resnet50(...)``: ResNeXt-50 with 1 group of width 64 (``no_bias=0`` by default, as in Caffe2).
- ``create_resnet_32x32(model, data, num_input_channels, num_groups, num_labels, is_test=False)``: the
  CIFAR network of He et al. section 4.2 (3 stages of ``2 * num_groups`` simple blocks, 16/32/64 filters,
  8x8 average pooling), returning its softmax.
"""

from __future__ import annotations

import logging
from typing import Any

from framework.caffe2.python import brew

__all__ = [
    "RESNEXT_BLOCK_CONFIG",
    "RESNEXT_STRIDES",
    "ResNetBuilder",
    "create_resnet50",
    "create_resnet_32x32",
    "create_resnext",
]

RESNEXT_BLOCK_CONFIG = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
}
RESNEXT_STRIDES = [1, 2, 2, 2]

_MSRA = ("MSRAFill", {})
log = logging.getLogger("resnext_builder")


class ResNetBuilder:
    """Appends residual components to ``model`` after ``prev_blob`` (see module doc)."""

    def __init__(
        self,
        model: Any,
        prev_blob: Any,
        no_bias: Any,
        is_test: bool,
        bn_epsilon: float = 1e-5,
        bn_momentum: float = 0.9,
    ) -> None:
        self.model = model
        self.comp_count = 0
        self.comp_idx = 0
        self.prev_blob = prev_blob
        self.is_test = is_test
        self.bn_epsilon = bn_epsilon
        self.bn_momentum = bn_momentum
        self.no_bias = 1 if no_bias else 0

    def add_conv(
        self, in_filters: int, out_filters: int, kernel: int, stride: int = 1, group: int = 1, pad: int = 0
    ) -> Any:
        self.comp_idx += 1
        self.prev_blob = brew.conv(
            self.model, self.prev_blob, f"comp_{self.comp_count}_conv_{self.comp_idx}", in_filters, out_filters,
            weight_init=_MSRA, kernel=kernel, stride=stride, group=group, pad=pad, no_bias=self.no_bias,
        )  # fmt: skip
        return self.prev_blob

    def add_relu(self) -> Any:
        self.prev_blob = brew.relu(self.model, self.prev_blob, self.prev_blob)  # in place
        return self.prev_blob

    def add_spatial_bn(self, num_filters: int) -> Any:
        self.prev_blob = brew.spatial_bn(
            self.model, self.prev_blob, f"comp_{self.comp_count}_spatbn_{self.comp_idx}", num_filters,
            epsilon=self.bn_epsilon, momentum=self.bn_momentum, is_test=self.is_test,
        )  # fmt: skip
        return self.prev_blob

    def _shortcut(self, blob: Any, in_filters: int, out_filters: int, stride: int, bn: bool, **bn_args: Any) -> Any:
        if in_filters == out_filters:
            return blob
        blob = brew.conv(
            self.model, blob, f"shortcut_projection_{self.comp_count}", in_filters, out_filters,
            weight_init=_MSRA, kernel=1, stride=stride, no_bias=self.no_bias,
        )  # fmt: skip
        if bn:
            blob = brew.spatial_bn(
                self.model, blob, f"shortcut_projection_{self.comp_count}_spatbn", out_filters,
                is_test=self.is_test, **bn_args,
            )  # fmt: skip
        return blob

    def _finish(self, shortcut: Any, last: Any) -> None:
        self.prev_blob = brew.sum(self.model, [shortcut, last], f"comp_{self.comp_count}_sum_{self.comp_idx}")
        self.comp_idx += 1
        self.add_relu()
        self.comp_count += 1

    def add_bottleneck(
        self,
        input_filters: int,
        base_filters: int,
        output_filters: int,
        stride: int = 1,
        group: int = 1,
        spatial_batch_norm: bool = True,
    ) -> int:
        """A bottleneck component (He et al., Figure 3 right); returns ``output_filters``."""
        self.comp_idx = 0
        shortcut = self.prev_blob
        self.add_conv(input_filters, base_filters, kernel=1, stride=1)
        if spatial_batch_norm:
            self.add_spatial_bn(base_filters)
        self.add_relu()
        self.add_conv(base_filters, base_filters, kernel=3, stride=stride, group=group, pad=1)
        if spatial_batch_norm:
            self.add_spatial_bn(base_filters)
        self.add_relu()
        last = self.add_conv(base_filters, output_filters, kernel=1)
        if spatial_batch_norm:
            last = self.add_spatial_bn(output_filters)
        shortcut = self._shortcut(
            shortcut, input_filters, output_filters, stride, spatial_batch_norm,
            epsilon=self.bn_epsilon, momentum=self.bn_momentum,
        )  # fmt: skip
        self._finish(shortcut, last)
        return output_filters

    def add_simple_block(
        self, input_filters: int, num_filters: int, down_sampling: bool = False, spatial_batch_norm: bool = True
    ) -> None:
        """Two 3x3 convolutions with a shortcut (stride 2 in the first when ``down_sampling``)."""
        self.comp_idx = 0
        shortcut = self.prev_blob
        stride = 2 if down_sampling else 1
        self.add_conv(input_filters, num_filters, kernel=3, stride=stride, pad=1)
        if spatial_batch_norm:
            self.add_spatial_bn(num_filters)
        self.add_relu()
        last = self.add_conv(num_filters, num_filters, kernel=3, pad=1)
        if spatial_batch_norm:
            last = self.add_spatial_bn(num_filters)
        # Caffe2 gives this projection's BN epsilon 1e-3 and the default momentum
        shortcut = self._shortcut(shortcut, input_filters, num_filters, stride, spatial_batch_norm, epsilon=1e-3)
        self._finish(shortcut, last)


def create_resnet_32x32(
    model: Any, data: Any, num_input_channels: int, num_groups: int, num_labels: int, is_test: bool = False
) -> Any:
    brew.conv(model, data, "conv1", num_input_channels, 16, kernel=3, stride=1)
    brew.spatial_bn(model, "conv1", "conv1_spatbn", 16, epsilon=1e-3, is_test=is_test)
    brew.relu(model, "conv1_spatbn", "relu1")
    filters = [16, 32, 64]
    builder = ResNetBuilder(model, "relu1", no_bias=0, is_test=is_test)
    prev = 16
    for group_idx in range(3):
        for block_idx in range(2 * num_groups):
            builder.add_simple_block(
                prev if block_idx == 0 else filters[group_idx],
                filters[group_idx],
                down_sampling=block_idx == 0 and group_idx > 0,
            )
        prev = filters[group_idx]
    brew.average_pool(model, builder.prev_blob, "final_avg", kernel=8, stride=1)
    brew.fc(model, "final_avg", "last_out", 64, num_labels)
    return brew.softmax(model, "last_out", "softmax")


def create_resnext(
    model: Any,
    data: Any,
    num_input_channels: int,
    num_labels: int,
    num_layers: int,
    num_groups: int,
    num_width_per_group: int,
    label: Any = None,
    is_test: bool = False,
    no_loss: bool = False,
    no_bias: int = 1,
    conv1_kernel: int = 7,
    conv1_stride: int = 2,
    final_avg_kernel: int = 7,
    log: Any = None,
    bn_epsilon: float = 1e-5,
    bn_momentum: float = 0.9,
) -> Any:
    if num_layers not in RESNEXT_BLOCK_CONFIG:
        raise ValueError(f"{num_layers}-layer is invalid for resnext config (known: {sorted(RESNEXT_BLOCK_CONFIG)})")
    num_blocks = RESNEXT_BLOCK_CONFIG[num_layers]
    num_filters = [64, 64, 128, 256, 512] if num_layers in (18, 34) else [64, 256, 512, 1024, 2048]
    conv = brew.conv(
        model, data, "conv1", num_input_channels, num_filters[0], weight_init=_MSRA,
        kernel=conv1_kernel, stride=conv1_stride, pad=3, no_bias=no_bias,
    )  # fmt: skip
    bn = brew.spatial_bn(
        model, conv, "conv1_spatbn_relu", num_filters[0], epsilon=bn_epsilon, momentum=bn_momentum, is_test=is_test
    )
    relu = brew.relu(model, bn, bn)
    pool = brew.max_pool(model, relu, "pool1", kernel=3, stride=2, pad=1)
    builder = ResNetBuilder(model, pool, no_bias=no_bias, is_test=is_test, bn_epsilon=1e-5, bn_momentum=0.9)
    inner_dim = num_groups * num_width_per_group
    for stage in range(4):
        dim_in = num_filters[stage]
        for block in range(num_blocks[stage]):
            dim_in = builder.add_bottleneck(
                dim_in, inner_dim, num_filters[stage + 1],
                stride=RESNEXT_STRIDES[stage] if block == 0 else 1, group=num_groups,
            )  # fmt: skip
        inner_dim *= 2
    final_avg = brew.average_pool(
        model, builder.prev_blob, "final_avg", kernel=final_avg_kernel, stride=1, global_pooling=True
    )
    last_out = brew.fc(model, final_avg, f"last_out_L{num_labels}", num_filters[-1], num_labels)
    if no_loss:
        return last_out
    if label is not None:
        return model.SoftmaxWithLoss([last_out, label], ["softmax", "loss"])
    return brew.softmax(model, last_out, "softmax")


def create_resnet50(
    model: Any,
    data: Any,
    num_input_channels: int,
    num_labels: int,
    label: Any = None,
    is_test: bool = False,
    no_loss: bool = False,
    no_bias: int = 0,
    conv1_kernel: int = 7,
    conv1_stride: int = 2,
    final_avg_kernel: int = 7,
) -> Any:
    return create_resnext(
        model, data, num_input_channels, num_labels, num_layers=50, num_groups=1, num_width_per_group=64,
        label=label, is_test=is_test, no_loss=no_loss, no_bias=no_bias, conv1_kernel=conv1_kernel,
        conv1_stride=conv1_stride, final_avg_kernel=final_avg_kernel,
    )  # fmt: skip
