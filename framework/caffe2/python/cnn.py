"""``caffe2.python.cnn``: CNNModelHelper, Caffe2's deprecated CNN model class, as a ModelHelper
whose methods call the brew helpers with the model's ``order`` and cuDNN settings (the cuDNN
ones are accepted and ignored: everything runs the CPU code)."""

from __future__ import annotations

import logging
from typing import Any

from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.proto import caffe2_pb2

log = logging.getLogger(__name__)


class CNNModelHelper(ModelHelper):
    def __init__(
        self,
        order: str = "NCHW",
        name: str | None = None,
        use_cudnn: bool = True,
        cudnn_exhaustive_search: bool = False,
        ws_nbytes_limit: Any = None,
        init_params: bool = True,
        skip_sparse_optim: bool = False,
        param_model: Any = None,
    ) -> None:
        log.warning(
            "[====DEPRECATE WARNING====]: you are creating an object from CNNModelHelper class which will be "
            "deprecated soon. Please use ModelHelper object with brew module."
        )
        scope = {"order": order, "use_cudnn": use_cudnn, "cudnn_exhaustive_search": cudnn_exhaustive_search}
        if ws_nbytes_limit:
            scope["ws_nbytes_limit"] = ws_nbytes_limit
        super().__init__(
            name="CNN" if name is None else name,
            init_params=init_params,
            skip_sparse_optim=skip_sparse_optim,
            param_model=param_model,
            arg_scope=scope,
        )
        if order not in ("NHWC", "NCHW"):
            raise ValueError(f"Cannot understand the CNN storage order {order}.")
        self.order = order
        self.use_cudnn = use_cudnn
        self.cudnn_exhaustive_search = cudnn_exhaustive_search
        self.ws_nbytes_limit = ws_nbytes_limit

    def _cudnn(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"use_cudnn": self.use_cudnn, "cudnn_exhaustive_search": self.cudnn_exhaustive_search}
        if self.ws_nbytes_limit:
            kw["ws_nbytes_limit"] = self.ws_nbytes_limit
        return kw

    def PadImage(self, blob_in: Any, blob_out: Any, **kwargs: Any) -> None:
        self.net.PadImage(blob_in, blob_out, **kwargs)

    def ConvNd(self, *args: Any, **kwargs: Any) -> Any:
        return brew.conv_nd(self, *args, order=self.order, **self._cudnn(), **kwargs)

    def Conv(self, *args: Any, **kwargs: Any) -> Any:
        return brew.conv(self, *args, order=self.order, **self._cudnn(), **kwargs)

    def ConvTranspose(self, *args: Any, **kwargs: Any) -> Any:
        return brew.conv_transpose(self, *args, order=self.order, **self._cudnn(), **kwargs)

    def GroupConv(self, *args: Any, **kwargs: Any) -> Any:
        return brew.group_conv(self, *args, order=self.order, **self._cudnn(), **kwargs)

    def GroupConv_Deprecated(self, *args: Any, **kwargs: Any) -> Any:
        return brew.group_conv_deprecated(self, *args, order=self.order, **self._cudnn(), **kwargs)

    def FC(self, *args: Any, **kwargs: Any) -> Any:
        return brew.fc(self, *args, **kwargs)

    def Dropout(self, *args: Any, **kwargs: Any) -> Any:
        return brew.dropout(self, *args, order=self.order, use_cudnn=self.use_cudnn, **kwargs)

    def LRN(self, *args: Any, **kwargs: Any) -> Any:
        return brew.lrn(self, *args, order=self.order, use_cudnn=self.use_cudnn, **kwargs)

    def Softmax(self, *args: Any, **kwargs: Any) -> Any:
        return brew.softmax(self, *args, use_cudnn=self.use_cudnn, **kwargs)

    def SpatialBN(self, *args: Any, **kwargs: Any) -> Any:
        return brew.spatial_bn(self, *args, order=self.order, **kwargs)

    def SpatialGN(self, *args: Any, **kwargs: Any) -> Any:
        return brew.spatial_gn(self, *args, order=self.order, **kwargs)

    def InstanceNorm(self, *args: Any, **kwargs: Any) -> Any:
        return brew.instance_norm(self, *args, order=self.order, **kwargs)

    def Relu(self, *args: Any, **kwargs: Any) -> Any:
        return brew.relu(self, *args, order=self.order, use_cudnn=self.use_cudnn, **kwargs)

    def PRelu(self, *args: Any, **kwargs: Any) -> Any:
        return brew.prelu(self, *args, **kwargs)

    def Concat(self, *args: Any, **kwargs: Any) -> Any:
        return brew.concat(self, *args, order=self.order, **kwargs)

    def DepthConcat(self, *args: Any, **kwargs: Any) -> Any:
        return brew.depth_concat(self, *args, order=self.order, **kwargs)

    def Sum(self, *args: Any, **kwargs: Any) -> Any:
        return brew.sum(self, *args, **kwargs)

    def Transpose(self, *args: Any, **kwargs: Any) -> Any:
        return brew.transpose(self, *args, use_cudnn=self.use_cudnn, **kwargs)

    def Iter(self, *args: Any, **kwargs: Any) -> Any:
        return brew.iter(self, *args, **kwargs)

    def Accuracy(self, *args: Any, **kwargs: Any) -> Any:
        return brew.accuracy(self, *args, **kwargs)

    def MaxPool(self, *args: Any, **kwargs: Any) -> Any:
        return brew.max_pool(self, *args, use_cudnn=self.use_cudnn, order=self.order, **kwargs)

    def AveragePool(self, *args: Any, **kwargs: Any) -> Any:
        return brew.average_pool(self, *args, use_cudnn=self.use_cudnn, order=self.order, **kwargs)

    @property
    def XavierInit(self) -> tuple:
        return ("XavierFill", {})

    def ConstantInit(self, value: float) -> tuple:
        return ("ConstantFill", {"value": value})

    @property
    def MSRAInit(self) -> tuple:
        return ("MSRAFill", {})

    @property
    def ZeroInit(self) -> tuple:
        return ("ConstantFill", {})

    def AddWeightDecay(self, weight_decay: float) -> None:
        return brew.add_weight_decay(self, weight_decay)

    @property
    def CPU(self) -> Any:
        return caffe2_pb2.DeviceOption(device_type=caffe2_pb2.CPU)

    @property
    def GPU(self, gpu_id: int = 0) -> Any:
        from framework import workspace

        return caffe2_pb2.DeviceOption(device_type=workspace.GpuDeviceType, device_id=gpu_id)
