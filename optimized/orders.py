"""Order files, the optimized twin: the same API as naive/orders.py, parsed in C++.

``native/orders.hpp`` parses the bytes in place (GIL released) into a numpy array this
module preallocates (one record per line at most), and reports the first bad field as
(problem, line, field); the message is formatted here, word for word as the naive twin
does. The rules are listed in naive/orders.py's docstring.
"""

from __future__ import annotations

from os import PathLike
from typing import Final

import numpy as np

from optimized import _native
from twinmatch.dtypes import LOBSTER_DTYPE, OPS_DTYPE

CSV_FIELDS: Final = ("order_id", "price", "quantity", "side")
LOBSTER_FIELDS: Final = ("time", "type", "order_id", "size", "price", "direction")
SKIP_KINDS: Final = ("hidden_execution", "cross_trade", "halt", "other")

# Problem numbers of native/orders.hpp -> the naive twin's words.
PROBLEMS: Final = {
    2: "missing",
    3: "not a number",
    4: "negative",
    5: "out of range",
    6: "must be 0 (buy) or 1 (sell)",
    7: "must be 1..7",
    8: "must be 1 (buy) or -1 (sell)",
    9: "more than 9 decimal places",
}
_FIELD_COUNT: Final = 1

Source = str | PathLike[str] | bytes | bytearray | memoryview


class OrdersError(ValueError):
    """A bad row in an order file; ``line`` is its 1-based line number."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def read_bytes(source: Source) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    with open(source, "rb") as f:
        return f.read()


def _error(data: bytes, names: tuple[str, ...], problem: int, line: int, field: int,
           nfields: int) -> OrdersError:
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
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = data.split(b"\n")[line - 1].removesuffix(b"\r").split(b",")[field].strip(b" \t")
    return OrdersError(f"line {line}: {name}: {words}: {text.decode('latin-1')!r}", line)


def _parse(source: Source, dtype: np.dtype, names: tuple[str, ...], csv: bool) -> np.ndarray:
    data = read_bytes(source)
    out = np.zeros(data.count(b"\n") + 1, dtype=dtype)  # at most one record per line
    buf = np.frombuffer(data, dtype=np.uint8)
    parse = _native.parse_csv if csv else _native.parse_lobster
    count, problem, line, field, nfields = parse(buf, out.view(np.uint8))
    if problem:
        raise _error(data, names, problem, line, field, nfields)
    return out[:count].copy() if count < len(out) else out


def read_csv(source: Source) -> np.ndarray:
    """CSV orders -> OPS_DTYPE array (quantity 0: cancel; price 0: market; else limit)."""
    return _parse(source, OPS_DTYPE, CSV_FIELDS, csv=True)


def read_lobster(source: Source) -> np.ndarray:
    """A LOBSTER message file -> LOBSTER_DTYPE array (time as int64 ns after midnight)."""
    return _parse(source, LOBSTER_DTYPE, LOBSTER_FIELDS, csv=False)


def lobster_to_ops(messages: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """LOBSTER messages -> (OPS_DTYPE array, skipped rows by kind); see the naive twin."""
    if messages.dtype != LOBSTER_DTYPE:
        raise TypeError(f"lobster_to_ops: expected LOBSTER_DTYPE, got {messages.dtype}")
    msgs = np.ascontiguousarray(messages)
    ops = np.zeros(len(msgs), dtype=OPS_DTYPE)
    count, *skipped = _native.lobster_to_ops(msgs.view(np.uint8), ops.view(np.uint8))
    return ops[:count].copy(), dict(zip(SKIP_KINDS, skipped, strict=True))
