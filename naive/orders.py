"""Order files, the readable twin: CSV orders and LOBSTER message files -> numpy arrays.

CSV orders: ``order_id,price,quantity,side`` per line; side 0 buy, 1 sell; quantity 0 means
cancel the order id, price 0 means a market order, anything else a limit order. LOBSTER
message files: ``time,type,order_id,size,price,direction`` (time in seconds after midnight
with up to 9 decimals, price in 1/10000 dollars, direction 1 buy, -1 sell).

Rules both twins share (same result or the same error, word for word):

* Input is a path, ``"-"`` (standard input), an open binary stream (a pipe) or the file's
  bytes. A UTF-8 byte-order mark is ignored, ``\\r\\n`` line ends are accepted, blank lines
  (only spaces or tabs) are skipped. A line longer than 1 MiB (``MAX_LINE``) is an error
  (after any bad line before it), so an endless line (``/dev/zero``) cannot fill memory.
* The first non-blank line is a header, and skipped, when its first field does not start
  with a digit or ``-``.
* Each field may have spaces or tabs around it; inside it must be ASCII digits (``-`` in
  front where a negative value is allowed: LOBSTER price on halt rows and direction).
* The first bad field of the first bad line raises ``OrdersError`` (a ``ValueError``) whose
  ``line`` is the 1-based line number, e.g. ``line 3: price: not a number: 'abc'``.
  Problems: wrong field count, missing, not a number, negative, out of range (order id
  above 2**64-1, price or quantity above 2**32-1), side not 0/1, LOBSTER type not 1..7,
  direction not 1/-1, time with more than 9 decimals.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import numpy as np

from contract.dtypes import (
    LOBSTER_DTYPE,
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OPS_DTYPE,
)
from contract.dtypes import records as zeroed_records
from contract.order_files import (
    MAX_LINE,
    LineTooLong,
    OrderSource,
    check_lobster,
    pieces,
    zeroed_copy,
)
from contract.orders import CSV_FIELDS, LOBSTER_FIELDS, SKIP_KINDS

U32_MAX: Final = 2**32 - 1
U64_MAX: Final = 2**64 - 1
I64_MAX: Final = 2**63 - 1

Source = OrderSource
__all__ = ["MAX_LINE", "OrdersError", "lobster_to_ops", "read_csv", "read_lobster"]


class OrdersError(ValueError):
    """A bad row in an order file; ``line`` is its 1-based line number."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class FieldProblem(Exception):
    """Raised inside a field parser; the caller adds the line and field name."""


