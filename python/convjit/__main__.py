"""``python -m convjit ARGS`` is the ``convjit`` command line."""

import sys

from ._cli import main

sys.exit(main())
