"""``python -m twinmatch``: the command line."""

from __future__ import annotations

import sys

from twinmatch.cli import main

sys.exit(main())
