"""``python -m framework.caffe2 script.py [args]``: run a Caffe2 script unchanged (see
``framework.caffe2``); ``python -m framework.caffe2 -m package.module [args]`` runs a module."""

import sys

from framework.caffe2.runner import main

sys.exit(main(sys.argv[1:]))
