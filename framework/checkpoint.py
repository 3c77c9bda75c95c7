"""``framework.checkpoint`` is ``framework.db.checkpoint`` (the same module object),
kept importable under its short name as an entry point for our users; see docs/architecture.md."""

import sys

import framework.db.checkpoint as _module

sys.modules[__name__] = _module
