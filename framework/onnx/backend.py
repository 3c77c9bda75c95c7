"""An ONNX backend on our ops (``onnx.backend.base.Backend``), with Caffe2's backend names.

``prepare(model)`` translates the graph into a predict NetDef of our ops (``framework.onnx.importer``),
puts the initializers into a private workspace as arrays (never through argument lists: a view of
the tensor's bytes, copied once into the workspace, or shared when the array is writable) and
returns a rep whose ``run(inputs)`` feeds the inputs, runs the predict net on our executor and
returns the outputs. Only the graph outputs are observable, so the net the engine runs is the one a
Caffe2 net gets through ``Predictor`` (``framework.onnx.engine``: the inference pass, memory planning);
an error it raises is reported in terms of the net as translated. A model with any node we cannot
translate exactly makes ``prepare`` raise ``unittest.SkipTest`` listing every such node (type, domain,
opset): never a wrong answer. ``Caffe2Backend.onnx_graph_to_caffe2_net(model)`` gives the two NetDefs.

>>> # rep = prepare(onnx.load("model.onnx")); (y,) = rep.run([x])
"""

from __future__ import annotations

import threading
import unittest
from collections import namedtuple
from typing import Any, Sequence

import numpy as np

from framework.errors import FrameworkError
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.net.optimize import explain_failure
from framework.onnx.caffe2_rules import DummyName, tensor_fill_op
from framework.onnx.engine import engine_net
from framework.onnx.importer import SMALL_INT_INPUT, OnnxImportError, onnx_graph_to_nets
from framework.ops.onnx.values import OptionalValue, TensorSequence, from_blob_value, to_blob_value

RUNTIME_MARK = "needs run-time values"

__all__ = [
    "Caffe2Backend",
    "Caffe2Rep",
    "load_model",
    "prepare",
    "prepare_zip_archive",
    "run_model",
    "run_node",
    "supports_device",
]

try:  # onnx is optional: the base classes only shape the API
    from onnx.backend.base import Backend as _Backend
    from onnx.backend.base import BackendRep as _BackendRep
except ImportError:  # pragma: no cover
    _Backend = _BackendRep = object


class Caffe2Rep(_BackendRep):
    """A prepared model: its workspace (parameters loaded) and predict net.

    A model whose translation needs values or shapes known only from the inputs (an axes or
    shape input, dynamic shapes) is translated again for each new input signature (shapes,
    types and the values of small integer inputs) at ``run``, in its own workspace.
    """

    def __init__(
        self, model: Any, nets: tuple | None, inputs: list[str], outputs: list[str], value_inputs: Any = ()
    ) -> None:
        self.model = model
        self.value_inputs = frozenset(value_inputs)  # inputs whose values the translation needs
        self.uninitialized = list(inputs)
        self.outputs = list(outputs)
        self._cache: dict = {}
        self._lock = threading.Lock()  # one workspace per rep: concurrent runs take turns
        self._outputs_type = outputs_tuple(self.outputs)
        self._kinds = _input_kinds(model)  # sequence/optional inputs become blob objects
        self._declared = _declared_dims(model)
        g = model.graph
        # the names a run may feed: read once (iterating the graph's initializers per run costs more than
        # a small model's run)
        self._feedable = frozenset(inputs) | {i.name for i in g.input} | {t.name for t in g.initializer}
        self.init_net = self.predict_net = None
        self._last_net = None
        if nets is not None:
            self._cache[None] = self._load(*nets)
            _, self.init_net, self.predict_net, _ = self._cache[None]

    @property
    def optimized_net(self) -> Any:
        """The NetDef the engine ran for the last ``run``'s inputs (``framework.onnx.engine``); None before
        the first run."""
        return self._last_net

    @staticmethod
    def _load(init_net: Any, predict_net: Any, extra: dict) -> tuple:
        ws = Workspace()
        _put_values(ws, extra)
        if init_net.op:
            ws.run_net_once(init_net)
        return ws, init_net, predict_net, []  # the created net, once the inputs exist

    def _entry(self, feeds: dict[str, np.ndarray]) -> tuple:
        if None in self._cache and _matches_declared(self._declared, feeds):
            return self._cache[None]
        key = tuple(
            (
                k,
                v.shape,
                v.dtype.str,
                v.tobytes()
                if (v.dtype.kind in "iu" and v.size <= SMALL_INT_INPUT) or v.size == 1 or k in self.value_inputs
                else b"",
            )
            if isinstance(v, np.ndarray)
            else (k, type(v).__name__)
            for k, v in sorted(feeds.items())
        )
        if key not in self._cache:
            init, predict, extra, unsupported = onnx_graph_to_nets(self.model, feeds, self.value_inputs, fills=False)
            if unsupported:
                raise unittest.SkipTest(_message(self.model, unsupported))
            self._cache[key] = self._load(init, predict, extra)
        return self._cache[key]

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        """The outputs for ``inputs`` (a list in the model's input order, a dict, or one array).
        OnnxImportError for inputs the model does not take (count, names, non-numeric objects).
        Safe to call from several threads: runs of one rep are serialised (one workspace)."""
        feeds = _check_inputs(self, inputs)
        feeds = {k: to_blob_value(v, self._kinds.get(k, "tensor")) for k, v in feeds.items()}
        feeds = {k: v if isinstance(v, (TensorSequence, OptionalValue)) else np.asarray(v) for k, v in feeds.items()}
        with self._lock:
            return self._run(feeds)

    def _run(self, feeds: dict) -> tuple:
        ws, _, predict, created = self._entry(feeds)
        for k, v in feeds.items():
            if isinstance(v, np.ndarray):
                ws.feed_blob(k, v)
            else:
                ws.create_blob(k).reset(v)
        if not created:
            created.extend(engine_net(ws, predict, self.outputs, feeds))
        net, optimized = created
        self._last_net = optimized
        try:
            net.run()
        except FrameworkError as e:
            if optimized is predict:
                raise
            err = explain_failure(ws, predict, e)
            raise err from err.__cause__
        return self._outputs_type(*[_onnx_value(from_blob_value(ws.fetch_blob(o))) for o in self.outputs])


