"""The net layer hands its services down (framework/runtime/services.py): a Workspace runs nets without its
user importing the net layer, and a service nobody provides is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from framework.errors import NetError
from framework.runtime.services import NET, Services


def test_a_workspace_imported_alone_creates_and_runs_nets():
    probe = (
        "import sys, json\n"
        "from framework.memory.workspace import Workspace\n"
        "from framework.proto.framework_pb2 import NetDef, OperatorDef\n"
        "before = 'framework.net' in sys.modules\n"
        "ws = Workspace()\n"
        "ws.feed_blob('x', [1.0, -2.0, 3.0])\n"
        "net = NetDef(name='n', op=[OperatorDef(type='Relu', input=['x'], output=['y'])], external_input=['x'])\n"
        "ws.create_net(net)\n"
        "ws.run_net('n')\n"
        "ws.run_operator_once(OperatorDef(type='Scale', input=['y'], output=['z'], arg=[]))\n"
        "print(json.dumps([before, 'framework.net' in sys.modules, ws.fetch_blob('y').tolist(),\n"
        "                  ws.fetch_blob('z').tolist(), ws.nets()]))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    before, after, y, z, nets = json.loads(out.stdout.strip().splitlines()[-1])
    assert (before, after) == (False, True)
    assert y == [1.0, 0.0, 3.0] and z == [1.0, 0.0, 3.0] and nets == ["n"]


def test_the_net_layer_provides_every_service_the_lower_layers_ask_for():
    import framework.net  # noqa: F401

    wanted = {"create_net", "run_net_once", "run_operator_once", "run_plan", "infer_shapes_and_types"}
    wanted |= {"benchmark_net", "create_subnet", "compile_subnet", "bind_subnet", "backward_pass"}
    assert wanted <= set(NET.provided())


def test_a_service_not_provided_names_itself_and_the_layer():
    loads = []
    services = Services("net")
    services.set_loader(lambda: loads.append(1))
    services.provide(run_plan=print)
    assert services.get("run_plan") is print and loads == []
    with pytest.raises(NetError, match=r"'create_net' is provided by the net layer.*run_plan"):
        services.get("create_net")
    assert loads == [1]  # the loader was asked once before failing


def test_a_loader_that_provides_is_called_on_first_use_only():
    services = Services("net")
    services.set_loader(lambda: services.provide(create_net=len))
    assert services.get("create_net") is len
    services.set_loader(lambda: pytest.fail("loaded twice"))
    assert services.get("create_net") is len


def test_a_child_workspace_runs_nets_and_plans_through_the_same_services():
    from framework.memory.workspace import Workspace
    from framework.proto.framework_pb2 import ExecutionStep, NetDef, OperatorDef, PlanDef

    parent = Workspace()
    parent.feed_blob("x", [-1.0, 2.0])
    child = Workspace(parent=parent, name="child")
    net = NetDef(name="n", op=[OperatorDef(type="Relu", input=["x"], output=["y"])])
    child.run_net_once(net)
    assert child.fetch_blob("y").tolist() == [0.0, 2.0] and not parent.has_blob("y")
    child.create_net(net)
    plan = PlanDef(name="p", network=[net], execution_step=[ExecutionStep(name="s", network=["n"], num_iter=2)])
    child.run_plan(plan)
    assert child.fetch_blob("y").tolist() == [0.0, 2.0]
