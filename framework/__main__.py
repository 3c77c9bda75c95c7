"""``python -m framework`` is the ``framework`` command."""

import sys

from framework.cli import main

sys.exit(main())
