"""``Net``: a NetDef under construction (Caffe2's ``core.Net``).

``net.add_op("FC", [x, w, b], "y", axis=1)`` appends an op through the op
registry; ``net.FC([x, w, b], "y", axis=1)`` is sugar for it (unknown types
raise with "did you mean"). Every op added here records where it was created
(file:line stack) in ``OperatorDef.debug_info``, which run errors show. Net
names are made unique per process (``name``, ``name_1``...), as in Caffe2.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import Any, Iterable

from framework.caffe2.python.builder.blob_reference import (
    BlobReference,
    ScopedBlobReference,
    UnknownOperatorAttributeError,
    as_list,
    op_method,
)
from framework.caffe2.python.builder.clone import clone_net_def, partial_net_def
from framework.caffe2.python.builder.net_internals import NetInternals
from framework.caffe2.python.builder.records import NetRecords
from framework.caffe2.python.scope import ScopedName
from framework.errors import ModelError, NetError
from framework.net.graph import format_ops
from framework.ops.gradient import GradientSlice
from framework.ops.registry import has_op, unknown_message
from framework.proto.framework_pb2 import NetDef

__all__ = ["Net"]

_STACK_DEPTH = 8  # innermost caller frames kept in debug_info
_BUILDER_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_DIR = os.path.dirname(_BUILDER_DIR) + os.sep


def _creation_site() -> str:
    """The innermost caller frames outside the framework package (brew, model_helper, the
    builders...), as traceback lines; frames outside the builders if all are inside the package."""
    frames = [f for f in traceback.extract_stack()[:-1] if os.path.dirname(os.path.abspath(f.filename)) != _BUILDER_DIR]
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list((user or frames)[-_STACK_DEPTH:])).rstrip()


_names_lock = threading.Lock()
_net_names: dict[str, int] = {}


def _unique_net_name(name: str) -> str:
    """``name``, or ``name_<k>`` if a Net of that name was already built in this process (Caffe2)."""
    with _names_lock:
        k = _net_names.get(name)
        if k is None:
            _net_names[name] = 0
            return name
        while True:
            k += 1
            cand = f"{name}_{k}"
            if cand not in _net_names:
                _net_names[name] = k
                _net_names[cand] = 0
                return cand


def _run_if_immediate(ops: Iterable[Any]) -> None:
    """Run ``ops`` in Caffe2's immediate workspace when immediate mode is on (``workspace.StartImmediate``)."""
    ws = sys.modules.get("framework.workspace")
    if ws is not None and ws.IsImmediate():
        for op in ops:
            ws.RunOperatorImmediate(op)


def _next_autogen_index(net: NetDef) -> int:
    """One past the largest ``<net name>_blob_<k>`` an op of ``net`` names (Caffe2 reads the first digit
    of k only; the whole number is read here, so that NextBlob never repeats a name)."""
    prefix = net.name + "_blob_"
    found = [-1]
    for op in net.op:
        for b in list(op.input) + list(op.output):
            if b.startswith(prefix) and b[len(prefix) :].isdigit():
                found.append(int(b[len(prefix) :]))
    return max(found) + 1