class Caffe2Backend(_Backend):
    _dummy_name = DummyName()  # Caffe2's shared helper-blob namer

    @classmethod
    def dummy_name(cls) -> str:
        """A fresh helper-blob name (``OC2_DUMMY_<n>``), as Caffe2's backend hands out."""
        return cls._dummy_name.new_dummy_name()

    @classmethod
    def _create_tensor_filling_op(cls, onnx_tensor: Any, name: str | None = None) -> Any:
        """The GivenTensor*Fill OperatorDef that makes the ONNX TensorProto ``onnx_tensor`` (as blob
        ``name``, default the tensor's name), by Caffe2's type table (``caffe2_rules.tensor_fill_op``)."""
        return tensor_fill_op(onnx_tensor, name)

    @classmethod
    def onnx_graph_to_caffe2_net(cls, model: Any, device: str = "CPU", opset_version: int | None = None) -> tuple:
        """(init_net, predict_net) NetDefs; OnnxImportError listing every node without a translation."""
        init, predict, extra, unsupported = _translate(model)
        if unsupported:
            raise OnnxImportError(_message(model, unsupported), unsupported)
        if extra:
            raise OnnxImportError(
                "initializers of types without a GivenTensor*Fill op: " + ", ".join(sorted(extra)), list(extra)
            )
        return init, predict

    @classmethod
    def prepare_zip_archive(cls, file: Any, device: str = "CPU", **kwargs: Any) -> Caffe2Rep:
        """``prepare`` for Caffe2's zip form of a model (``framework.onnx.zip_archive``): a path or file object."""
        from framework.onnx.zip_archive import load_zip_archive

        return cls.prepare(load_zip_archive(file), device, **kwargs)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", raw_values_dict: Any = None, **kwargs: Any) -> Caffe2Rep:
        """A rep running ``model``; ``raw_values_dict`` ({tensor name: bytes}) gives the raw data of tensors
        marked ``__EXTERNAL`` (Caffe2's external values)."""
        model = load_model(model)
        if raw_values_dict:
            from onnx import ModelProto

            from framework.onnx.zip_archive import resolve_external_values

            copy = ModelProto()
            copy.CopyFrom(model)
            resolve_external_values(copy, lambda n: raw_values_dict.get(n))
            model = copy
        wanted: set[str] = set()
        init, predict, extra, unsupported = onnx_graph_to_nets(model, wanted=wanted, fills=False)
        init_names = {t.name for t in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in init_names]
        value_inputs = wanted & set(inputs)  # e.g. Resize's scales fed as an input
        outputs = [o.name for o in model.graph.output]
        if not unsupported:
            return Caffe2Rep(model, (init, predict, extra), inputs, outputs)
        if all(RUNTIME_MARK in u for u in unsupported):
            return Caffe2Rep(model, None, inputs, outputs, value_inputs)  # translated at run time, per inputs
        raise unittest.SkipTest(_message(model, [u for u in unsupported if RUNTIME_MARK not in u]))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None, **kwargs: Any) -> tuple:
        """Run one NodeProto on ``inputs`` (a list in the node's input order, or a dict)."""
        from onnx import helper

        names = [n for n in node.input if n]
        if isinstance(inputs, dict):
            arrays = [np.asarray(inputs[n]) for n in names]
        else:
            arrays = [np.asarray(v) for v in inputs]
        vis = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
            for n, a in zip(names, arrays)
        ]
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        opset = kwargs.get("opset_version")
        graph = helper.make_graph([node], "run_node", vis, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] if opset else None)
        return cls.prepare(model, device).run(dict(zip(names, arrays)))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


