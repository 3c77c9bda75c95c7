"""``GradientClipping``: clip parameter gradients in place in a training net (Caffe2's
``caffe2.python.modeling.gradient_clipping``, with the 2020 tree's options).

- ``by_norm``: ``g *= threshold / max(threshold, |g|)`` by ``ClipTensorByScaling``, where ``|g|`` is the
  L1 norm or the L2 norm (``LpNorm`` gives the squared L2 norm, hence ``Pow(.., 0.5)``). With
  ``use_parameter_norm`` the threshold is multiplied by the parameter's norm; ``compute_norm_ratio``
  also writes ``|g| / |w|`` to ``<w>_norm_ratio`` (for inspection).
- ``by_value``: ``Clip(g, min=clip_min, max=clip_max)``.

``modify_net(net, grad_map=...)`` clips every dense gradient of ``grad_map`` (param -> grad), or only
those of ``blobs_to_include``, minus ``blobs_to_exclude``. Sparse gradients (GradientSlice) are left
alone, as in Caffe2.
"""

from __future__ import annotations

from typing import Any, Sequence

from framework.caffe2.python.modeling.net_modifier import NetModifier, require_defined
from framework.errors import FrameworkError

__all__ = ["GradientClipping"]


class GradientClipping(NetModifier):
    L1_NORM = "l1_norm"
    L2_NORM = "l2_norm"

    BY_NORM = "by_norm"
    BY_VALUE = "by_value"

    GRAD_CLIP_METHODS = [BY_NORM, BY_VALUE]
    CLIP_GRADIENT_NORM_TYPES = [L2_NORM, L1_NORM]

    def __init__(
        self,
        grad_clip_method: str,
        clip_norm_type: str | None = "l2_norm",
        clip_threshold: float = 0.1,
        use_parameter_norm: bool = False,
        compute_norm_ratio: bool = False,
        clip_max: float = 1,
        clip_min: float = -1,
        blobs_to_include: Sequence[Any] | None = None,
        blobs_to_exclude: Sequence[Any] | None = None,
    ) -> None:
        if grad_clip_method not in self.GRAD_CLIP_METHODS:
            raise FrameworkError(
                f"GradientClipping: unknown method '{grad_clip_method}' (one of {self.GRAD_CLIP_METHODS})"
            )
        if clip_norm_type is not None and clip_norm_type not in self.CLIP_GRADIENT_NORM_TYPES:
            raise FrameworkError(
                f"GradientClipping: unknown norm '{clip_norm_type}' (one of {self.CLIP_GRADIENT_NORM_TYPES})"
            )
        self.grad_clip_method = grad_clip_method
        self.clip_norm_type = clip_norm_type
        self.clip_threshold = float(clip_threshold)
        self.use_parameter_norm = use_parameter_norm
        self.compute_norm_ratio = compute_norm_ratio
        self.clip_max = float(clip_max)
        self.clip_min = float(clip_min)
        self.blobs_to_include = blobs_to_include
        self.blobs_to_exclude = blobs_to_exclude

    def _selected(self, net: Any, grad_map: dict[Any, Any]) -> dict[Any, Any]:
        from framework import core

        if self.blobs_to_include is None:
            selected = dict(grad_map)
        else:
            by_name = {str(k): v for k, v in grad_map.items()}
            selected = {}
            for name in self.blobs_to_include:
                param = core.BlobReference(str(name))
                require_defined(net, param)
                if str(param) not in by_name:
                    raise FrameworkError(f"GradientClipping: parameter '{param}' has no gradient in grad_map")
                selected[param] = by_name[str(param)]
        for name in self.blobs_to_exclude or []:
            for key in [k for k in selected if str(k) == str(name)]:
                del selected[key]
        return selected

    def _norm(self, net: Any, blob: Any, p: int) -> Any:
        norm = net.LpNorm([blob], net.NextScopedBlob(prefix=f"{blob}_l{p}_norm"), p=p)
        return net.Pow([norm], exponent=0.5) if p == 2 else norm

    def modify_net(
        self,
        net: Any,
        init_net: Any = None,
        grad_map: Any = None,
        blob_to_device: Any = None,
        modify_output_record: bool = False,
    ) -> None:
        from framework import core
        from framework.caffe2.python.optimizer import get_param_device
        from framework.ops.gradient import GradientSlice

        if grad_map is None:
            raise FrameworkError("GradientClipping.modify_net needs grad_map (param -> gradient)")
        cpu = core.DeviceOption(0)
        for param, grad in self._selected(net, grad_map).items():
            if isinstance(grad, GradientSlice):
                continue
            device = get_param_device(param, grad, param_to_device=blob_to_device, default_device=cpu)
            with core.DeviceScope(device):
                if self.grad_clip_method == self.BY_VALUE:
                    net.Clip([grad], [grad], max=self.clip_max, min=self.clip_min)
                    continue
                p = 2 if self.clip_norm_type == self.L2_NORM else 1
                grad_norm = self._norm(net, grad, p)
                inputs = [grad, grad_norm]
                if self.use_parameter_norm:
                    param_norm = self._norm(net, param, p)
                    inputs.append(param_norm)
                    if self.compute_norm_ratio:
                        net.Div([grad_norm, param_norm], [net.NextScopedBlob(prefix=f"{param}_norm_ratio")])
                net.ClipTensorByScaling(inputs, [grad], threshold=self.clip_threshold)