class Net(NetRecords, NetInternals):
    """A NetDef under construction; see module doc."""

    def __init__(self, name_or_proto: Any, inplace: bool = False) -> None:
        if isinstance(name_or_proto, NetDef):
            proto = name_or_proto
            if inplace:
                self._net = proto
            else:
                self._net = NetDef()
                self._net.CopyFrom(proto)
        elif isinstance(name_or_proto, Net):
            self._net = NetDef()
            self._net.CopyFrom(name_or_proto.Proto())
        else:
            self._net = NetDef(name=_unique_net_name(str(name_or_proto)))
        self._next_name_index = _next_autogen_index(self._net)
        self._registered_blob_names: set[str] = set()
        if isinstance(name_or_proto, (NetDef, Net)):
            # as Caffe2: a net made from another gets a name not used yet in this process (``char_rnn`` ->
            # ``char_rnn_1``), so that creating it in a workspace never replaces the source net
            self._net.name = _unique_net_name(self._net.name)
        self._attr_dict: dict[str, list[Any]] = {}
        self._defined: set[str] = set(self._net.external_input)
        self._used: set[str] = set(self._net.external_input)
        for op in self._net.op:
            self._defined.update(op.output)
            self._used.update(op.input)
            self._used.update(op.output)

    # -- identity -------------------------------------------------------------
    def Name(self) -> str:
        return self._net.name

    def Proto(self) -> NetDef:
        return self._net

    def __str__(self) -> str:
        """The net's name, as Caffe2 (programs pass ``str(net)`` where a net name is expected,
        e.g. ``workspace.RunNet(str(net))``); ``listing()`` prints the ops."""
        return self._net.name

    def listing(self) -> str:
        """The net's ops, one per line (``y = Relu(x)``)."""
        return format_ops(self._net.op)

    def __repr__(self) -> str:
        return f"<Net '{self.Name()}': {len(self._net.op)} ops>"

    # -- attributes (Caffe2's net attributes: user objects, e.g. net_builder's setup builders) --
    def add_attribute(self, name: str, obj: Any) -> None:
        """Add ``obj`` to this net's attributes under ``name`` (no meaning here; ``framework.caffe2.python.task``
        collects ``Task.TASK_SETUP``, ``TASK_INSTANCE_SETUP``, ``REPORT_STEP`` and
        ``TaskGroup.LOCAL_SETUP`` objects from the nets of a task's step)."""
        self._attr_dict.setdefault(name, []).append(obj)

    def get_attributes(self, name: str) -> list[Any]:
        """The objects added under ``name`` with ``add_attribute``, in order."""
        return list(self._attr_dict.get(name, []))

    # -- blob names -------------------------------------------------------------
    def BlobIsDefined(self, blob: Any) -> bool:
        """True if ``blob`` is an external input or written by an op of this net."""
        return str(blob) in self._defined

    def GetBlobRef(self, blob_name: Any) -> Any:
        """A BlobReference to ``blob_name``, which this net must define (KeyError otherwise, as Caffe2)."""
        blob_name = str(blob_name)
        if not self.BlobIsDefined(blob_name):
            raise KeyError(f"Net does not define blob {blob_name}")
        from framework.caffe2.python.builder.blob_reference import BlobReference

        return BlobReference(blob_name, self)

    def UsesBlob(self, blob: Any) -> bool:
        """True if any op reads or writes ``blob``, or it is an external input."""
        return str(blob) in self._used

    def UsedBlobNames(self) -> set[str]:
        """Names of every blob an op of the net reads or writes, and the external inputs (Caffe2)."""
        return set(self._used)

    def Const(self, array: Any, blob_out: Any = None, dtype: Any = None) -> BlobReference:
        """A constant blob: ConstantFill for a bool, else GivenTensor{,Int,Int64,String,Bool}Fill (Caffe2)."""
        import numpy as np

        if isinstance(array, bool):
            from framework.proto.framework_pb2 import TensorProto

            return self.ConstantFill([], blob_out or 1, dtype=TensorProto.BOOL, value=array)
        arr = np.array(array) if dtype is None else np.array(array, dtype=dtype)
        fill = {
            np.dtype(np.int32): "GivenTensorIntFill",
            np.dtype(np.int64): "GivenTensorInt64Fill",
            np.dtype(np.bool_): "GivenTensorBoolFill",
        }.get(arr.dtype, "GivenTensorFill")
        if arr.dtype.kind in "SUO":
            fill = "GivenTensorStringFill"
        values = [v.encode() if isinstance(v, str) else v for v in arr.flatten().tolist()]
        return getattr(self, fill)([], blob_out or 1, shape=list(arr.shape), values=values)

    def LogInfo(self, *msg_or_blobs: Any) -> None:
        """Print each argument when the net runs (a Print op): a BlobReference as it is, anything else as
        a scalar string blob holding its text (Caffe2)."""
        for item in msg_or_blobs:
            blob = item
            if not isinstance(item, BlobReference):
                blob = self.GivenTensorStringFill([], self.NextName("log"), shape=[], values=[str(item).encode()])
            self.Print(blob, [])

    def GetUsedBlobs(self) -> list[str]:
        return sorted(self._used)

    def NextName(self, prefix: str | None = None, output_id: int | None = None) -> str:
        """A blob name not yet used in this net (``<net>/<prefix>[:k]`` or ``<net>_blob_<i>``)."""
        if prefix:
            base = f"{self._net.name}/{prefix}"
            name, index = base, 2
            suffix = "" if output_id is None else f":{output_id}"
            while self.UsesBlob(ScopedName(name + suffix)):
                name = f"{base}_{index}"
                index += 1
            return name + suffix
        while True:
            name = f"{self._net.name}_blob_{self._next_name_index}"
            self._next_name_index += 1
            if not self.UsesBlob(ScopedName(name)):
                return name

    def NextBlob(self, prefix: str = "unnamed") -> BlobReference:
        """A BlobReference named ``prefix`` as given, or ``prefix_auto_<i>`` if the net uses that name or an
        earlier call returned it (so two calls never return the same name, as in Caffe2)."""
        name = str(prefix)
        k = 0
        out = name
        while self.UsesBlob(out) or out in self._registered_blob_names:
            out = f"{name}_auto_{k}"
            k += 1
        self._registered_blob_names.add(out)
        return BlobReference(out, self)

    def NextScopedBlob(self, prefix: str = "unnamed") -> BlobReference:
        """``NextBlob`` of ``prefix`` under the current NameScope."""
        return self.NextBlob(ScopedName(prefix))

    def _note_op(self, op: Any) -> None:
        self._used.update(op.input)
        self._used.update(op.output)
        self._defined.update(op.output)

    # -- external inputs and outputs --------------------------------------------
    def AddExternalInput(self, *inputs: Any) -> Any:
        """Declare external inputs; returns the BlobReference (or a list of them)."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        refs = []
        for x in inputs:
            name = str(x)  # as Caffe2: the name as given, not scoped (AddScopedExternalInputs scopes)
            if name in self._net.external_input:
                raise NetError(f"net '{self.Name()}' already has an external input named '{name}'")
            self._net.external_input.append(name)
            self._defined.add(name)
            self._used.add(name)
            refs.append(BlobReference(name, self))
        return refs[0] if len(refs) == 1 else refs

    def AddExternalInputs(self, *inputs: Any) -> Any:
        return self.AddExternalInput(*inputs)

    def AddScopedExternalInputs(self, *inputs: Any) -> list:
        """External inputs named in the current name scope; always a list of BlobReferences."""
        refs = self.AddExternalInput(*[BlobReference(ScopedName(str(x)), self) for x in inputs])
        return refs if isinstance(refs, list) else [refs]

    def AddExternalOutput(self, *outputs: Any) -> Any:
        """Declare external outputs; each must be produced by an op or be an external input."""
        if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)):
            outputs = tuple(outputs[0])
        refs = []
        for x in outputs:
            name = str(x)
            if not self.BlobIsDefined(name):
                raise NetError(
                    f"net '{self.Name()}': external output '{name}' is not produced by any op "
                    "and is not an external input"
                )
            if name not in self._net.external_output:
                self._net.external_output.append(name)
            refs.append(BlobReference(name, self))
        return refs[0] if len(refs) == 1 else refs

    def AddExternalOutputs(self, *outputs: Any) -> Any:
        return self.AddExternalOutput(*outputs)

    # -- adding ops ------------------------------------------------------------------
    def add_op(self, op_type: str, inputs: Any = None, outputs: Any = None, **kwargs: Any) -> Any:
        """Append a ``op_type`` op; returns its output BlobReference (or a tuple of them).

        ``outputs`` may be None (one fresh name), an int (that many fresh
        names) or names. Inputs the net does not define become external
        inputs. Unknown op types raise UnknownOperatorError with suggestions.
        """
        if not has_op(op_type):
            raise UnknownOperatorAttributeError(unknown_message(op_type))
        ins = [x if isinstance(x, BlobReference) else ScopedBlobReference(x, self) for x in as_list(inputs)]
        if outputs is None:
            outs = [ScopedBlobReference(self.NextName(prefix=op_type), self)]
        elif isinstance(outputs, int) and not isinstance(outputs, bool):
            outs = [ScopedBlobReference(self.NextName(prefix=op_type, output_id=i), self) for i in range(outputs)]
        else:
            outs = [x if isinstance(x, BlobReference) else ScopedBlobReference(x, self) for x in as_list(outputs)]
        for x in ins:
            if not self.BlobIsDefined(x):
                self._net.external_input.append(str(x))
                self._defined.add(str(x))
        from framework.core import CreateOperator  # core imports this module

        kwargs.setdefault("debug_info", _creation_site())
        op = CreateOperator(op_type, ins, outs, **kwargs)
        self._net.op.append(op)
        self._used.update(op.input)
        self._used.update(op.output)
        self._defined.update(op.output)
        refs = tuple(BlobReference(o, self) for o in op.output)
        return refs[0] if len(refs) == 1 else refs

    _CreateAndAddToSelf = add_op

    def Python(
        self, f: Any, grad_f: Any = None, python_func_type: Any = None, pass_workspace: bool = False,
        grad_output_indices: Any = None, grad_input_indices: Any = None,
    ) -> Any:  # fmt: skip
        """Caffe2's ``net.Python(f)(inputs, outputs, **kwargs)``: a function adding a ``Python`` op
        that calls ``f(inputs, outputs)`` (a callable, or a ``(func, args, kwargs)`` builder whose
        ``func(*args, **kwargs)`` each operator instance calls once); functions are registered in
        this process (framework.ops.tensor.python_op), never pickled into the net."""
        from framework.ops.tensor.python_op import register_python_function

        if python_func_type is not None and not callable(f) and not isinstance(f, tuple):
            f = python_func_type(f)
        token = register_python_function(f, grad_f, pass_workspace)
        extra = {"token": token, "grad_output_indices": list(grad_output_indices or []),
                 "grad_input_indices": list(grad_input_indices or [])}  # fmt: skip
        return lambda *args, **kwargs: self.add_op("Python", *args, **{**kwargs, **extra})

    def __getattr__(self, op_type: str) -> Any:
        return op_method(op_type, self.add_op)

    def AppendNet(self, net: Any) -> Net:
        """Append ``net``'s ops, external inputs (not defined here) and external outputs."""
        proto = net.Proto() if hasattr(net, "Proto") else net
        for x in proto.external_input:
            if not self.BlobIsDefined(x):
                self._net.external_input.append(x)
                self._defined.add(x)
                self._used.add(x)
        for op in proto.op:
            self._net.op.add().CopyFrom(op)
            self._used.update(op.input)
            self._used.update(op.output)
            self._defined.update(op.output)
        for x in proto.external_output:
            if x not in self._net.external_output:
                self._net.external_output.append(x)
        return self

    # -- whole-net edits -------------------------------------------------------------------
    def set_rand_seed(self, seed: int = 100, sequence_seed: bool = True, seed_on_op_def: bool = False) -> None:
        """Give every op a random seed (``seed + i`` with ``sequence_seed``, else ``seed``)."""
        for i, op in enumerate(self._net.op):
            s = seed + i if sequence_seed else seed
            op.device_option.random_seed = s
            if seed_on_op_def:
                from framework.proto.args import make_argument

                op.arg.append(make_argument("random_seed", s))

    def RunAllOnGPU(self, gpu_id: int = 0, use_cudnn: bool = False) -> None:
        """Tag the net for CUDA device ``gpu_id`` (it runs on the CPU implementation here), as Caffe2 does: the
        net's device option is replaced (ops keep theirs and inherit the net's), every op gets engine CUDNN with
        ``use_cudnn``, and the step nets of RecurrentNetwork ops are tagged the same way."""
        _run_all_on_gpu(self._net, gpu_id, use_cudnn)

    def Clone(
        self,
        name: str,
        blob_remap: dict[str, str] | None = None,
        op_id_mask: Iterable[int] | None = None,
        remap_funcs: Any = None,
        keep_schema: bool = True,
        update_external_list: bool = False,
    ) -> Net:
        """A copy named ``name`` with blobs renamed by ``blob_remap`` and only ops in ``op_id_mask``
        (with ``keep_schema``, its input/output records too, remapped)."""
        new = Net(clone_net_def(self._net, name, blob_remap, op_id_mask, update_external_list))
        if keep_schema:
            self._copy_records_to(new, blob_remap or {})
        new._attr_dict = {k: list(v) for k, v in self._attr_dict.items()}  # Caffe2 keeps attributes
        return new

    def ClonePartial(
        self, name: str, inputs: Any, outputs: Iterable[Any], remap_funcs: Any = None
    ) -> tuple[Net, list[BlobReference]]:
        """Caffe2's partial clone: the ops computing ``outputs`` from ``inputs`` (walked back from the
        outputs, stopping at the inputs), as net ``name``. ``inputs`` is a list of blobs or a mapping
        (dict or pairs) old -> new name; the clone reads the new names, other blobs it defines get the
        prefix ``name/``, blobs it reads but nobody defines keep their names and become external
        inputs. Returns ``(net, [output BlobReferences])``."""
        if isinstance(inputs, dict):
            mapping = {str(k): str(v) for k, v in inputs.items()}
        elif isinstance(inputs, list) and inputs and all(isinstance(i, tuple) and len(i) == 2 for i in inputs):
            mapping = {str(k): str(v) for k, v in inputs}
        else:
            mapping = {str(i): str(i) for i in inputs}
        out_names = [str(o) for o in outputs]
        self._check_independent_inputs(list(mapping))
        part = partial_net_def(self._net, name, mapping, out_names)
        defined = {o for op in part.op for o in op.output}
        undefined = [b for op in part.op for b in op.input if b not in defined and b not in mapping]
        prefix = f"{name}/" if name else ""
        remap = {
            b: mapping.get(b, b if b in undefined else prefix + b) for op in part.op for b in [*op.input, *op.output]
        }
        new = Net(clone_net_def(part, name, remap, None, False))
        new_in = list(dict.fromkeys([remap.get(k, v) if k in remap else v for k, v in mapping.items()] + undefined))
        new_out = [remap.get(o, prefix + o) for o in out_names]
        del new._net.external_input[:]
        new._net.external_input.extend(new_in)
        del new._net.external_output[:]
        new._net.external_output.extend(new_out)
        new._defined.update(new_in)
        new._used.update(new_in)
        return new, [BlobReference(o, new) for o in new_out]

    def _check_independent_inputs(self, inputs: list[str]) -> None:
        """ModelError (an AssertionError, as Caffe2's) if an input of a partial clone is computed from another."""
        for target in inputs:
            frontier = {target}
            for op in reversed(self._net.op):
                if frontier & set(op.output):
                    if op.is_gradient_op:
                        continue
                    upstream = set(op.input)
                    clash = upstream & (set(inputs) - {target})
                    if clash:
                        raise ModelError(
                            f"net '{self.Name()}': partial clone input '{target}' is computed from input "
                            f"'{sorted(clash)[0]}'; the inputs must not depend on each other"
                        )
                    frontier |= upstream

    def AddGradientOperators(self, ys: Any, skip: int = 0) -> dict[str, Any]:
        """Append the backward pass of ``ys``; {blob: gradient BlobReference or GradientSlice}."""
        from framework.net.backward import add_gradient_operators

        if isinstance(ys, (str, BlobReference)):
            ys = [ys]
        if isinstance(ys, dict):
            ys = {str(k): v for k, v in ys.items()}
        else:
            ys = [str(y) for y in ys]
        before = len(self._net.op)
        grads = add_gradient_operators(self._net, ys, skip)
        _run_if_immediate(self._net.op[before:])  # they bypass CreateOperator, as Caffe2's C++ ones do
        for op in self._net.op:
            self._used.update(op.input)
            self._used.update(op.output)
            self._defined.update(op.output)
        out: dict[str, Any] = {}
        for blob, g in grads.items():
            if isinstance(g, GradientSlice):
                g = GradientSlice(BlobReference(g.indices, self), BlobReference(g.values, self))
            elif g is not None:
                g = BlobReference(g, self)
            out[BlobReference(blob, self)] = g
        return out


def _run_all_on_gpu(net: Any, gpu_id: int, use_cudnn: bool) -> None:
    net.device_option.Clear()
    net.device_option.device_type = 1  # CUDA
    net.device_option.device_id = gpu_id
    for op in net.op:
        if use_cudnn:
            op.engine = "CUDNN"
        if op.type == "RecurrentNetwork":
            for arg in op.arg:
                if arg.name == "step_net" and arg.HasField("n"):
                    _run_all_on_gpu(arg.n, gpu_id, use_cudnn)