def source_lines(source: Source) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every line, read a piece of whole lines at a time
    (contract/order_files.py), so a bad line is found before the rest is read."""
    try:
        for piece, first in pieces(source):
            if first == 1 and piece.startswith(b"\xef\xbb\xbf"):
                piece = piece[3:]
            yield from enumerate(piece.split(b"\n"), start=first)
    except LineTooLong as e:
        raise OrdersError(str(e), e.line) from None


def data_lines(source: Source, names: tuple[str, ...]) -> Iterator[tuple[int, list[bytes]]]:
    """(line number, stripped fields) of each data line in turn; checks the field count."""
    header_checked = False
    for number, line in source_lines(source):
        if not line.strip(b" \t\r"):
            continue
        fields = [f.strip(b" \t") for f in line.removesuffix(b"\r").split(b",")]
        if not header_checked:
            header_checked = True
            first = fields[0][:1]
            if not (first.isdigit() or first == b"-"):
                continue  # a header row
        if len(fields) != len(names):
            raise OrdersError(
                f"line {number}: expected {len(names)} fields ({','.join(names)}),"
                f" got {len(fields)}", number
            )
        yield number, fields


# --8<-- [start:parse_field]
def parse_uint(text: bytes, maximum: int) -> int:
    """A non-negative decimal integer no larger than `maximum`."""
    if not text:
        raise FieldProblem("missing")
    if text.isdigit():
        value = int(text)
        if value > maximum:
            raise FieldProblem("out of range")
        return value
    if text[:1] == b"-" and text[1:].isdigit():
        raise FieldProblem("negative")
    raise FieldProblem("not a number")
# --8<-- [end:parse_field]


def parse_int(text: bytes, minimum: int, maximum: int) -> int:
    """A decimal integer, '-' allowed, within [minimum, maximum]."""
    digits = text[1:] if text[:1] == b"-" else text
    if not text:
        raise FieldProblem("missing")
    if not digits.isdigit():
        raise FieldProblem("not a number")
    value = int(text)
    if value < minimum:
        raise FieldProblem("negative" if minimum == 0 else "out of range")
    if value > maximum:
        raise FieldProblem("out of range")
    return value


def parse_choice(text: bytes, allowed: tuple[int, ...], problem: str) -> int:
    """A small integer that must be one of `allowed` (any other number -> `problem`)."""
    digits = text[1:] if text[:1] == b"-" else text
    if not text:
        raise FieldProblem("missing")
    if not digits.isdigit():
        raise FieldProblem("not a number")
    value = int(text)
    if value not in allowed:
        raise FieldProblem(problem)
    return value


def parse_time_ns(text: bytes) -> int:
    """Seconds after midnight with up to 9 decimals -> integer nanoseconds (exact)."""
    whole, dot, frac = text.partition(b".")
    if not text:
        raise FieldProblem("missing")
    if whole[:1] == b"-" and whole[1:].isdigit() and (not dot or frac.isdigit()):
        raise FieldProblem("negative")
    if not whole.isdigit() or (dot and not frac.isdigit()):
        raise FieldProblem("not a number")
    if len(frac) > 9:
        raise FieldProblem("more than 9 decimal places")
    value = int(whole) * 1_000_000_000 + int(frac.ljust(9, b"0") or b"0")
    if value > I64_MAX:
        raise FieldProblem("out of range")
    return value


def field_error(number: int, name: str, text: bytes, problem: str) -> OrdersError:
    if problem == "missing":
        return OrdersError(f"line {number}: {name}: missing", number)
    return OrdersError(f"line {number}: {name}: {problem}: {text.decode('latin-1')!r}", number)


# --8<-- [start:read_csv]
def read_csv(source: Source) -> np.ndarray:
    """CSV orders -> OPS_DTYPE array (qty 0: cancel; price 0: market; else limit)."""
    records = []
    for number, fields in data_lines(source, CSV_FIELDS):
        try:
            name, text = "order_id", fields[0]
            order_id = parse_uint(text, U64_MAX)
            name, text = "price", fields[1]
            price = parse_uint(text, U32_MAX)
            name, text = "quantity", fields[2]
            qty = parse_uint(text, U32_MAX)
            name, text = "side", fields[3]
            side = parse_choice(text, (0, 1), "must be 0 (buy) or 1 (sell)")
        except FieldProblem as problem:
            raise field_error(number, name, text, str(problem)) from None
        op = OP_CANCEL if qty == 0 else OP_MARKET if price == 0 else OP_LIMIT
        records.append((order_id, 0, price, qty, op, side))
    return zeroed_records(records, OPS_DTYPE)
# --8<-- [end:read_csv]


def read_lobster(source: Source) -> np.ndarray:
    """A LOBSTER message file -> LOBSTER_DTYPE array (time as int64 ns after midnight)."""
    records = []
    for number, fields in data_lines(source, LOBSTER_FIELDS):
        time_f, type_f, id_f, size_f, price_f, dir_f = fields
        try:
            name, text = "time", time_f
            time = parse_time_ns(text)
            name, text = "type", type_f
            kind = parse_choice(text, (1, 2, 3, 4, 5, 6, 7), "must be 1..7")
            name, text = "order_id", id_f
            order_id = parse_uint(text, U64_MAX)
            name, text = "size", size_f
            size = parse_uint(text, U32_MAX)
            name, text = "price", price_f
            if kind == 7:  # halt rows carry -1 / 0 / 1
                price = parse_int(text, -(2**63), I64_MAX)
            else:
                price = parse_uint(text, U32_MAX)
            name, text = "direction", dir_f
            direction = parse_choice(text, (1, -1), "must be 1 (buy) or -1 (sell)")
        except FieldProblem as problem:
            raise field_error(number, name, text, str(problem)) from None
        records.append((time, order_id, price, size, kind, direction))
    return zeroed_records(records, LOBSTER_DTYPE)


# --8<-- [start:lobster_to_ops]
def lobster_to_ops(messages: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """LOBSTER messages -> (OPS_DTYPE array, skipped rows by kind).

    1 submission -> limit, 2 partial cancel -> reduce, 3 deletion -> cancel, 4 visible
    execution -> execute; 5 hidden execution, 6 cross trade, 7 halt change no visible
    book and are skipped and counted (any other type, only possible in a hand-made
    array, as "other").
    """
    messages = check_lobster(messages)
    op_for = {1: OP_LIMIT, 2: OP_REDUCE, 3: OP_CANCEL, 4: OP_EXECUTE}
    skip_name = {5: "hidden_execution", 6: "cross_trade", 7: "halt"}
    skipped = dict.fromkeys(SKIP_KINDS, 0)
    ops = np.zeros(len(messages), dtype=OPS_DTYPE)
    n = 0
    for m in messages:
        kind = int(m["type"])
        if kind not in op_for:
            skipped[skip_name.get(kind, "other")] += 1  # "other": not a LOBSTER type
            continue
        side = 0 if int(m["direction"]) == 1 else 1
        price = int(m["price"]) & U32_MAX
        ops[n] = (int(m["order_id"]), 0, price, int(m["size"]), op_for[kind], side)
        n += 1
    return zeroed_copy(ops[:n]), skipped
# --8<-- [end:lobster_to_ops]

