"""Benchmark helpers shared by every component's benchmarks.

Sizes: ``TWINMATCH_BENCH_SCALE=small`` (what ``make test`` uses to smoke-run every
benchmark once) or ``full`` (the default, what ``make bench`` measures).
"""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np
import pytest

from twinmatch.flow import cached_order_flow

SMALL = os.environ.get("TWINMATCH_BENCH_SCALE", "full") == "small"


def cached_flow(n: int, seed: int) -> np.ndarray:
    """The realistic stream of ``n`` ops, generated once and kept in out/cache."""
    return cached_order_flow(n, seed)


def machine_info() -> dict[str, Any]:
    """What produced a number: recorded in every benchmark's extra_info."""
    try:
        from optimized import _native

        compiler = f"{_native.COMPILER} ({_native.BUILD_TYPE}, -O3)"
    except ImportError:  # pragma: no cover - the extension is part of the install
        compiler = "unavailable"
    return {"compiler": compiler, "python": platform.python_version(), "cores": os.cpu_count()}


@pytest.fixture(scope="session")
def machine() -> dict[str, Any]:
    return machine_info()
