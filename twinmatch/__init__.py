"""twinmatch: the harness that drives both twins (command line, generators, contracts, reports)."""

from __future__ import annotations

__all__: list[str] = []
