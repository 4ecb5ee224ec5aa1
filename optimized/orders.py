"""Order files, the optimized twin: the same API as naive/orders.py, parsed in C++.

``native/orders.hpp`` parses the bytes in place (GIL released) into a numpy array this
module preallocates (one record per line at most), and reports the first bad field as
(problem, line, field); the message is formatted here, word for word as the naive twin
does. The rules are listed in naive/orders.py's docstring.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from contract.dtypes import LOBSTER_DTYPE, OPS_DTYPE, concat_records
from contract.order_files import (
    MAX_LINE,
    LineTooLong,
    OrderSource,
    check_lobster,
    pieces,
    zeroed_copy,
)
from contract.orders import CSV_FIELDS, LOBSTER_FIELDS, SKIP_KINDS
from optimized import _native

# native/orders.hpp's Problem codes, by value (tests/test_contract.py checks this against
# the extension's own list), and the naive twin's words for each problem of one field.
PROBLEM_NAMES: Final = ("ok", "field_count", "missing", "not_number", "negative",
                        "out_of_range", "bad_side", "bad_type", "bad_direction", "too_precise",
                        "capacity")
_WORDS: Final = {
    "missing": "missing",
    "not_number": "not a number",
    "negative": "negative",
    "out_of_range": "out of range",
    "bad_side": "must be 0 (buy) or 1 (sell)",
    "bad_type": "must be 1..7",
    "bad_direction": "must be 1 (buy) or -1 (sell)",
    "too_precise": "more than 9 decimal places",
}
PROBLEMS: Final = {PROBLEM_NAMES.index(name): words for name, words in _WORDS.items()}
_FIELD_COUNT: Final = PROBLEM_NAMES.index("field_count")

Source = OrderSource
__all__ = ["MAX_LINE", "OrdersError", "lobster_to_ops", "read_csv", "read_lobster"]


class OrdersError(ValueError):
    """A bad row in an order file; ``line`` is its 1-based line number."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _error(data: bytes, first_line: int, names: tuple[str, ...], problem: int, line: int,
           field: int, nfields: int) -> OrdersError:
    """Rebuild the naive twin's message (slow path: only when a file is bad)."""
    if problem == _FIELD_COUNT:
        return OrdersError(
            f"line {line}: expected {len(names)} fields ({','.join(names)}), got {nfields}", line
        )
    words = PROBLEMS.get(problem)
    if words is None:
        raise RuntimeError(f"orders parser: internal problem code {problem} at line {line}")
    name = names[field]
    if words == "missing":
        return OrdersError(f"line {line}: {name}: missing", line)
    if first_line == 1 and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    row = data.split(b"\n")[line - first_line]
    text = row.removesuffix(b"\r").split(b",")[field].strip(b" \t")
    return OrdersError(f"line {line}: {name}: {words}: {text.decode('latin-1')!r}", line)


def _parse(source: Source, dtype: np.dtype, names: tuple[str, ...], csv: bool) -> np.ndarray:
    """Parse the file a piece of whole lines at a time (the same pieces as the naive twin)."""
    parse = _native.parse_csv if csv else _native.parse_lobster
    parts: list[np.ndarray] = []
    header_checked = False
    try:
        for data, first_line in pieces(source):
            out = np.zeros(data.count(b"\n") + 1, dtype=dtype)  # at most one record a line
            buf = np.frombuffer(data, dtype=np.uint8)
            count, problem, line, field, nfields, header_checked = parse(
                buf, out.view(np.uint8), first_line, header_checked)
            if problem:
                raise _error(data, first_line, names, problem, line, field, nfields)
            parts.append(out if count == len(out) else zeroed_copy(out[:count]))
    except LineTooLong as e:
        raise OrdersError(str(e), e.line) from None
    return parts[0] if len(parts) == 1 else concat_records(parts, dtype)


def read_csv(source: Source) -> np.ndarray:
    """CSV orders -> OPS_DTYPE array (quantity 0: cancel; price 0: market; else limit)."""
    return _parse(source, OPS_DTYPE, CSV_FIELDS, csv=True)


def read_lobster(source: Source) -> np.ndarray:
    """A LOBSTER message file -> LOBSTER_DTYPE array (time as int64 ns after midnight)."""
    return _parse(source, LOBSTER_DTYPE, LOBSTER_FIELDS, csv=False)


def lobster_to_ops(messages: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """LOBSTER messages -> (OPS_DTYPE array, skipped rows by kind); see the naive twin."""
    messages = check_lobster(messages)
    msgs = np.ascontiguousarray(messages)
    ops = np.zeros(len(msgs), dtype=OPS_DTYPE)
    count, *skipped = _native.lobster_to_ops(msgs.view(np.uint8), ops.view(np.uint8))
    return zeroed_copy(ops[:count]), dict(zip(SKIP_KINDS, skipped, strict=True))
