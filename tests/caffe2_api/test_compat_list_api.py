"""docs/caffe2_compat.md's module table is generated from docs/caffe2_python_modules.tsv and what the import hook
resolves now: this test fails when it is stale (run ``python docs/generate_caffe2_compat.py``)."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("generate_caffe2_compat", ROOT / "docs" / "generate_caffe2_compat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_module_table_is_current():
    gen = _generator()
    current = gen.OUTPUT.read_text(encoding="utf-8")
    assert gen.BEGIN in current and gen.END in current
    assert gen.render(current) == current, "docs/caffe2_compat.md is stale: run python docs/generate_caffe2_compat.py"


def test_module_list_holds_names_only():
    mods = _generator().caffe2_modules()
    assert len(mods) > 200
    for name, trees in mods.items():
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name), name
        assert trees in ("2018", "2020", "2018,2020"), (name, trees)
    assert mods["core"] == "2018,2020" and mods["nomnigraph"] == "2020" and "layers.fc" in mods


def test_status_follows_the_hook():
    gen = _generator()
    assert gen.resolves("workspace") == "framework.caffe2.python.workspace"
    assert gen.resolves("helpers.fc") == "framework.caffe2.python.helpers.fc"
    assert gen.resolves("no_such_module_h36c") is None
    assert gen.out_of_scope("mkl.rewrite_graph") and gen.out_of_scope("trt.transform") and not gen.out_of_scope("core")
    table = gen.render_table()
    assert "| `workspace` | 2018,2020 | yes | `framework.caffe2.python.workspace` |" in table
    assert "| `onnx.onnxifi` | 2020 | out of scope | native code (ONNXIFI loads a C backend library) |" in table
