"""Benchmark helpers shared by every component's benchmarks.

Sizes: ``TWINMATCH_BENCH_SCALE=small`` (what ``make test`` uses to smoke-run every
benchmark once) or ``full`` (the default, what ``make bench`` measures).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from twinmatch.flow import cached_order_flow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import machine  # noqa: E402 - scripts/ is not a package

SMALL = os.environ.get("TWINMATCH_BENCH_SCALE", "full") == "small"


def cached_flow(n: int, seed: int) -> np.ndarray:
    """The realistic stream of ``n`` ops, generated once and kept in out/cache."""
    return cached_order_flow(n, seed)


def pytest_benchmark_update_machine_info(config: Any, machine_info: dict[str, Any]) -> None:
    """Label every run with what produced it (scripts/machine.py): CPU, compiler, flags."""
    machine_info["twinmatch"] = machine.collect()
