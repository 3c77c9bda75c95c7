"""The model zoo's protobuf text is what models/generate.py writes, and every net compiles."""

import importlib.util
import os

import pytest

from framework.net.graph import compile_graph
from framework.proto.io import read_net

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _generator():
    spec = importlib.util.spec_from_file_location("models_generate", os.path.join(ROOT, "models", "generate.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # our own generator script, part of the repository
    return mod


GEN = _generator()


@pytest.mark.parametrize("name", sorted(GEN.ALL))
def test_model_files_are_current(name):
    for fname, text in GEN.render(name).items():
        path = os.path.join(ROOT, "models", name, fname)
        with open(path) as f:
            assert f.read() == text, f"{path} is stale: run `python models/generate.py`"


@pytest.mark.parametrize("name", sorted(GEN.ALL))
def test_model_nets_compile(name):
    folder = os.path.join(ROOT, "models", name)
    assert os.path.exists(os.path.join(folder, "README.md"))
    init = read_net(os.path.join(folder, "init_net.pbtxt"))
    produced = {o for op in init.op for o in op.output}
    compile_graph(read_net(os.path.join(folder, "train_net.pbtxt")), has_blob=lambda b: b in produced)
    predict = read_net(os.path.join(folder, "predict_net.pbtxt"))
    compile_graph(predict)
    assert predict.external_input[0] == "data" and predict.external_output[0] == "softmax"
