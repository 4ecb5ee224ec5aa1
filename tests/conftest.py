"""Shared fixtures: the ``impl`` fixture runs one behavioural suite over every twin."""

from __future__ import annotations

import importlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A shell's background job (`make test &` with no job control) starts with SIGINT ignored,
# every child inherits that, and the Ctrl-C tests would see their child ignore the
# signal. Python's own handler here is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _shared() -> Path:
    """The read-only shared folder: $TWINMATCH_SHARED, beside the checkout, or /work/shared."""
    for candidate in (os.environ.get("TWINMATCH_SHARED"), ROOT.parent / "shared", "/work/shared"):
        if candidate and (Path(candidate) / "data" / "real").is_dir():
            return Path(candidate)
    return ROOT.parent / "shared"


SHARED = _shared()
REAL_DATA = SHARED / "data" / "real"


@dataclass(frozen=True)
class BookImpl:
    """One implementation of the book contract: its name, module and Book class."""

    name: str
    module: Any
    book_class: Any

    def new(self, **options: Any) -> Any:
        return self.book_class(**options)

    @property
    def Side(self) -> Any:  # noqa: N802 - mirrors the module attribute
        return self.module.Side

    @property
    def OrderRejected(self) -> Any:  # noqa: N802
        return self.module.OrderRejected


BOOK_IMPLS = ("naive", "optimized", "baseline")


def load_book_impl(name: str) -> BookImpl:
    if name == "naive":
        module = importlib.import_module("naive.book")
        return BookImpl(name, module, module.Book)
    module = importlib.import_module("optimized.book")
    if name == "optimized":
        return BookImpl(name, module, module.Book)
    return BookImpl(name, module, module.MapBook)


@pytest.fixture(params=BOOK_IMPLS)
def impl(request: pytest.FixtureRequest) -> BookImpl:
    """Each book twin in turn: naive (Python), optimized (C++), baseline (C++ std::map)."""
    return load_book_impl(str(request.param))


def real_file(name: str) -> Path:
    """A file from ../shared/data/real, or skip the test saying why."""
    path = REAL_DATA / name
    if not path.exists():
        pytest.skip(f"real capture {name} not found in {REAL_DATA}")
    return path
