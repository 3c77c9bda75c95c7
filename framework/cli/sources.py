"""What a model path on the command line names, decided once for every command.

A path is one of:

- ``net``: a NetDef file (text or binary);
- ``plan``: a PlanDef file (text or binary): its ``network`` list and ``execution_step`` tree;
- ``onnx``: an ONNX model file, translated to our ops (``framework.onnx.backend``);
- ``pair``: a folder with Caffe2's deployable pair ``init_net.pb`` + ``predict_net.pb`` (parameters in the
  init net, as the model zoo ships them);
- ``model``: a model folder (``init_net.pbtxt`` + ``predict_net.pbtxt``, ``train_net.pbtxt`` for training);
- ``predict``: a folder holding only a predict net (``predict_net.pb`` or ``predict_net.pbtxt``); the
  parameters come from ``--checkpoint`` (or ``--init``).

The data inputs of a predict net are the external inputs that neither its init net nor its checkpoint
creates (:func:`data_inputs`), wherever the net lists them: Caffe2's zoo nets list ``data`` last.

>>> src = open_source("models/mlp_digits")  # doctest: +SKIP
>>> src.kind, src.net.name
('model', 'mlp_digits_predict')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from framework.cli.common import CLIError, read_net, read_onnx

PAIR = ("init_net.pb", "predict_net.pb")
MODEL = ("init_net.pbtxt", "predict_net.pbtxt")
KINDS = ("net", "plan", "onnx", "pair", "model", "predict")


@dataclass
class Source:
    """A model path resolved: ``net`` is the net commands work on (a folder's predict net), ``init`` the
    net creating its parameters (if the path holds one), ``plan`` the PlanDef of a plan file."""

    path: str
    kind: str
    net: Any = None
    init: Any = None
    plan: Any = None
    train: Any = None

    def nets(self) -> list:
        """The nets to inspect: a plan's networks, else the one net."""
        return list(self.plan.network) if self.plan is not None else [self.net]

    @property
    def name(self) -> str:
        return self.plan.name if self.plan is not None else self.net.name


def open_source(path: str, train: bool = False) -> Source:
    """Resolve ``path`` (see the module doc); ``train`` also reads a model folder's ``train_net.pbtxt``.

    Raises CLIError naming the path and what such a path must hold.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return _folder(path, train)
    if not os.path.exists(path):
        raise CLIError(
            f"not found: {path}",
            "pass a NetDef or PlanDef file (.pbtxt/.pb), an .onnx file, or a model folder",
        )
    if path.endswith(".onnx"):
        init, net = read_onnx(path)
        return Source(path, "onnx", net=net, init=init)
    plan = read_plan_if_plan(path)
    if plan is not None:
        return Source(path, "plan", plan=plan)
    return Source(path, "net", net=read_net(path))


def _folder(path: str, train: bool) -> Source:
    has = {f: os.path.isfile(os.path.join(path, f)) for f in (*PAIR, *MODEL, "train_net.pbtxt")}
    if has["predict_net.pbtxt"] and has["init_net.pbtxt"]:
        src = Source(path, "model", net=read_net(os.path.join(path, "predict_net.pbtxt")))
        src.init = read_net(os.path.join(path, "init_net.pbtxt"))
        if train:
            if not has["train_net.pbtxt"]:
                raise CLIError(f"model folder {path} lacks train_net.pbtxt", "a model folder holds " + _model_files())
            src.train = read_net(os.path.join(path, "train_net.pbtxt"))
        return src
    if train:
        missing = [f for f in (*MODEL, "train_net.pbtxt") if not has[f]]
        raise CLIError(f"model folder {path} lacks {', '.join(missing)}", "a model folder holds " + _model_files())
    if has["predict_net.pb"] and has["init_net.pb"]:
        init = read_net(os.path.join(path, "init_net.pb"))
        return Source(path, "pair", net=read_net(os.path.join(path, "predict_net.pb")), init=init)
    for f in ("predict_net.pb", "predict_net.pbtxt"):
        if has[f]:
            return Source(path, "predict", net=read_net(os.path.join(path, f)))
    raise CLIError(
        f"{path} is a folder without a model: no predict_net.pb or predict_net.pbtxt",
        "a model folder holds " + _model_files() + "; a deployable pair folder init_net.pb + predict_net.pb",
    )


def _model_files() -> str:
    return "init_net.pbtxt, train_net.pbtxt, predict_net.pbtxt"


def is_model_path(path: str) -> bool:
    """Whether folder ``path`` holds a model (a pair, a model folder or a predict net), not a DB."""
    return os.path.isdir(path) and any(
        os.path.isfile(os.path.join(path, f)) for f in (*PAIR, *MODEL, "predict_net.pbtxt")
    )


def read_plan_if_plan(path: str) -> Any:
    """The PlanDef in file ``path`` if it holds one (networks or execution steps), else None.

    Text and binary: a text NetDef does not parse as a PlanDef (``op`` is no PlanDef field); a binary NetDef
    may decode as a PlanDef only with unknown fields or without any execution step, both refused here.
    """
    from framework.errors import ProtoParseError
    from framework.proto.io import read_plan

    if not os.path.isfile(path):
        return None
    try:
        plan = read_plan(path)
    except ProtoParseError:
        return None
    if not len(plan.execution_step) or not all(len(n.op) and all(op.type for op in n.op) for n in plan.network):
        return None
    known = {n.name for n in plan.network}
    if not all(name in known for step in plan.execution_step for name in _step_nets(step)):
        return None
    return plan


def _step_nets(step: Any) -> list[str]:
    names = list(step.network)
    for sub in step.substep:
        names += _step_nets(sub)
    return names


def data_inputs(net: Any, has_blob: Any) -> list[str]:
    """The data inputs of ``net``, in its order: the external inputs that ``has_blob(name)`` says are not
    there yet (Caffe2's zoo nets list ``data`` after the parameters). When the init net creates every one
    of them, its first external input: Caffe2's exporter puts the data input first and fills it with a
    placeholder (a (1, 1) zero tensor) that feeding replaces."""
    missing = [b for b in net.external_input if not has_blob(b)]
    if missing or not len(net.external_input):
        return missing
    return [net.external_input[0]]


def need_net(src: Source, command: str) -> Any:
    """``src.net``, or CLIError for a plan (a command that works on one net)."""
    if src.plan is not None:
        raise CLIError(
            f"{command} works on one net; {src.path} is a plan with nets {', '.join(n.name for n in src.plan.network)}",
            "run plans with `framework run PLAN`; inspect, summary, draw and profile take them too",
        )
    return src.net
