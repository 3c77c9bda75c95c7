"""The Caffe2 API modules the layers API builds on (schema, scope, model_helper, utils, optimizer,
test_util), imported from ``framework.caffe2.python`` where the tree keeps them there and from the
top-level ``framework`` package otherwise, so this package works on either side of that move."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["model_helper", "optimizer", "schema", "scope", "test_util", "utils"]


def _load(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"framework.caffe2.python.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"framework.caffe2.python.{name}":
            raise
        return importlib.import_module(f"framework.{name}")


schema = _load("schema")
scope = _load("scope")
utils = _load("utils")
model_helper = _load("model_helper")
optimizer = _load("optimizer")
test_util = _load("test_util")
