"""``caffe2.python.models.shufflenet``: ShuffleNet V2 (Ma et al., 2018) on brew, with Caffe2's blob names.

- ``OUTPUT_CHANNELS[width]`` for widths '0.5x', '1.0x', '1.5x', '2.0x': channels of stage 1, stages 2-4 and
  conv5.
- ``ShuffleNetV2Builder(model, data, num_input_channels, num_labels, num_groups=2, width='1.0x',
  is_test=False, detection=False, bn_epsilon=1e-5).create()``: ``stage1_conv`` (3x3 stride 2, no pad,
  MSRAFill) and ``stage1_pool`` (3x3/2 max pool); stages 2-4 each a down-sampling unit
  ``stage<k>_stride2`` then 3, 7, 3 basic units ``stage<k>_stride1_repeat<i>``; ``conv5`` (1x1),
  ``avg_pool`` (7x7) and the classifier ``last_out_L<num_labels>`` (kept as ``builder.last_out``).
  A down-sampling unit has two branches: left = depthwise 3x3 (stride 2) + BN, then 1x1 + BN + ReLU;
  right = 1x1 + BN + ReLU, depthwise 3x3 (stride 2) + BN, 1x1 + BN + ReLU, each half the unit's output
  channels; a basic unit splits its input in two channel halves, runs the right one through the right
  branch and keeps the left. Both concatenate (right, left) and ``ChannelShuffle`` with ``num_groups``.
  Blob names are Caffe2's, including its ``<prefix>left_dwconv`` (no underscore); BN outputs are
  ``<conv>_bn``; ReLUs run in place. ``detection=True`` puts a depthwise 3x3 + BN in front of each branch
  (``<prefix>_left_detection`` / ``_right_detection``).
- ``create_shufflenet(model, data, num_input_channels, num_labels, label=None, is_test=False,
  no_loss=False)``: the 1.0x network; returns the logits with ``no_loss``, else ``(softmax, loss)`` from
  SoftmaxWithLoss with a ``label``, else None (as Caffe2).
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python import brew

OUTPUT_CHANNELS = {
    "0.5x": [24, 48, 96, 192, 1024],
    "1.0x": [24, 116, 232, 464, 1024],
    "1.5x": [24, 176, 352, 704, 1024],
    "2.0x": [24, 244, 488, 976, 2048],
}

_MSRA = ("MSRAFill", {})


class ShuffleNetV2Builder:
    def __init__(
        self, model: Any, data: Any, num_input_channels: int, num_labels: int, num_groups: int = 2,
        width: str = "1.0x", is_test: bool = False, detection: bool = False, bn_epsilon: float = 1e-5,
    ) -> None:  # fmt: skip
        self.model = model
        self.prev_blob = data
        self.num_input_channels = num_input_channels
        self.num_labels = num_labels
        self.num_groups = num_groups
        self.output_channels = OUTPUT_CHANNELS[width]
        self.stage_repeats = [3, 7, 3]
        self.is_test = is_test
        self.detection = detection
        self.bn_epsilon = bn_epsilon

    def create(self) -> None:
        m, ch = self.model, self.output_channels
        channels = ch[0]
        self.prev_blob = brew.conv(
            m, self.prev_blob, "stage1_conv", self.num_input_channels, channels, weight_init=_MSRA, kernel=3, stride=2
        )
        self.prev_blob = brew.max_pool(m, self.prev_blob, "stage1_pool", kernel=3, stride=2)
        for stage, (out_channels, repeats) in enumerate(zip(ch[1:4], self.stage_repeats), start=2):
            self.add_spatial_ds_unit(f"stage{stage}_stride2", channels, out_channels)
            channels = out_channels
            for i in range(1, repeats + 1):
                self.add_basic_unit(f"stage{stage}_stride1_repeat{i}", channels)
        self.last_conv = brew.conv(m, self.prev_blob, "conv5", channels, ch[4], kernel=1)
        self.avg_pool = m.AveragePool(self.last_conv, "avg_pool", kernel=7)
        self.last_out = brew.fc(m, self.avg_pool, f"last_out_L{self.num_labels}", ch[4], self.num_labels)

    def _shuffle(self, right: Any, left: Any, prefix: str) -> None:
        joined = brew.concat(self.model, [right, left], prefix + "_concat")
        self.prev_blob = self.model.net.ChannelShuffle(joined, prefix + "_ch_shuffle", group=self.num_groups, kernel=1)

    def add_spatial_ds_unit(self, prefix: str, in_channels: int, out_channels: int, stride: int = 2) -> None:
        left = right = self.prev_blob
        half = out_channels // 2
        if self.detection:
            left = self.add_detection_unit(left, prefix + "_left_detection", in_channels, in_channels)
        left = self.add_dwconv3x3_bn(left, prefix + "left_dwconv", in_channels, stride)
        left = self.add_conv1x1_bn(left, prefix + "_left_conv1", in_channels, half)
        if self.detection:
            right = self.add_detection_unit(right, prefix + "_right_detection", in_channels, in_channels)
        right = self.add_conv1x1_bn(right, prefix + "_right_conv1", in_channels, half)
        right = self.add_dwconv3x3_bn(right, prefix + "_right_dwconv", half, stride)
        right = self.add_conv1x1_bn(right, prefix + "_right_conv2", half, half)
        self._shuffle(right, left, prefix)

    def add_basic_unit(self, prefix: str, in_channels: int, stride: int = 1) -> None:
        half = in_channels // 2
        left, right = prefix + "_left", prefix + "_right"
        self.model.net.Split(self.prev_blob, [left, right])
        if self.detection:
            right = self.add_detection_unit(right, prefix + "_right_detection", half, half)
        right = self.add_conv1x1_bn(right, prefix + "_right_conv1", half, half)
        right = self.add_dwconv3x3_bn(right, prefix + "_right_dwconv", half, stride)
        right = self.add_conv1x1_bn(right, prefix + "_right_conv2", half, half)
        self._shuffle(right, left, prefix)

    def _bn(self, blob: Any, name: str, channels: int) -> Any:
        return brew.spatial_bn(self.model, blob, name, channels, epsilon=self.bn_epsilon, is_test=self.is_test)

    def add_detection_unit(
        self, prev_blob: Any, prefix: str, in_channels: int, out_channels: int, kernel: int = 3, pad: int = 1
    ) -> Any:
        out = brew.conv(
            self.model, prev_blob, prefix + "_conv", in_channels, out_channels, kernel=kernel, weight_init=_MSRA,
            group=in_channels, pad=pad,
        )  # fmt: skip
        return self._bn(out, prefix + "_bn", out_channels)

    def add_conv1x1_bn(self, prev_blob: Any, blob: str, in_channels: int, out_channels: int) -> Any:
        out = brew.conv(self.model, prev_blob, blob, in_channels, out_channels, kernel=1, weight_init=_MSRA)
        out = self._bn(out, out + "_bn", out_channels)
        return brew.relu(self.model, out, out)

    def add_dwconv3x3_bn(self, prev_blob: Any, blob: str, channels: int, stride: int) -> Any:
        out = brew.conv(
            self.model, prev_blob, blob, channels, channels, kernel=3, weight_init=_MSRA, stride=stride,
            group=channels, pad=1,
        )  # fmt: skip
        return self._bn(out, out + "_bn", channels)


def create_shufflenet(
    model: Any, data: Any, num_input_channels: int, num_labels: int, label: Any = None, is_test: bool = False,
    no_loss: bool = False,
) -> Any:  # fmt: skip
    builder = ShuffleNetV2Builder(model, data, num_input_channels, num_labels, is_test=is_test)
    builder.create()
    if no_loss:
        return builder.last_out
    if label is not None:
        return model.SoftmaxWithLoss([builder.last_out, label], ["softmax", "loss"])
    return None
