"""framework.caffe2: caffe2.python.* / caffe2.proto.* resolve to framework modules."""

import os
import subprocess
import sys
import textwrap

import pytest

import framework
import framework.caffe2 as hook

ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


@pytest.fixture
def installed():
    hook.install()
    yield
    hook.uninstall()


def test_names_map_generically(installed):
    from caffe2.proto import caffe2_pb2
    from caffe2.python import brew, core, model_helper, workspace
    from caffe2.python.predictor import mobile_exporter

    import framework.caffe2.python.brew
    import framework.caffe2.python.model_helper
    import framework.core
    import framework.predictor.mobile_exporter
    import framework.proto.caffe2_pb2
    import framework.workspace

    assert core is framework.core and workspace is framework.workspace and brew is framework.caffe2.python.brew
    assert model_helper is framework.caffe2.python.model_helper and caffe2_pb2 is framework.proto.caffe2_pb2
    assert mobile_exporter is framework.predictor.mobile_exporter
    assert framework.core.__spec__.name == "framework.caffe2.python.core"  # the shared module keeps its own spec
    import caffe2.python._import_c_extension as C

    assert C is framework.workspace.C
    assert hook.target_of("caffe2.python.some.new_module") == "framework.some.new_module"
    assert hook.target_of("caffe2.proto.metanet_pb2") == "framework.proto.metanet_pb2"


def test_api_package_is_searched_first(installed, tmp_path, monkeypatch):
    import framework.caffe2.python as api

    (tmp_path / "probe_mod.py").write_text("VALUE = 7\n")
    (tmp_path / "probe_pkg").mkdir()
    (tmp_path / "probe_pkg" / "__init__.py").write_text("")
    (tmp_path / "probe_pkg" / "leaf.py").write_text("VALUE = 8\n")
    monkeypatch.setattr(api, "__path__", [*api.__path__, str(tmp_path)])
    assert hook.target_of("caffe2.python.probe_mod") == "framework.caffe2.python.probe_mod"
    assert hook.target_of("caffe2.python.probe_pkg.leaf") == "framework.caffe2.python.probe_pkg.leaf"
    import caffe2.python.probe_pkg.leaf as leaf
    from caffe2.python import probe_mod

    assert probe_mod.VALUE == 7 and leaf.VALUE == 8
    assert probe_mod is sys.modules["framework.caffe2.python.probe_mod"]
    for name in [n for n in sys.modules if "probe_" in n]:
        del sys.modules[name]


def test_missing_module_is_named(installed):
    with pytest.raises(ModuleNotFoundError, match=r"caffe2.python.no_such_thing.*framework.no_such_thing"):
        import caffe2.python.no_such_thing  # noqa: F401


def test_uninstall_forgets_the_names():
    hook.install()
    import caffe2.python.core  # noqa: F401

    hook.uninstall()
    assert not hook.installed() and not any(n == "caffe2" or n.startswith("caffe2.") for n in sys.modules)


def test_no_top_level_caffe2_package():
    r = subprocess.run([sys.executable, "-c", "import caffe2"], capture_output=True, text=True, env=ENV)
    assert r.returncode != 0 and "No module named 'caffe2'" in r.stderr


SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from caffe2.python import core, workspace
    from caffe2.proto import caffe2_pb2
    workspace.FeedBlob("x", np.array([-1.0, 2.0], dtype=np.float32))
    workspace.RunOperatorOnce(core.CreateOperator("Relu", ["x"], ["y"]))
    print("argv", sys.argv[1:], "y", workspace.FetchBlob("y").tolist(), __name__)
    if "--fail" in sys.argv:
        raise SystemExit(3)
    """
)


@pytest.mark.parametrize("how", ["module", "exec"])
def test_run_a_script_unchanged(tmp_path, how):
    script = tmp_path / "c2_script.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "framework.caffe2"] if how == "module" else [sys.executable, "-m", "framework", "exec"]
    r = subprocess.run([*cmd, str(script), "a", "--debug"], capture_output=True, text=True, env=ENV, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "argv ['a', '--debug'] y [0.0, 2.0] __main__" in r.stdout
    r = subprocess.run([*cmd, str(script), "--fail"], capture_output=True, text=True, env=ENV, cwd=tmp_path)
    assert r.returncode == 3


def test_missing_script_is_a_clear_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "framework.caffe2", str(tmp_path / "nope.py")], capture_output=True, text=True, env=ENV
    )
    assert r.returncode == 2 and "no script" in r.stderr


def test_install_in_a_notebook_shares_state(installed):
    from caffe2.python import workspace

    workspace.ResetWorkspace()
    workspace.FeedBlob("shared", [1.0])
    assert framework.workspace.HasBlob("shared")
