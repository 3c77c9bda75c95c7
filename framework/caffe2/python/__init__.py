"""Caffe2's Python API (``caffe2.python``), grouped as Caffe2 grouped it.

The import hook (``framework.caffe2``) maps ``caffe2.python.X`` here first, then to ``framework.X``
for the modules that still live at the top level. Modules here may import the engine layers
(``framework.memory``, ``framework.ops``, ``framework.net`` ...) and each other, never the CLI.
"""
