"""``ModelHelper`` (Caffe2's ``caffe2.python.model_helper``): a training model
as two nets and its parameters.

- ``param_init_net`` (named ``<name>_init``) creates the parameters once;
- ``net`` is the forward (then backward and update) net;
- ``params`` lists trainable parameters, ``param_to_grad`` maps them to their
  gradients once ``AddGradientOperators`` (allowed once) has run.

Parameters are created through ``create_param`` by the ``framework.caffe2.python.brew``
helpers (``<out>_w`` XavierFill, ``<out>_b`` ConstantFill for ``fc``).

>>> from framework.caffe2.python import brew
>>> model = ModelHelper("mlp")
>>> h = brew.fc(model, "data", "fc1", dim_in=4, dim_out=3)
>>> [str(p) for p in model.params]
['fc1_w', 'fc1_b']
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Sequence

from framework import core
from framework.caffe2.python.modeling.initializers import ExternalInitializer, Initializer, update_initializer
from framework.caffe2.python.modeling.parameter_info import ParameterInfo, ParameterTags
from framework.caffe2.python.modeling.parameter_sharing import parameter_sharing_context
from framework.errors import FrameworkError, ModelError, NetError
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import INT

log = logging.getLogger("framework.caffe2.python.model_helper")

__all__ = [
    "ExternalInitializer",
    "ExtractPredictorNet",
    "Initializer",
    "ModelHelper",
    "ParameterInfo",
    "ParameterTags",
    "update_initializer",
]


def _blob_ref(name: str) -> Any:
    ref = getattr(core, "BlobReference", None)
    return ref(name) if ref is not None else name


class ModelHelper:
    """A model: ``param_init_net`` + ``net``, parameters and their gradients (see module doc)."""

    def __init__(
        self,
        name: str | None = None,
        init_params: bool = True,
        allow_not_known_ops: bool = True,
        skip_sparse_optim: bool = False,
        param_model: ModelHelper | None = None,
        arg_scope: dict[str, Any] | None = None,
    ) -> None:
        self.name = name or "model"
        self.net = core.Net(self.name)
        if param_model is not None:
            self.param_init_net = param_model.param_init_net
            self.param_to_grad = param_model.param_to_grad
            self.params = param_model.params
            self._computed_params = param_model._computed_params
            self._parameters_info = param_model._parameters_info
        else:
            self.param_init_net = core.Net(self.name + "_init")
            self.param_to_grad: dict[Any, Any] = {}
            self.params: list[Any] = []
            self._computed_params: list[Any] = []
            self._parameters_info: dict[str, ParameterInfo] = {}
        self.gradient_ops_added = False
        self.grad_map: dict[Any, Any] = {}
        self.init_params = init_params
        self.allow_not_known_ops = allow_not_known_ops
        self.skip_sparse_optim = skip_sparse_optim
        self.weights: list[Any] = []
        self.biases: list[Any] = []
        self._arg_scope: dict[str, Any] = {"order": "NCHW", "use_cudnn": True, "cudnn_exhaustive_search": False}
        if arg_scope is not None:
            self._arg_scope.update(arg_scope)

    @property
    def arg_scope(self) -> dict[str, Any]:
        return self._arg_scope

    # -- parameters --------------------------------------------------------------------
    def create_param(self, param_name: Any, shape: Sequence[int], initializer: Any = None, tags: Any = None) -> Any:
        """Create (or, without ``init_params``, declare) a parameter; returns its blob reference.

        A plain-string ``param_name`` is placed in the current NameScope as resolved by the active
        ``ParameterSharing`` overrides; a BlobReference is used as given. Asking again for an existing
        parameter returns it (its shape must match, else ModelError, an AssertionError as in Caffe2).
        ``initializer``: an initializer (``modeling.initializers``), a ``(fill op, kwargs)`` pair, or None
        (external). Tags: ParameterTags.WEIGHT / BIAS / COMPUTED_PARAM (computed params are not trained).
        A tag (or ``DEFAULT``) with an optimizer in the current ``OptimizerContext`` sets the parameter's
        optimizer, as Caffe2 does.
        """
        if isinstance(param_name, core.BlobReference):
            name = str(param_name)
        elif isinstance(param_name, str):
            name = parameter_sharing_context.get_parameter_name(param_name)
        else:
            raise FrameworkError(f"parameter name must be a str or BlobReference, got {type(param_name).__name__}")
        if name in self._parameters_info:
            known = self._parameters_info[name].shape
            if known is not None and list(known) != list(shape):
                raise ModelError(
                    f"model '{self.name}': parameter '{name}' exists with shape {known}, not {list(shape)}"
                )
            return self._parameters_info[name].blob
        if isinstance(initializer, tuple):
            initializer = Initializer(initializer[0], **(initializer[1] or {}))
        if initializer is None or not self.init_params:
            initializer = ExternalInitializer()
        info = initializer.create_param(core.BlobReference(name), self.param_init_net, shape)
        tag_list = [tags] if isinstance(tags, str) else list(tags or [])
        info.tags = tag_list
        self._set_context_optimizer(info, tag_list)
        self._parameters_info[name] = info
        self.AddParameter(info.blob, tag_list)
        return info.blob

    @staticmethod
    def _set_context_optimizer(info: ParameterInfo, tags: list[str]) -> None:
        from framework.caffe2.python.optimizer_context import DEFAULT_OPTIM, OptimizerContext

        context = OptimizerContext.current()
        for tag in set(tags):
            if context.has_optimizer(tag):
                info.optimizer = context.get_optimizer(tag)
        if info.optimizer is None and context.has_optimizer(DEFAULT_OPTIM):
            info.optimizer = context.get_optimizer(DEFAULT_OPTIM)

    def AddParameter(self, param: Any, tags: Any = None) -> None:
        tags = [tags] if isinstance(tags, str) else list(tags or [])
        if ParameterTags.COMPUTED_PARAM in tags:
            self._computed_params.append(param)
        else:
            self.params.append(param)
        if ParameterTags.WEIGHT in tags:
            self.weights.append(param)
        elif ParameterTags.BIAS in tags:
            self.biases.append(param)

    def get_param_info(self, param: Any) -> ParameterInfo | None:
        return self._parameters_info.get(str(param))

    @staticmethod
    def _in_scope(params: Iterable[Any], namescope: str | None) -> list[Any]:
        if namescope is None:
            cur = getattr(core, "CurrentNameScope", None)
            namescope = cur() if cur is not None else ""
        if namescope and not namescope.endswith("/"):
            namescope += "/"
        return [p for p in params if str(p).startswith(namescope)]

    def GetParams(self, namescope: str | None = None, top_scope: bool = False) -> list[Any]:
        """Trainable parameters (under ``namescope``, default the current NameScope)."""
        return self._in_scope(self.params, namescope)

    def GetComputedParams(self, namescope: str | None = None) -> list[Any]:
        return self._in_scope(self._computed_params, namescope)

    def GetAllParams(self, namescope: str | None = None) -> list[Any]:
        return self.GetParams(namescope) + self.GetComputedParams(namescope)

    def _Validate(self) -> list[str]:
        """The names of the parameters added more than once, sorted (Caffe2)."""
        names = [str(p) for p in self.params]
        return sorted({n for n in names if names.count(n) > 1})

    def Validate(self) -> None:
        dups = self._Validate()
        if dups:
            raise FrameworkError(f"model '{self.name}': parameters added twice: {dups}")

    # -- gradients --------------------------------------------------------------------
    def AddGradientOperators(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        """Append the backward pass to ``net`` (once); fills ``param_to_grad``."""
        if self.gradient_ops_added:
            raise FrameworkError(f"model '{self.name}': AddGradientOperators can only run once")
        self.Validate()
        self.gradient_ops_added = True
        self.grad_map = self.net.AddGradientOperators(*args, **kwargs)
        self.param_to_grad = self.get_param_to_grad(self.params)
        for p, g in self.param_to_grad.items():
            info = self._parameters_info.get(str(p))
            if info is not None:
                info.grad = g
        return self.grad_map

    def get_param_to_grad(self, params: Iterable[Any]) -> dict[Any, Any]:
        by_name = {str(k): v for k, v in self.grad_map.items()}
        return {p: by_name[str(p)] for p in params if str(p) in by_name}

    def GetOptimizationParamInfo(self, params: Iterable[Any] | None = None) -> list[ParameterInfo]:
        """ParameterInfo (with ``grad``) of every parameter with a gradient (default: those under the
        current NameScope, as Caffe2: an optimizer built inside ``NameScope("cpu_1")`` updates that
        device's copy only)."""
        out = []
        for p in self.GetParams() if params is None else params:
            if p not in self.param_to_grad and str(p) not in {str(k) for k in self.param_to_grad}:
                continue
            grad = self.param_to_grad.get(p)
            if grad is None:
                grad = {str(k): v for k, v in self.param_to_grad.items()}[str(p)]
            info = self._parameters_info.get(str(p)) or ParameterInfo(None, p)
            info.grad = grad
            out.append(info)
        return out

    # -- data --------------------------------------------------------------------------
    def CreateDB(self, blob_out: Any, db: str, db_type: str, **kwargs: Any) -> Any:
        """A DB reader blob created in ``param_init_net``."""
        return self.param_init_net.CreateDB([], blob_out, db=db, db_type=db_type, **kwargs)

    def TensorProtosDBInput(
        self, unused_blob_in: Any, blob_out: Any, batch_size: int, db: str, db_type: str, **kwargs: Any
    ) -> Any:
        """Read ``batch_size`` TensorProtos records per run into ``blob_out`` (data, label...)."""
        dbreader = self.CreateDB("dbreader_" + db, db=db, db_type=db_type, **kwargs)
        return self.net.TensorProtosDBInput(dbreader, blob_out, batch_size=batch_size)

    # -- nets ---------------------------------------------------------------------------
    def Proto(self) -> Any:
        return self.net.Proto()

    def InitProto(self) -> Any:
        return self.param_init_net.Proto()

    def GetDevices(self) -> list[Any]:
        return []

    # Marks the ops of a complete net that came from param_init_net (Caffe2's debug_info suffix).
    _INIT_MARK = "/param_init_net"

    def GetCompleteNet(self) -> Any:
        """One net ``<name>_complete_net``: param_init_net's ops (each marked by ``/param_init_net`` at the
        end of its ``debug_info``) followed by net's; it keeps net's executor type."""
        complete = self.param_init_net.Clone(self.name + "_complete_net", keep_schema=True)
        for op in complete.Proto().op:
            op.debug_info = op.debug_info + self._INIT_MARK
        complete.AppendNet(self.net)
        if self.net.Proto().HasField("type"):
            complete.Proto().type = self.net.Proto().type
        return complete

    def ConstructInitTrainNetfromNet(self, net: Any) -> None:
        """Split a ``GetCompleteNet`` net back: the marked ops become param_init_net
        (``<name>/generated_param_init_net``), the others net (``<name>/generated_net``), each with
        external inputs and outputs recomputed from its ops."""
        ops = net.Proto().op
        init_ids = [i for i, op in enumerate(ops) if op.debug_info.endswith(self._INIT_MARK)]
        train_ids = [i for i, op in enumerate(ops) if not op.debug_info.endswith(self._INIT_MARK)]
        self.param_init_net = net.Clone(
            net.Name() + "/generated_param_init_net", keep_schema=True, op_id_mask=init_ids, update_external_list=True
        )
        self.net = net.Clone(
            net.Name() + "/generated_net", keep_schema=True, op_id_mask=train_ids, update_external_list=True
        )

    def __getattr__(self, op_type: str) -> Any:
        """``model.Relu(...)`` is ``model.net.Relu(...)`` (Caffe2 kept a whitelist; we warn never)."""
        if op_type.startswith("__") or op_type in ("net", "param_init_net"):
            raise AttributeError(op_type)
        from framework.ops import has_op

        if not has_op(op_type):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute or operator '{op_type}'")
        return getattr(self.net, op_type)

    def __repr__(self) -> str:
        return f"<ModelHelper '{self.name}': {len(self.params)} params>"


def ExtractPredictorNet(
    net_proto: Any,
    input_blobs: Iterable[Any],
    output_blobs: Iterable[Any],
    device: Any = None,
    renames: dict[str, str] | None = None,
    disabled_inputs: Iterable[str] | None = None,
) -> tuple[Any, list[str]]:
    """The inference part of a training NetDef, as Caffe2's ``model_helper.ExtractPredictorNet``.

    Keeps, in order, the ops from the first one reading an ``input_blobs`` blob (StopGradient aside)
    to the last one writing an ``output_blobs`` blob whose inputs are all known: the net's external
    inputs and ``input_blobs`` (less ``disabled_inputs``), then whatever a kept op writes. Kept ops
    get ``device`` (also inside a RecurrentNetwork's step net; its backward step net argument is dropped)
    and ``renames`` applied to their blob names. External inputs are the inputs plus the original
    external inputs the kept ops read; external outputs the outputs plus original external outputs
    they write. Returns ``(core.Net "<name>_predict", external inputs other than input_blobs)``:
    the parameters the predictor needs. The given proto is not modified (Caffe2 edits its ops).

    Raises ``NetError`` when no op reads an input or none writes an output, or when a kept op has
    ``is_test=0`` (a training net given instead of a test net).
    """
    renames = dict(renames or {})
    inputs = [str(b) for b in input_blobs]
    outputs = {str(b) for b in output_blobs}
    orig_inputs = set(net_proto.external_input)
    orig_outputs = set(net_proto.external_output)
    known = (orig_inputs | set(inputs)) - set(disabled_inputs or ())
    ops = list(net_proto.op)
    first = [j for j, op in enumerate(ops) if set(inputs) & set(op.input) and op.type != "StopGradient"]
    if not first:
        raise NetError(f"ExtractPredictorNet: no op of net '{net_proto.name}' reads any of {sorted(inputs)}")
    last = [j for j, op in enumerate(ops) if outputs & set(op.output)]
    if not last:
        raise NetError(f"ExtractPredictorNet: no op of net '{net_proto.name}' writes any of {sorted(outputs)}")

    def renamed(names: Iterable[str]) -> list[str]:
        return [renames.get(n, n) for n in names]

    def place(op: Any) -> None:
        if device is not None:
            op.device_option.device_type = device.device_type
            op.device_option.device_id = device.device_id

    predict_net = core.Net(net_proto.name + "_predict")
    proto = predict_net.Proto()
    ext_in, ext_out = list(inputs), sorted(outputs)
    for original in ops[min(first) : max(last) + 1]:
        if not known.issuperset(original.input):
            log.debug("ExtractPredictorNet: skipping %s: unknown inputs %s", original.type, set(original.input) - known)
            continue
        op = proto.op.add()
        op.CopyFrom(original)
        args = ArgReader(op)
        if args.has_single("is_test", INT) and args.single("is_test", kind=INT) == 0:
            raise NetError(
                f"ExtractPredictorNet: op {op.type} '{op.name}' has is_test=0: extract the predictor from a "
                "test model, not a training model"
            )
        if op.type == "RecurrentNetwork":
            # no backward pass in a predictor (Caffe2 empties the argument; here it goes)
            kept = [a for a in op.arg if a.name != "backward_step_net"]
            del op.arg[:]
            op.arg.extend(kept)
            for a in op.arg:
                if a.name == "step_net":
                    for step_op in a.n.op:
                        step_op.input[:] = renamed(step_op.input)
                        step_op.output[:] = renamed(step_op.output)
                        place(step_op)
                    ext_in += [b for b in a.n.external_input if b in orig_inputs]
                    a.n.external_input[:] = renamed(a.n.external_input)
                    a.n.external_output[:] = renamed(a.n.external_output)
        place(op)
        known.update(op.output)
        ext_in += [b for b in op.input if b in orig_inputs]
        ext_out += [b for b in op.output if b in orig_outputs]
        op.input[:] = renamed(op.input)
        op.output[:] = renamed(op.output)
    proto.external_input.extend(renamed(dict.fromkeys(ext_in)))
    proto.external_output.extend(renamed(dict.fromkeys(ext_out)))
    feeds = set(renamed(inputs))
    return predict_net, [b for b in proto.external_input if b not in feeds]
