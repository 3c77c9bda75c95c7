"""``caffe2.python.models.download``: Caffe2's pretrained-model store (``ModelDownloader``).

A model ``name`` lives in the folder ``$<model_env_name>/<name>`` (default ``$CAFFE2_MODELS``, else
``$CAFFE2_HOME/models``, else ``~/.caffe2/models``) as ``predict_net.pb``, ``init_net.pb`` (binary NetDefs)
and ``value_info.json`` (input name -> [ONNX element type, shape]), Caffe2's layout.
``get_c2_model(name)`` returns ``(init_net, predict_net, value_info)`` with the nets named ``name_init`` and
``name``; ``get_c2_model_dbg`` also returns a text of the paths read.

Departure: Caffe2 downloaded a missing model from its server. This framework fetches nothing over the
network: a model that is not in its folder is a ``ModelNotFoundError`` (a ``FileNotFoundError``) naming the
folder and the three files to put there, and ``downloadFromURLToFile`` always raises it. ``getURLFromName``
still gives Caffe2's address for a file.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from framework.errors import FrameworkError
from framework.proto import framework_pb2 as caffe2_pb2

__all__ = [
    "DOWNLOAD_BASE_URL",
    "ModelDownloader",
    "ModelNotFoundError",
    "deleteDirectory",
    "downloadFromURLToFile",
    "getURLFromName",
    "validModelName",
]

DOWNLOAD_BASE_URL = "https://s3.amazonaws.com/download.caffe2.ai/models/"
_FILES = ("predict_net.pb", "init_net.pb", "value_info.json")


class ModelNotFoundError(FrameworkError, FileNotFoundError):
    """A pretrained model is not in the local model folder (nothing is downloaded)."""


def getURLFromName(name: str, filename: str) -> str:
    return f"{DOWNLOAD_BASE_URL}{name}/{filename}"


def deleteDirectory(top_dir: str) -> None:
    """Remove the folder ``top_dir`` and everything in it (symbolic links are removed, not followed)."""
    import shutil

    shutil.rmtree(top_dir)


def downloadFromURLToFile(url: str, filename: str, show_progress: bool = True) -> None:
    """Caffe2 fetched ``url`` into ``filename`` here; this framework fetches nothing over the network, so
    this always raises ``ModelNotFoundError`` naming the address and the file to put in its place."""
    raise ModelNotFoundError(f"this framework downloads nothing: fetch {url} yourself and save it as {filename}")


def validModelName(name: str) -> bool:
    """Letters, digits, ``_``, ``-`` and ``/`` only, and not ``__init__``."""
    return name != "__init__" and re.match(r"^[/0-9a-zA-Z_-]+$", name) is not None


class ModelDownloader:
    def __init__(self, model_env_name: str = "CAFFE2_MODELS") -> None:
        self.model_env_name = model_env_name

    def _model_dir(self, model: str) -> str:
        home = os.path.expanduser(os.getenv("CAFFE2_HOME", "~/.caffe2"))
        return os.path.join(os.getenv(self.model_env_name, os.path.join(home, "models")), model)

    def _check_present(self, model: str) -> str:
        folder = self._model_dir(model)
        missing = [f for f in _FILES if not os.path.isfile(os.path.join(folder, f))]
        if not validModelName(model):
            raise ModelNotFoundError(f"'{model}' is not a valid model name")
        if missing:
            raise ModelNotFoundError(
                f"pretrained model '{model}' is not in {folder} (missing {', '.join(missing)}); this framework "
                f"downloads nothing: put {', '.join(_FILES)} there (Caffe2 served them at {DOWNLOAD_BASE_URL}{model}/)"
            )
        return folder

    def get_c2_model_dbg(self, model_name: str) -> tuple[Any, Any, dict, str]:
        folder = self._check_present(model_name)
        debug = "get_c2_model debug:\n"
        nets = []
        for kind, name in (("predict", model_name), ("init", model_name + "_init")):
            path = os.path.join(folder, f"{kind}_net.pb")
            net = caffe2_pb2.NetDef()
            with open(path, "rb") as f:
                n_read = net.ParseFromString(f.read())
            net.name = name
            debug += f"c2_{kind}_pb path: {path}\nc2_{kind}_pb ParseFromString = {n_read}\n"
            nets.append(net)
        with open(os.path.join(folder, "value_info.json")) as f:
            value_info = json.load(f)
        predict_net, init_net = nets
        return init_net, predict_net, value_info, debug

    def get_c2_model(self, model_name: str) -> tuple[Any, Any, dict]:
        init_net, predict_net, value_info, _ = self.get_c2_model_dbg(model_name)
        return init_net, predict_net, value_info
