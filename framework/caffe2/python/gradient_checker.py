"""``caffe2.python.gradient_checker``: numerical gradient checks of one op (GradientChecker)
and of whole nets (NetGradientChecker), with Caffe2's signatures.

``GradientChecker.CheckSimple`` stacks the loss 0.5 * sum of squares of the outputs
``outputs_with_grads`` on the op and compares the analytic gradient of input
``input_to_check`` with central differences; it returns ``(ok, grad, grad_estimate)`` as
Caffe2's does. Differences are taken in float64 (float inputs are promoted), so the estimate is
more accurate than Caffe2's float32 one.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework import core, workspace
from framework.errors import BlobNotFoundError
from framework.ops import testing as _testing


def getGradientForOp(op: Any) -> tuple[list, list]:
    return core.GradientRegistry.GetGradientForOp(op, [s + "_grad" for s in op.output])


def _as_list(x: Any) -> list[int]:
    return [int(x)] if isinstance(x, (int, np.integer)) else [int(v) for v in x]


class GradientChecker:
    def __init__(
        self,
        stepsize: float,
        threshold: float,
        device_option: Any = None,
        workspace_name: str = "gradient_check",
        input_device_options: Any = None,
    ) -> None:
        self._stepsize = stepsize
        self._threshold = threshold
        self._device_option = device_option or core.DeviceOption(0)
        self._workspace_name = workspace_name
        self._input_device_options = input_device_options or {}

    def GetLossAndGrad(self, op: Any, grad_ops: Sequence[Any], *args: Any) -> tuple[float, np.ndarray]:
        """Run ``op`` then ``grad_ops`` once in the current workspace, as Caffe2's: feed the inputs, take
        the loss 0.5 * sum of squares of the outputs ``outputs_with_grads`` (each fed as its own gradient
        ``<output>_grad``), and return ``(loss, gradient)`` where the gradient is blob ``grad_name`` (a
        GradientSlice is scattered-added into zeros shaped as the checked input).

        ``args`` are Caffe2 2020's ``(inputs, input_names, input_to_check, grad_name, outputs_with_grads)``
        or 2018's ``(x, input_name, grad_name, outputs_with_grads)`` (one input fed, the others already
        in the workspace)."""
        if len(args) == 4:
            x, input_name, grad_name, outputs_with_grads = args
            return self._loss_and_grad(op, grad_ops, [x], [input_name], 0, grad_name, outputs_with_grads)
        return self._loss_and_grad(op, grad_ops, *args)

    def _loss_and_grad(
        self,
        op: Any,
        grad_ops: Sequence[Any],
        inputs: Sequence[Any],
        input_names: Sequence[str],
        input_to_check: int,
        grad_name: Any,
        outputs_with_grads: Any,
    ) -> tuple[float, np.ndarray]:
        for name, value in zip(input_names, inputs):
            workspace.FeedBlob(name, value, self._input_device_options.get(name, self._device_option))
        workspace.RunOperatorOnce(op)
        loss = 0.0
        for k in _as_list(outputs_with_grads):
            out = workspace.FetchBlob(op.output[k])
            loss += float(np.sum(np.square(out, dtype=np.float64)))
            workspace.FeedBlob(op.output[k] + "_grad", out, self._device_option)
        workspace.RunOperatorsOnce(grad_ops)
        if isinstance(grad_name, core.GradientSlice):
            x = np.asarray(inputs[input_to_check])
            values = workspace.FetchBlob(str(grad_name.values))
            grad = np.zeros(x.shape, np.float32)
            np.add.at(grad, workspace.FetchBlob(str(grad_name.indices)), values)
        else:
            grad = workspace.FetchBlob(str(grad_name))
        return loss / 2.0, grad

    def CheckSimple(
        self,
        op: Any,
        inputs: Sequence[Any],
        input_to_check: int,
        outputs_with_grads: Any,
        grad_ops: Sequence[Any] | None = None,
        input_device_options: Any = None,
        ensure_outputs_are_inferred: bool = False,
    ) -> tuple[bool, np.ndarray, np.ndarray]:
        """(passed, analytic gradient, numerical estimate) of input ``input_to_check``.

        As Caffe2's, the checker runs in a workspace of its own fed with ``inputs`` in order; an op
        with more inputs than values given fails to run (BlobNotFoundError, a RuntimeError)."""
        if len(inputs) < len(op.input):
            raise BlobNotFoundError(
                f"{op.type}: input '{op.input[len(inputs)]}' has no value: the gradient checker feeds only the "
                f"{len(inputs)} values given to the op's {len(op.input)} inputs, in a workspace of its own"
            )
        op_def = core.CreateOperator(op.type, [], [])
        op_def.CopyFrom(op)
        op_def.device_option.CopyFrom(self._device_option)
        grad, estimate = _testing.gradient_pair(
            op_def,
            list(inputs),
            int(input_to_check),
            _as_list(outputs_with_grads),
            stepsize=self._stepsize,
            grad_ops=grad_ops,
            check_inference=ensure_outputs_are_inferred,
        )
        fail = ~np.isclose(grad, estimate, atol=self._threshold, rtol=self._threshold)
        if np.any(fail):
            idx = np.flatnonzero(fail)
            print("Failed. [idx, grad, grad_estimate] are:")
            print(np.vstack([idx, grad.flat[idx], estimate.flat[idx]]).T)
            return False, grad, estimate
        return True, grad, estimate


def _grad_blob(grad_map: dict, name: str) -> np.ndarray:
    g = grad_map[name]
    if isinstance(g, core.GradientSlice):
        dense = "tmp_dense_grad"
        workspace.RunOperatorOnce(core.CreateOperator("SparseToDense", [g.indices, g.values, name], dense))
        return workspace.FetchBlob(dense)
    return workspace.FetchBlob(str(g))


def _get_grad(
    net: Any, outputs: Sequence[str], outputs_with_grad: Sequence[str], input_values: Any, inputs: Sequence[str]
):
    grad_net = net.Clone(net.Name() + "_copy")
    grad_map = grad_net.AddGradientOperators(list(outputs_with_grad))
    for name, value in (input_values or {}).items():
        workspace.FeedBlob(name, value)
    for name in inputs:
        assert name in grad_map, f"Failed to find input {name} in gradient map {grad_map}"
    workspace.RunNetOnce(grad_net)
    forward = [(o, workspace.FetchBlob(o)) for o in outputs]
    grads = {name: _grad_blob(grad_map, name) for name in inputs}
    return forward, grads, grad_net


def _assert_close(value1: Any, value2: Any, threshold: float, err_msg: str = "") -> tuple[float, float]:
    np.testing.assert_allclose(value1, value2, atol=threshold, rtol=threshold, err_msg=err_msg)
    delta = np.abs(np.asarray(value1) - np.asarray(value2)).flatten()
    return float(np.mean(delta)), float(max(delta)) if delta.size else 0.0


class NetGradientChecker:
    @staticmethod
    def CompareNets(
        nets: Sequence[Any],
        outputs: Sequence[Sequence[str]],
        outputs_with_grad_ids: Sequence[int],
        inputs_with_grads: Sequence[str],
        input_values: Any = None,
        threshold: float = 0.0000001,
        print_net_images: bool = False,
    ) -> None:
        """The nets give the same outputs and the same gradients of ``inputs_with_grads``."""
        results = []
        for net, outs in zip(nets, outputs):
            with_grad = [outs[i] for i in outputs_with_grad_ids]
            results.append(_get_grad(net, outs, with_grad, input_values, inputs_with_grads))
        first_fwd, first_grads, _ = results[0]
        for i, (fwd, grads, _) in enumerate(results[1:], 1):
            for (name_a, a), (name_b, b) in zip(first_fwd, fwd):
                _assert_close(
                    a, b, threshold, f"Different forward pass results for output {name_a} vs {name_b} (net {i})"
                )
            for name in inputs_with_grads:
                _assert_close(
                    first_grads[name], grads[name], threshold, f"Different gradients for input {name} (net {i})"
                )

    @staticmethod
    def Check(
        net: Any,
        outputs_with_grad: Sequence[str],
        input_values: dict,
        input_to_check: str,
        step_size: float = 0.0001,
        threshold: float = 0.05,
        print_net: bool = True,
    ) -> tuple[float, float]:
        """The net's gradient of ``input_to_check`` vs central differences of sum(outputs)."""
        _, grads, full_net = _get_grad(net, [], outputs_with_grad, input_values, [input_to_check])
        analytic = grads[input_to_check]

        def loss(value: np.ndarray) -> float:
            workspace.FeedBlob(input_to_check, value)
            workspace.RunNetOnce(full_net)
            return float(sum(np.asarray(workspace.FetchBlob(o), dtype=np.float64).sum() for o in outputs_with_grad))

        base = np.asarray(input_values[input_to_check])
        estimate = np.zeros(base.shape, dtype=np.float64)
        for dim in range(base.size):
            plus, minus = base.copy(), base.copy()
            plus.flat[dim] += step_size
            minus.flat[dim] -= step_size
            estimate.flat[dim] = (loss(plus) - loss(minus)) / step_size / 2
        workspace.FeedBlob(input_to_check, base)
        err_msg = f"Error in gradient check for net_copy {net.Name()}"
        if print_net:
            err_msg += f": {net.Proto()}\n"
        return _assert_close(analytic, estimate, threshold, err_msg)
