"""``python -m bench.real_models``: the real-model suite (see bench/real_models/runner.py)."""

import sys

from bench.real_models.runner import main

sys.exit(main())
