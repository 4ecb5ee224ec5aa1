"""twinmatch: the harness that drives both twins (command line, generators, reports).

Not a twin and not the contract: what both twins share is in ``contract``; the harness
imports ``contract``, ``naive`` and ``optimized``, and none of them imports it.
"""

from __future__ import annotations

__all__: list[str] = []
