"""Op families load on first use (framework/ops/families.py): ``import framework`` registers no operator and
loads no optional library; a look-up brings in exactly the units (a family, or one module of a family that
lists its ``MODULES``) that register the type, its gradient and its engine variants; a checkpoint's blob
type brings in its deserializer; the generated index is current."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import framework

ROOT = Path(framework.__file__).resolve().parents[1]


def _run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_index_is_current():
    out = subprocess.run(
        [sys.executable, "docs/generate_family_index.py", "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr


def test_import_registers_no_family_and_loads_no_optional_library():
    seen = _run(
        """
        import json, sys
        import framework, framework.core, framework.workspace
        from framework.ops import families, registry
        print(json.dumps({
            "families": [f for f in families.FAMILIES if "framework.ops." + f in sys.modules],
            "schemas": len(registry._SCHEMAS),
            "libs": [m for m in ("ml_dtypes", "scipy", "numba", "onnx", "torch") if m in sys.modules],
        }))
        """
    )
    assert seen == {"families": [], "schemas": 0, "libs": []}


def test_registering_every_family_loads_no_compiler():
    # numba (and llvmlite under it) load when a compiled kernel is first called, never when an op registers
    seen = _run(
        """
        import json, sys
        from framework.ops import families
        families.load_all()
        print(json.dumps([m for m in ("numba", "llvmlite") if m in sys.modules]))
        """
    )
    assert seen == []


def test_an_fc_look_up_loads_only_the_units_naming_fc():
    # nn's fc module registers FC, quantized its engine variants; the other modules of nn stay unloaded
    seen = _run(
        """
        import json, sys
        from framework.ops import families, registry
        registry.get_schema("FC")
        print(json.dumps(sorted(m[len("framework.ops."):] for m in sys.modules if m.startswith("framework.ops.")
                                and m.split(".")[2] in families.FAMILIES)))
        """
    )
    from framework.ops.family_index import OP_MODULES

    assert OP_MODULES["FC"] == ("nn.fc", "quantized")
    assert {"nn", "nn.fc", "quantized"} <= set(seen), seen
    # quantized's SumRelu is built on math's Sum (quantized also imports the nn modules it builds on)
    assert {u.split(".")[0] for u in seen} <= {"nn", "quantized", "math"}, seen


def test_a_relu_and_add_look_up_loads_two_modules():
    seen = _run(
        """
        import json, sys
        from framework.ops import registry
        registry.get_schema("Relu"), registry.get_schema("Add")
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("framework.ops.nn.", "framework.ops.math.")))))
        """
    )
    from framework.ops.family_index import OP_MODULES

    relu, add = OP_MODULES["Relu"], OP_MODULES["Add"]
    assert len(relu) == len(add) == 1 and relu[0].startswith("nn.") and add[0].startswith("math."), (relu, add)
    assert "framework.ops." + relu[0] in seen and "framework.ops." + add[0] in seen, seen
    assert len([m for m in seen if m.startswith("framework.ops.nn.")]) < 8, seen  # nn has 35 op modules


def test_every_op_module_of_a_split_family_is_listed():
    # a module of a family listing its MODULES that registered something but were missing from the list
    # would never load: after every family loads, importing each unlisted module must change no registry
    seen = _run(
        """
        import importlib, json, pkgutil
        from framework.memory import serialize
        from framework.ops import families, registry

        families.load_all()
        before = (dict(registry._SCHEMAS), dict(registry._ENGINE_TYPES), dict(serialize._DESERIALIZERS))
        gradients = {t: s.gradient for t, s in registry._SCHEMAS.items()}
        unlisted = []
        for family in families.FAMILIES:
            package = importlib.import_module("framework.ops." + family)
            listed = getattr(package, "MODULES", None)
            if listed is not None:
                names = [m.name for m in pkgutil.iter_modules(package.__path__)]
                assert all(m in names for m in listed), (family, listed)
                unlisted += ["framework.ops.%s.%s" % (family, m) for m in names if m not in listed]
        for name in unlisted:
            importlib.import_module(name)
        after = (dict(registry._SCHEMAS), dict(registry._ENGINE_TYPES), dict(serialize._DESERIALIZERS))
        same = after == before and all(s.gradient is gradients[t] for t, s in registry._SCHEMAS.items())
        print(json.dumps({"unlisted": len(unlisted), "same": same}))
        """
    )
    assert seen["unlisted"] > 0 and seen["same"], seen


def test_lazy_look_ups_give_what_a_full_load_gives():
    # for types whose gradient or engine variants come from another family than their schema, the lazily
    # loaded schema must already carry what loading everything gives (each type in a fresh process)
    from framework.ops.family_index import OP_MODULES

    spread = sorted(t for t, fs in OP_MODULES.items() if len(fs) > 1)
    assert spread, "the index should name types touched by several families"
    for type_name in spread[:: max(1, len(spread) // 6)]:
        seen = _run(
            f"""
            import json
            from framework.ops import families, registry
            lazy = registry.get_schema({type_name!r})
            grad, engines = lazy.gradient, {{k: v for k, v in registry._ENGINE_TYPES.items() if k[0] == {type_name!r}}}
            families.load_all()
            full = registry.get_schema({type_name!r})
            full_engines = {{k: v for k, v in registry._ENGINE_TYPES.items() if k[0] == {type_name!r}}}
            print(json.dumps({{"same_schema": lazy is full, "same_gradient": grad is full.gradient,
                               "same_engines": engines == full_engines}}))
            """
        )
        assert seen == {"same_schema": True, "same_gradient": True, "same_engines": True}, type_name


def test_unknown_type_suggests_from_every_family():
    seen = _run(
        """
        import json
        from framework.errors import UnknownOperatorError
        from framework.ops import registry
        try:
            registry.get_schema("SparseLengthSum")
        except UnknownOperatorError as e:
            print(json.dumps(str(e)))
        """
    )
    assert "SparseLengthsSum" in seen


def test_checkpoint_blob_type_loads_its_deserializer(tmp_path):
    from framework import Workspace, checkpoint
    from framework.core import CreateOperator

    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateCounter", [], ["c"], init_count=5))
    checkpoint.save(ws, str(tmp_path / "counter.minidb"))
    seen = _run(
        f"""
        import json, sys
        from framework import Workspace, checkpoint
        from framework.core import CreateOperator

        before = "framework.ops.sparse" in sys.modules
        ws = Workspace()
        checkpoint.load(ws, {str(tmp_path / "counter.minidb")!r})
        ws.run_operator_once(CreateOperator("RetrieveCount", ["c"], ["n"]))
        print(json.dumps({{"loaded_before": before, "count": int(ws.fetch_blob("n"))}}))
        """
    )
    assert seen == {"loaded_before": False, "count": 5}
