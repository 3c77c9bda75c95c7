"""caffe2.python.lazy / lazy_dyndep: libraries registered now are handed to dyndep at the first trigger."""

from __future__ import annotations

import pytest

import framework.caffe2 as hook

hook.install()

from caffe2.python import core, lazy, lazy_dyndep, workspace  # noqa: E402


@pytest.fixture(autouse=True)
def _no_handler():
    yield
    lazy_dyndep.SetErrorHandler(None)
    lazy_dyndep._LAZY_IMPORTED_DYNDEPS.clear()


def test_trigger_runs_registered_callables_each_time():
    calls = []
    lazy.RegisterLazyImport(lambda: calls.append(1))
    lazy.TriggerLazyImport()
    core.RefreshRegisteredOperators()
    core.RefreshRegisteredOperators(trigger_lazy=False)
    assert calls == [1, 1]


def test_existing_library_is_refused_at_the_trigger_through_the_handler(tmp_path):
    lib = tmp_path / "ops.so"
    lib.write_bytes(b"\x7fELF not really")
    lazy_dyndep.RegisterOpsLibrary(str(lib))
    seen = []
    lazy_dyndep.SetErrorHandler(lambda e: seen.append(e))
    core.RefreshRegisteredOperators()
    assert len(seen) == 1 and "never loads native code" in str(seen[0])
    core.RefreshRegisteredOperators()  # handed over once, then forgotten
    assert len(seen) == 1


def test_handler_error_propagates_from_create_net(tmp_path):
    lib = tmp_path / "ops.so"
    lib.write_bytes(b"")
    lazy_dyndep.RegisterOpsLibrary(str(lib))

    def handler(e):
        raise ValueError("from handler")

    lazy_dyndep.SetErrorHandler(handler)
    with pytest.raises(ValueError, match="from handler"):
        workspace.CreateNet(core.Net("lazy_net_unused"))


def test_missing_path_is_ignored_with_caffe2s_message(capsys):
    lazy_dyndep.RegisterOpsLibrary("/no/such/lib_ops.so")
    assert "Ignoring /no/such/lib_ops.so as it is not a valid file." in capsys.readouterr().out
    lazy_dyndep.SetErrorHandler(lambda e: pytest.fail(f"unexpected {e}"))
    core.RefreshRegisteredOperators()
    assert lazy_dyndep.GetImportedOpsLibraries() == []