def outputs_tuple(names: Sequence[str]) -> type:
    """A namedtuple type for run results: fields named after the outputs (``out.Y``; a name that is no
    Python identifier gets a positional field ``_<i>``) and ``out["Y"]`` by output name, as Caffe2's
    ``namedtupledict``."""
    base = namedtuple("Outputs", list(names), rename=True)
    index = {n: i for i, n in enumerate(names)}

    def getitem(self: Any, key: Any) -> Any:
        if isinstance(key, str):
            if key not in index:
                raise KeyError(f"no output named {key!r}; outputs: {', '.join(index)}")
            key = index[key]
        return tuple.__getitem__(self, key)

    return type("Outputs", (base,), {"__getitem__": getitem, "__slots__": ()})


def load_model(model: Any) -> Any:
    """A ModelProto from ``model`` (a ModelProto, a file path, or serialized bytes), checked enough to
    translate: OnnxImportError (naming the source) for bytes that do not parse, a missing or empty
    file, and a model with no graph outputs (an empty model would run and answer nothing)."""
    import onnx

    where = "the model"
    if isinstance(model, (str, bytes, bytearray)):
        where = f"ONNX file {model}" if isinstance(model, str) else f"ONNX model bytes ({len(model)} bytes)"
        try:
            if isinstance(model, str):
                with open(model, "rb") as f:
                    data = f.read()
            else:
                data = bytes(model)
            if not data:
                raise OnnxImportError(f"{where} is empty", [])
            model = onnx.load_from_string(data)
        except OnnxImportError:
            raise
        except OSError as e:
            raise OnnxImportError(f"{where} cannot be read: {e}", []) from e
        except Exception as e:
            raise OnnxImportError(f"{where} is not a valid ONNX model: {type(e).__name__}: {e}", []) from e
    if not isinstance(model, onnx.ModelProto):
        raise OnnxImportError(f"expected an onnx.ModelProto, a path or bytes, got {type(model).__name__}", [])
    if not model.graph.output:
        raise OnnxImportError(f"{where} has no graph outputs (an empty or truncated model?)", [])
    from framework.proto.io import _non_utf8_field

    bad = _non_utf8_field(model)  # the binary parser hands damaged text fields over as bytes
    if bad is not None:
        raise OnnxImportError(f"{where}: field {bad} is not UTF-8 text (a damaged file?)", [bad])
    return model


