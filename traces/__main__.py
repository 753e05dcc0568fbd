"""``python -m traces synth|stats|import|capture [key=value ...]`` (see :mod:`traces.cli`)."""
import sys

from traces.cli import main

sys.exit(main())
