"""``python -m real``: see :mod:`real.cli`."""
import sys

from real.cli import main

sys.exit(main())