def _check_inputs(rep: Caffe2Rep, inputs: Any) -> dict:
    """``inputs`` as {name: value}; OnnxImportError for a wrong count, unknown names, or objects that
    are neither arrays, numbers, strings nor sequence/optional values."""
    names = rep.uninitialized
    if isinstance(inputs, dict):
        feeds = dict(inputs)
        known = rep._feedable
        unknown = sorted(str(k) for k in feeds if k not in known and k not in names)
        if unknown:
            raise OnnxImportError(f"inputs {unknown} are not inputs of the model (it takes {names})", unknown)
    elif isinstance(inputs, (list, tuple)):
        if len(inputs) > len(names):
            raise OnnxImportError(f"{len(inputs)} inputs given, the model takes {len(names)}: {names}", [])
        feeds = dict(zip(names, inputs))
    else:
        if not names:
            raise OnnxImportError("an input given, the model takes none", [])
        feeds = {names[0]: inputs}
    for k, v in feeds.items():
        if rep._kinds.get(k, "tensor") != "tensor" or isinstance(v, (TensorSequence, OptionalValue)):
            continue
        try:
            a = np.asarray(v)
        except Exception as e:
            raise OnnxImportError(f"input '{k}' is not an array: {type(e).__name__}: {e}", [k]) from e
        if a.dtype == object and not all(isinstance(x, (str, bytes)) for x in a.reshape(-1)):
            kinds = sorted({type(x).__name__ for x in a.reshape(-1) if not isinstance(x, (str, bytes))})
            raise OnnxImportError(f"input '{k}' holds {', '.join(kinds)} objects, not numbers or strings", [k])
    return feeds


def _put_values(ws: Workspace, values: dict[str, Any]) -> None:
    """``values`` into blobs of ``ws``. A numeric array that owns its memory (made by this translation)
    is shared, not copied, unless another name holds the same array; anything else (a read-only view
    of an initializer's bytes, a view, strings) is copied once by ``feed_blob``."""
    shared: list[np.ndarray] = []
    for name, value in values.items():
        if (
            isinstance(value, np.ndarray)
            and value.base is None
            and value.flags.writeable
            and value.flags.c_contiguous
            and value.dtype.kind in "biuf"
            and value.dtype.isnative
            and not any(value is s for s in shared)
        ):
            shared.append(value)
            ws.create_blob(name).get_mutable(Tensor).share_external(value)
        else:
            ws.feed_blob(name, value)


def _declared_dims(model: Any) -> list[tuple[str, tuple]]:
    """(input name, dims with None where not static) of each tensor input declaring a shape: read once per
    rep, as reading protobuf fields costs tens of microseconds a run."""
    out = []
    for vi in model.graph.input:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        out.append((vi.name, tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)))
    return out


def _matches_declared(declared: list[tuple[str, tuple]], feeds: dict[str, np.ndarray]) -> bool:
    """The fed inputs have the declared static dims (the translation for the declared shapes holds)."""
    for name, dims in declared:
        v = feeds.get(name)
        if not isinstance(v, np.ndarray):
            continue
        if len(dims) != v.ndim or any(d is not None and d != n for d, n in zip(dims, v.shape)):
            return False
    return True


def _onnx_value(v: Any) -> Any:
    """Our string tensors hold UTF-8 bytes; ONNX's hold str: decode at the boundary."""
    if isinstance(v, np.ndarray) and v.dtype == object:
        return np.array([x.decode("utf-8") if isinstance(x, bytes) else x for x in v.reshape(-1)], object).reshape(
            v.shape
        )
    return v


def _input_kinds(model: Any) -> dict[str, str]:
    """Graph input -> "tensor", "sequence" or "optional" (its declared type)."""
    out = {}
    for vi in model.graph.input:
        which = vi.type.WhichOneof("value") if vi.HasField("type") else None
        out[vi.name] = {"sequence_type": "sequence", "optional_type": "optional"}.get(which or "", "tensor")
    return out


def _translate(model: Any) -> tuple:
    return onnx_graph_to_nets(model)


def _message(model: Any, unsupported: Sequence[str]) -> str:
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    return f"framework's ONNX backend cannot run {len(unsupported)} node(s) (opsets {opsets}):\n  " + "\n  ".join(
        unsupported
    )


prepare = Caffe2Backend.prepare
prepare_zip_archive = Caffe2Backend.prepare_zip_archive
run_model = Caffe2Backend.run_model
run_node = Caffe2Backend.run_node
supports_device = Caffe2Backend.supports_device
