"""``framework.workspace`` is ``framework.caffe2.python.workspace`` (the same module object),
kept importable under its short name as an entry point for our users; see docs/architecture.md."""

import sys

import framework.caffe2.python.workspace as _module

sys.modules[__name__] = _module
