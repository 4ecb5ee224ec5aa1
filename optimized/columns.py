"""Chapter 9, the optimized twin (``native/columns.hpp``): the same filter and aggregate
as ``naive/columns.py``, in C++, over the array of structs and over a struct of arrays.

``adds_above(events, ...)`` and ``vwap(events)`` read the EVENT_DTYPE records as they are
(array of structs). ``Columns(events)`` copies them once into one aligned C++ array per
field; its ``adds_above`` runs a SIMD kernel (AVX-512 or AVX2, whichever the CPU has,
chosen at run time) or, with ``simd="scalar"``, the plain loop over the same columns.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from contract.columns import COLUMN_NAMES, VWAP_DTYPE, check_price, stock_key
from contract.dtypes import EVENT_DTYPE
from optimized import _native

__all__ = ["LEVELS", "Columns", "adds_above", "cpu_level", "to_columns", "vwap"]

# The filter's kernels by name; "auto" is the widest this CPU runs.
LEVELS: Final = ("scalar", "avx2", "avx512")

_COLUMN_DTYPES: Final[dict[str, np.dtype]] = {
    name: np.dtype("<u8") if name == "stock" else EVENT_DTYPE.fields[name][0]  # type: ignore[index]
    for name in COLUMN_NAMES
}


def cpu_level() -> str:
    """The widest filter kernel this CPU supports: "scalar", "avx2" or "avx512"."""
    return LEVELS[int(_native.columns_cpu_level())]


def _level(simd: str) -> int:
    if simd == "auto":
        return int(_native.columns_cpu_level())
    if simd not in LEVELS:
        raise ValueError(f"simd must be 'auto' or one of {LEVELS}, got {simd!r}")
    if LEVELS.index(simd) > _native.columns_cpu_level():
        raise ValueError(f"this CPU cannot run the {simd} kernel (it has {cpu_level()})")
    return LEVELS.index(simd)


def adds_above(events: np.ndarray, stock: bytes | str, price: int) -> np.ndarray:
    """Indices of every add order (A or F) of ``stock`` priced strictly above ``price``."""
    key, above = stock_key(stock), check_price(price)
    return np.asarray(_native.columns_adds_above_aos(events, key, above))


def vwap(events: np.ndarray) -> np.ndarray:
    """Per locate: E executions, the unpriced ones, shares and notional (VWAP_DTYPE)."""
    return np.asarray(_native.columns_vwap_aos(events)).view(VWAP_DTYPE)


class Columns:
    """The events as a struct of arrays in C++: ``column(name)`` views one column."""

    def __init__(self, events: np.ndarray) -> None:
        self._c = _native.Columns(events)

    def __len__(self) -> int:
        return len(self._c)

    def column(self, name: str) -> np.ndarray:
        """One field's column (``stock`` as little-endian uint64), a read-only view."""
        if name not in _COLUMN_DTYPES:
            raise KeyError(f"no column {name!r}")
        view = np.asarray(self._c.column_bytes(name)).view(_COLUMN_DTYPES[name])
        view.flags.writeable = False
        return view

    def adds_above(self, stock: bytes | str, price: int, simd: str = "auto",
                   start: int = 0, stop: int | None = None) -> np.ndarray:
        """The filter over rows [start, stop) (indices into the whole), with the ``simd``
        kernel: "auto" (the widest this CPU runs), "scalar", "avx2" or "avx512"."""
        key, above = stock_key(stock), check_price(price)
        end = len(self) if stop is None else stop
        if not 0 <= start <= end <= len(self):
            raise ValueError(f"rows [{start}, {end}) are not within 0..{len(self)}")
        return np.asarray(self._c.adds_above(key, above, _level(simd), start, end))

    def vwap(self) -> np.ndarray:
        """The aggregate over the columns (VWAP_DTYPE; no SIMD kernel: see chapter 9)."""
        return np.asarray(self._c.vwap()).view(VWAP_DTYPE)


def to_columns(events: np.ndarray) -> Columns:
    """The struct-of-arrays form of ``events`` (``Columns``)."""
    return Columns(events)
