"""twinmatch optimized twins (C++20)"""

import enum
import typing
from collections.abc import Iterator, Sequence
from typing import Annotated, Any

import numpy
import numpy.typing
from numpy.typing import NDArray

COMPILER: str

BUILD_TYPE: str

class Side(enum.IntEnum):
    """Order side: BUY = 0, SELL = 1."""

    BUY = 0

    SELL = 1

class OrderRejected(ValueError):
    """An operation the book refused; the book is unchanged."""

    def __init__(self, order_id: int, reason: str) -> None: ...

class BookFull(MemoryError):
    """
    The book cannot take one more resting order (max_orders, or memory).

        Raised before the operation changes anything. From apply(): .index is the
        operation that failed, .fills and .rejects those of the operations before it,
        which the book has applied. From a single-op call they are None.
    """

    index: int | None

    fills: numpy.typing.NDArray[numpy.void] | None

    rejects: numpy.typing.NDArray[numpy.void] | None

    def __init__(
        self,
        message: str,
        index: int | None = None,
        fills: numpy.typing.NDArray[numpy.void] | None = None,
        rejects: numpy.typing.NDArray[numpy.void] | None = None,
    ) -> None: ...

class Fill:
    """
    One trade: compares equal to the tuple (resting_id, aggressor_id, price, qty, aggressor_side).
    """

    def __init__(
        self, resting_id: int, aggressor_id: int, price: int, qty: int, aggressor_side: Side
    ) -> None: ...
    @property
    def resting_id(self) -> int: ...
    @property
    def aggressor_id(self) -> int: ...
    @property
    def price(self) -> int: ...
    @property
    def qty(self) -> int: ...
    @property
    def aggressor_side(self) -> Side: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[int]: ...
    def __getitem__(self, index: int, /) -> int: ...
    def __repr__(self) -> str: ...

class Book:
    """
    The optimized order book: price window + bitsets, pooled 32-byte nodes, open-addressing id hash.
    """

    def __init__(
        self, window_levels: int = 262144, initial_orders: int = 65536, max_orders: int = 2147483648
    ) -> None: ...
    def stats(self) -> dict[str, int]:
        """Internals (window, pool, hash sizes) for tests and the book's tables."""

    def hash_displacement(self) -> tuple[int, int]:
        """
        (largest, total) distance of the id table's entries from their home slots:
        the probes a lookup of every resting id makes beyond the first (for tests).
        """

    def hash_home(self, order_id: int) -> int:
        """The id's home slot in the current id hash table (for tests)."""

    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

class BookStep0:
    """
    Chapter 1, step 0 (flat): Book with only its first 0 decisions; same API and results.
    The step's decision: a flat array of levels, the best price found by scanning it.
    """

    def __init__(
        self, window_levels: int = 262144, initial_orders: int = 65536, max_orders: int = 2147483648
    ) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

class BookStep1:
    """
    Chapter 1, step 1 (bitset): Book with only its first 1 decisions; same API and results.
    The step's decision: the best price found by descending a bitset.
    """

    def __init__(
        self, window_levels: int = 262144, initial_orders: int = 65536, max_orders: int = 2147483648
    ) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

class BookStep2:
    """
    Chapter 1, step 2 (warm-nodes): Book with only its first 2 decisions; same API and results.
    The step's decision: the node freed last is the next one handed out.
    """

    def __init__(
        self, window_levels: int = 262144, initial_orders: int = 65536, max_orders: int = 2147483648
    ) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

class BookStep3:
    """
    Chapter 1, step 3 (fingerprints): Book with only its first 3 decisions; same API and results.
    The step's decision: id-hash probes compare a fingerprint before reading a node.
    """

    def __init__(
        self, window_levels: int = 262144, initial_orders: int = 65536, max_orders: int = 2147483648
    ) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

class BookStep4:
    """
    Chapter 1, step 4 (branch-free): Book with only its first 4 decisions; same API and results.
    The step's decision: side keys and queue unlinking without branches.
    """

    def __init__(
        self, window_levels: int = 262144, initial_orders: int = 65536, max_orders: int = 2147483648
    ) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

def book_steps() -> list[tuple[str, str]]:
    """
    Chapter 1's steps in order as (name, what the step adds); step i is BookStep<i>,
    the last one is Book.
    """

class MapBook:
    """The std::map / std::list / std::unordered_map baseline, same API."""

    def __init__(self, initial_orders: int = 65536, max_orders: int = 2147483648) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

def layout_info() -> dict[str, int]:
    """Sizes of the book's building blocks, for the chapter's layout table."""

def itch_scan(buffer: object) -> tuple[typing.Any, ...]:
    """
    Decode the whole ITCH records at the start of a bytes-like buffer (GIL released).
    """

def itch_sum_bytes(buffer: object) -> int:
    """
    Sum a buffer as 8-byte words: one plain sequential read, the bandwidth ceiling.
    """

ITCH_LENGTHS: list[int] = ...

ITCH_EVENT_SIZE: int = 56

def itch_simd(on: bool) -> bool:
    """
    Use the AVX-512 VBMI loop when the CPU has it (default); returns whether it was in use.
    """

def itch_release_pool() -> None:
    """Free the recycled output blocks the ITCH decoder keeps (at most two)."""

class PcapScanner:
    """Classic PCAP -> MoldUDP64 message blocks, by chunks"""

    def __init__(self) -> None: ...
    def feed(
        self,
        buffer: Annotated[
            NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
    ) -> tuple[Annotated[NDArray[numpy.uint8], dict(shape=(None,))], int]:
        """
        Consume whole records; return (framed message blocks as uint8 array, bytes used)
        """

    def stats(self) -> dict[str, int | str]: ...
    def streams(self) -> list[dict[str, int | str]]: ...
    def set_filter(self, group: int, port: int, session: bytes) -> None:
        """
        Read only this destination group (-1: any), UDP port (-1: any), session (b'': any)
        """

    @property
    def max_record(self) -> int: ...
    @property
    def header_done(self) -> bool: ...
    @property
    def big_endian(self) -> bool: ...
    @property
    def offset(self) -> int: ...
    @property
    def error(self) -> int: ...
    @property
    def error_value(self) -> int: ...

def parse_csv(
    data: Annotated[
        NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu", writable=False)
    ],
    out: Annotated[NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu")],
    first_line: int,
    header_checked: bool,
) -> tuple[int, int, int, int, int, bool]:
    """
    CSV orders -> OPS_DTYPE records in out; (count, problem, line, field, nfields, header_checked)
    """

def parse_lobster(
    data: Annotated[
        NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu", writable=False)
    ],
    out: Annotated[NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu")],
    first_line: int,
    header_checked: bool,
) -> tuple[int, int, int, int, int, bool]:
    """
    LOBSTER -> LOBSTER_DTYPE records in out; (count, problem, line, field, nfields, header_checked)
    """

def lobster_to_ops(
    messages: Annotated[
        NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu", writable=False)
    ],
    out: Annotated[NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu")],
) -> tuple[int, int, int, int, int]:
    """
    LOBSTER_DTYPE bytes -> OPS_DTYPE bytes; (count, hidden, cross, halt, other)
    """

class GenSimulator:
    """The exchange simulator of twinmatch.gen: a day of ITCH messages."""

    def __init__(
        self,
        seed: int,
        messages: int,
        symbols: int,
        flow: bool,
        all_types: bool = False,
        intraday: bool = False,
    ) -> None: ...
    def next_chunk(self, min_bytes: int) -> bytes:
        """
        Whole framed messages, at least min_bytes unless the day ends; b'' once it has ended.
        """

    @property
    def done(self) -> bool: ...
    @property
    def emitted(self) -> int: ...
    @property
    def live_orders(self) -> int: ...
    def counts(self) -> dict[str, int]:
        """Messages written so far, by type character."""

    def books_csv(self) -> bytes:
        """The books CSV of the simulator's books as they stand now."""

    @staticmethod
    def minimum_messages(symbols: int) -> int: ...

class GenPcapWriter:
    """Packs framed ITCH messages into a MoldUDP64 pcap."""

    def __init__(self, session: str, window_ns: int, heartbeat_ns: int, epoch_s: int) -> None: ...
    @staticmethod
    def global_header() -> bytes: ...
    def feed(self, buffer: object) -> bytes:
        """Whole framed messages in; the pcap records of finished packets out."""

    def finish(self) -> bytes:
        """The last packet and the end-of-session packet."""

    @property
    def packets(self) -> int: ...
    @property
    def heartbeats(self) -> int: ...
    @property
    def next_seq(self) -> int: ...

GEN_MESSAGES_CSV_HEADER: str

GEN_MAX_SYMBOLS: int = 60000

def gen_messages_csv(buffer: object) -> bytes:
    """Framed ITCH messages -> CSV rows (no header), one per message."""

MARKET_ANOMALY_KINDS: int = 8

def show_bytes(raw: bytes) -> str:
    """Feed bytes as text: 0x20..0x7e as themselves, any other byte as \\xNN."""

class Market:
    """One book per stock locate (native/market.hpp)."""

    def __init__(self, mode: str = "book", window_levels: int = 131072) -> None: ...
    @property
    def mode(self) -> str: ...
    def run_bytes(
        self, events: numpy.typing.NDArray[numpy.uint8]
    ) -> numpy.typing.NDArray[numpy.void]:
        """Apply EVENT_DTYPE records (as raw bytes); returns FILL_DTYPE fills."""

    def run_itch(
        self, buffer: object
    ) -> tuple[numpy.typing.NDArray[numpy.void], list[int], int, int, int, int, int]:
        """
        Decode framed ITCH records, applying each at once (no events array).

        Returns (fills, counts by type byte, consumed, events, error code, type, length).
        """

    def raw_counts(self) -> tuple[list[int], list[int], list[int], int, int]:
        """
        (events by type byte, anomalies by kind, rejects by reason, fills, volume)
        """

    def __len__(self) -> int:
        """Live (resting) orders across all books."""

    @property
    def books(self) -> int:
        """Books created so far (one per locate with an order)."""

    def activity(self) -> list[tuple[int, int]]:
        """(locate, book messages) for every locate that had one, by locate."""

    def stock(self, locate: int) -> str:
        """The symbol a stock directory (R) message gave the locate, or ''."""

    def trading_state(self, locate: int) -> str:
        """The trading state byte of the locate's last H message, or ''."""

    def trading_states(self) -> dict[str, int]:
        """How many locates are in each trading state (by their last H message)."""

    def book_states(self) -> list[tuple[str, int]]:
        """
        Locked / crossed books: episodes, time in ITCH ns, books in the state now.
        """

    def set_growth_budget(self, steps: int) -> None:
        """
        Test hook: the growth step after `steps` more raises MemoryError (negative: no limit).
        """

    def top(self, locate: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """((bid, qty) | None, (ask, qty) | None) of one locate's book."""

    def depth(self, locate: int, side: int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_ref: int) -> tuple[int, int, int, int] | None:
        """(locate, side, price, shares) of a live order, or None."""

    def set_lookahead(self, on: bool) -> None:
        """
        Benchmark hook: prefetch for the messages ahead (by default only while the
        working set outgrows half the last-level cache) or never.
        """

    def set_lookahead_stages(self, stages: int) -> None:
        """Benchmark hook: run the first `stages` of the three look-ahead stages."""

    def lookahead_stages(self) -> int:
        """The look-ahead stages the next call will run (0..3)."""

    def set_match_batch(self, events: int) -> None:
        """
        Match mode: batches of at least `events` events may take the batch engine (0: never).
        """

    def match_batch(self) -> int:
        """The smallest batch the batch engine takes (0: off)."""

    def batch_runs(self) -> int:
        """How many run() calls the batch engine took (tests, the ablation)."""

    def window_stats(self) -> dict[str, int]:
        """
        How the price windows are sized now.

        Sides with a window, their levels, the largest,
        levels in the far maps, window moves so far, order-pool chunks of 65,536 nodes
        made usable, the address space the pool reserved (bytes), the cap.
        """

    def books_csv(self) -> str:
        """Every resting order as the books CSV (DESIGN.md), header included."""

def usable_cpus() -> list[int]:
    """The CPUs this process may run on (sched_getaffinity)."""

def ring_stress(items: int, capacity: int, wait: str = "yield") -> tuple[int, bool, float]:
    """
    Pass `items` numbers through an SpscRing between two threads:
    (received, in_order, seconds). wait: spin, yield (spin then yield),
    sleep (spin, yield, then 50 us sleeps) or auto (= yield).
    """

def ring_stress_variant(
    items: int, capacity: int, wait: str, cached_indices: bool, own_lines: bool
) -> tuple[int, bool, float]:
    """
    ring_stress with SpscRing's cached indices and separate cache lines on or off.
    """

def clock_reads(clock: str, reads: int) -> tuple[int, str]:
    """
    Read a clock `reads` times in a C++ loop: (sum of the stamps, the clock's name).
    """

HIST_SUB_BUCKET_BITS: int = 5

HIST_BUCKETS: int = 1920

RING_CAPACITY_MAX: int = 16777216

def choose_cpus(cpus: Sequence[int], cores: Sequence[int], want: int) -> list[int]:
    """
    One CPU on each of `want` distinct physical cores (cores[i]: cpus[i]'s
    core), CPU 0's core last; [] if there are fewer cores.
    """

def core_key(cpu: int) -> int:
    """The physical core of a CPU, from sysfs."""

def ring_slots_offset(capacity: int) -> int:
    """Where a new ring's slots start, modulo 64 bytes (0: line aligned)."""

class Histogram:
    """Log-linear latency buckets (native/histogram.hpp)."""

    def __init__(self) -> None: ...
    def record(self, ns: int) -> None: ...
    def record_delta(self, start: int, end: int) -> None: ...
    def record_many(
        self,
        values: Annotated[
            NDArray[numpy.uint64], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
    ) -> None:
        """Record every value of a uint64 array."""

    def percentile_ppm(self, ppm: int) -> int: ...
    def summary(self) -> dict[str, Any]:
        """count, layout, min, max, mean, negative and p50 p90 p99 p99.9 (ns)."""

    @staticmethod
    def bucket_of(ns: int) -> int: ...
    @staticmethod
    def bucket_lowest(i: int) -> int: ...
    @staticmethod
    def bucket_highest(i: int) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def negative(self) -> int: ...
    @property
    def max(self) -> int: ...
    @property
    def min(self) -> int: ...
    @property
    def sum_parts(self) -> tuple[int, int]:
        """The 128-bit sum as (high, low) 64-bit halves."""

    def counts(self) -> list[int]: ...

class Pipeline:
    """parser -> engine -> logger (native/pipeline.hpp)."""

    def __init__(
        self,
        mode: str,
        ring_capacity: int,
        fill_capacity: int,
        drop_fills: bool,
        logger_delay_ns: int,
        stop_after: int,
        placement: str,
        wait: str,
        fail_spawn: int = 0,
    ) -> None: ...
    def run(self, buffer: object, fd: int) -> None:
        """
        Run a bytes-like ITCH buffer through the stages (GIL released); fd -1 discards.
        """

    def stop(self) -> None:
        """Stop parsing at the next record (any thread); the rest still drains."""

    def stats(self) -> dict[str, Any]:
        """
        Counts, stalls, drops, histograms' summaries and the placement, after run().
        """

    def hist_counts(self, which: str) -> list[int]:
        """The bucket counts of one histogram ('parse' or 'e2e')."""

class PackedPipeline:
    """
    The same pipeline with the stages' counters packed
    together (the false-sharing benchmark's variant).
    """

    def __init__(
        self,
        mode: str,
        ring_capacity: int,
        fill_capacity: int,
        drop_fills: bool,
        logger_delay_ns: int,
        stop_after: int,
        placement: str,
        wait: str,
        fail_spawn: int = 0,
    ) -> None: ...
    def run(self, buffer: object, fd: int) -> None:
        """
        Run a bytes-like ITCH buffer through the stages (GIL released); fd -1 discards.
        """

    def stop(self) -> None:
        """Stop parsing at the next record (any thread); the rest still drains."""

    def stats(self) -> dict[str, Any]:
        """
        Counts, stalls, drops, histograms' summaries and the placement, after run().
        """

    def hist_counts(self, which: str) -> list[int]:
        """The bucket counts of one histogram ('parse' or 'e2e')."""

class CappedRef:
    """Benchmark-only capped flat-array matching engine (capped_ref.hpp)."""

    def __init__(self, events: numpy.typing.NDArray[numpy.uint8], max_refs: int) -> None:
        """
        Check and copy EVENT_DTYPE records (as raw bytes): A adds for locate 1 only,
        prices 1..100,000, references 1..max_refs, each once (ValueError otherwise).
        """

    @property
    def adds(self) -> int: ...
    def run(self) -> numpy.typing.NDArray[numpy.void]:
        """Match every add from an empty book; returns the fills (FILL_DTYPE)."""

    def resting(self) -> int:
        """Orders resting after the last run()."""

def contract_tables() -> dict[str, Any]:
    """
    The C++ twins' codes and record layouts (tests/test_contract.py checks them).
    """

JOURNAL_RECORD_SIZE: int = 48

JOURNAL_BUFFER_RECORDS: int = 4096

def journal_crc32(data: bytes, crc: int = 0) -> int:
    """CRC-32 of bytes, equal to zlib.crc32(data, crc)."""

def journal_scan(
    data: bytes,
) -> tuple[int, int, int, int, int, int, int, int, int, numpy.typing.NDArray[numpy.void]]:
    """
    Check a journal's bytes: (code, offset, value, expected, records, last_seq,
    valid_end, torn_offset, torn_bytes, ops). code 0 is ok; see contract.journal.
    """

class JournalWriterCore:
    """The C++ journal writer; optimized.journal.JournalWriter wraps it."""

    def __init__(
        self, path: str, lock_path: str, policy: int, batch: int, interval_ns: int, fsync: bool
    ) -> None:
        """
        Take the journal's lock (JournalLocked if another writer has it); then
        create() or resume() opens the file.
        """

    def create(self, tmp: str, dir: str) -> None:
        """A new journal, made atomically (header to tmp, fsync, rename)."""

    def resume(self, resume_at: int, next_seq: int) -> None:
        """An existing journal, cut at resume_at."""

    def append(self, ops: numpy.typing.NDArray[numpy.void]) -> int:
        """Journal every row; returns the last sequence number given."""

    def flush(self) -> None: ...
    def sync(self) -> None: ...
    def poll(self) -> bool: ...
    def due_in_ns(self) -> int: ...
    def close(self) -> None: ...
    @property
    def failed(self) -> int: ...
    @property
    def next_seq(self) -> int: ...
    @property
    def flushed_seq(self) -> int: ...
    @property
    def synced_seq(self) -> int: ...
    @property
    def flushes(self) -> int: ...

class SnapshotBook:
    """
    The optimized Book (native/book.hpp), its resting orders
    listable in queue order, for snapshots.
    """

    def __init__(self) -> None: ...
    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """As Book.apply: (fills FILL_DTYPE, rejects REJECT_DTYPE)."""

    def resting_orders(self) -> numpy.typing.NDArray[numpy.void]:
        """The book as OP_LIMIT rows in snapshot order (contract.journal)."""

    def __len__(self) -> int: ...

class Columns:
    """ITCH events as a struct of arrays (native/columns.hpp)."""

    def __init__(self, events: object) -> None: ...
    def __len__(self) -> int: ...
    def adds_above(
        self, key: int, above: int, level: int, start: int, stop: int
    ) -> Annotated[NDArray[numpy.int64], dict(shape=(None,))]:
        """Filter rows [start, stop) at SIMD level (0 scalar, 1 AVX2, 2 AVX-512)."""

    def vwap(self) -> Annotated[NDArray[numpy.uint8], dict(shape=(None,))]:
        """The E executions' sums per locate, as VWAP_DTYPE bytes."""

    def column_bytes(self, name: str) -> Annotated[NDArray[numpy.uint8], dict(shape=(None,))]:
        """One column's bytes (a view; the object stays alive while it lives)."""

def columns_adds_above_aos(
    events: object, key: int, above: int
) -> Annotated[NDArray[numpy.int64], dict(shape=(None,))]:
    """The filter over the EVENT_DTYPE records themselves (array of structs)."""

def columns_vwap_aos(events: object) -> Annotated[NDArray[numpy.uint8], dict(shape=(None,))]:
    """
    The aggregate over the EVENT_DTYPE records themselves (array of structs).
    """

def columns_cpu_level() -> int:
    """The widest filter kernel this CPU runs: 0 scalar, 1 AVX2, 2 AVX-512."""

FEED_MAX_DATAGRAM: int = 2048

FEED_MAX_PENDING: int = 1024

FEED_MAX_BATCH: int = 1024

FEED_MAX_HOLD: int = 16384

FEED_MAX_JUMP: int = 1048576

FEED_RESYNC_PACKETS: int = 3

class FeedSender:
    """Benchmark sender: pre-built packets, sendmmsg"""

    def __init__(
        self,
        raw: Annotated[
            NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
        starts: Annotated[
            NDArray[numpy.int64], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
        ends: Annotated[
            NDArray[numpy.int64], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
        first_seq: Annotated[
            NDArray[numpy.uint64], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
        counts: Annotated[
            NDArray[numpy.uint16], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
        port: int,
        session: bytes,
    ) -> None: ...
    @property
    def packets(self) -> int: ...
    def send(self, first: int, last: int, batch: int) -> int:
        """Send packets [first, last); returns how many"""

    def control(self, next_seq: int, end: bool) -> None: ...

class FeedReceiver:
    """MoldUDP64 receiver: recvmmsg batches, gap recovery"""

    def __init__(
        self,
        port: int,
        request_port: int,
        start: int,
        timeout_ns: int,
        retries: int,
        batch: int,
        rcvbuf: int,
        spin: bool,
        busy_poll_us: int,
        session: bytes,
        hold: int,
        max_jump: int,
    ) -> None:
        """session: 10 bytes, or b"" to adopt the first data packet's"""

    @property
    def port(self) -> int: ...
    @property
    def request_port(self) -> int: ...
    @request_port.setter
    def request_port(self, arg: int, /) -> None: ...
    @property
    def batch(self) -> int: ...
    @property
    def busy_poll_error(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def batch_datagrams(self) -> int: ...
    def poll(self, timeout_ns: int) -> int:
        """Wait up to timeout_ns, then read until the socket is empty"""

    def on_packet(
        self,
        payload: Annotated[
            NDArray[numpy.uint8], dict(shape=(None,), order="C", device="cpu", writable=False)
        ],
        t_kernel: int,
        t_user: int,
    ) -> None:
        """Account for one datagram's payload"""

    def check_gap(self, now_ns: int) -> None: ...
    def out(self) -> Annotated[NDArray[numpy.uint8], dict(shape=(None,), writable=False)]: ...
    def times(
        self,
    ) -> Annotated[NDArray[numpy.int64], dict(shape=(None, None), writable=False)]: ...
    def take(self) -> None: ...
    def stats(self) -> list[int]: ...
    def missing(self) -> int: ...
    def done(self) -> bool: ...
    def held(self) -> int: ...
    @property
    def expected(self) -> int: ...
    @property
    def known(self) -> int: ...
    @property
    def request_deadline(self) -> int: ...

class TableBuilder:
    """Research tables from ITCH (native/tables.hpp)."""

    def __init__(
        self, on: Sequence[bool], symbols: Sequence[bytes], depth: int, lobster: int = 0
    ) -> None: ...
    def feed(self, buffer: object) -> tuple[int, int, int, int]:
        """
        Read whole framed records; returns (consumed, error code, type, length).
        """

    def take(self) -> list[list[tuple[str, numpy.typing.NDArray[numpy.uint8]]]]:
        """
        Every table's columns since the last take(): [[(name, uint8 bytes), ...], ...].
        """

    def set_lookahead_stages(self, stages: int) -> None:
        """Test hook: run the first `stages` of the three look-ahead stages."""

    def set_lookahead(self, on: bool) -> None:
        """Benchmark hook: look ahead by the working set (the default) or never."""

    @property
    def messages(self) -> int: ...
    def counters(self) -> tuple[list[int], int, int, int]:
        """(anomalies by kind, locked episodes, crossed episodes, live orders)"""

class LayoutMap:
    """Chapter 8: the book over a std::map of levels."""

    def __init__(self, initial_orders: int = 65536, max_orders: int = 2147483648) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

    def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) -> tuple[int, int]:
        """
        Like apply (the same loop), through this layout's exported
        twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns
        (n_fills, n_rejects).
        """

    def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]:
        """
        Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's
        own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,
        max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).
        """

class LayoutVector:
    """Chapter 8: the book over a sorted vector of levels (best last)."""

    def __init__(self, initial_orders: int = 65536, max_orders: int = 2147483648) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

    def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) -> tuple[int, int]:
        """
        Like apply (the same loop), through this layout's exported
        twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns
        (n_fills, n_rejects).
        """

    def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]:
        """
        Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's
        own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,
        max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).
        """

class LayoutWindow:
    """Chapter 8: a flat window of levels + hierarchical bitset."""

    def __init__(self, initial_orders: int = 65536, max_orders: int = 2147483648) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

    def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) -> tuple[int, int]:
        """
        Like apply (the same loop), through this layout's exported
        twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns
        (n_fills, n_rejects).
        """

    def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]:
        """
        Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's
        own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,
        max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).
        """

class LayoutBitmap3:
    """Chapter 8: a flat window of levels + a fixed 3-level bitmap."""

    def __init__(self, initial_orders: int = 65536, max_orders: int = 2147483648) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

    def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) -> tuple[int, int]:
        """
        Like apply (the same loop), through this layout's exported
        twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns
        (n_fills, n_rejects).
        """

    def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]:
        """
        Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's
        own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,
        max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).
        """

class LayoutTreap:
    """Chapter 8: the book over an intrusive treap."""

    def __init__(self, initial_orders: int = 65536, max_orders: int = 2147483648) -> None: ...
    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

    def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) -> tuple[int, int]:
        """
        Like apply (the same loop), through this layout's exported
        twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns
        (n_fills, n_rejects).
        """

    def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]:
        """
        Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's
        own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,
        max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).
        """

class LayoutCapped:
    """
    Chapter 8: levels by raw price, orders by raw id; refuses
    prices >= price_cap (bad_price) and ids >= id_cap (unknown_id).
    """

    def __init__(
        self, price_cap: int = 1048576, id_cap: int = 1048576, max_orders: int = 2147483648
    ) -> None: ...
    @property
    def price_cap(self) -> int:
        """Prices 1 .. price_cap-1 are accepted; others are bad_price."""

    @property
    def id_cap(self) -> int:
        """Ids 0 .. id_cap-1 are accepted; others are unknown_id."""

    def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) -> list[Fill]:
        """Add a limit order; returns the fills it caused (the remainder rests)."""

    def add_market(self, order_id: int, side: Side | int, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side; returns (fills, unfilled qty). Never rests."""

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the qty removed."""

    def reduce(self, order_id: int, qty: int) -> int:
        """Partially cancel (keeps priority); returns the qty left (0 = removed)."""

    def execute(self, order_id: int, qty: int) -> Fill:
        """
        A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).
        """

    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """
        The old order leaves; the new one (same side) enters, loses priority, may match.
        """

    def best_bid(self) -> tuple[int, int] | None:
        """(price, total qty) of the highest bid, or None."""

    def best_ask(self) -> tuple[int, int] | None:
        """(price, total qty) of the lowest ask, or None."""

    def depth(self, side: Side | int, levels: int) -> list[tuple[int, int, int]]:
        """Up to `levels` levels of one side as (price, qty, orders), best first."""

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        """(side, price, qty left) of a resting order, or None."""

    def __len__(self) -> int:
        """Number of resting orders."""

    def clear(self) -> None:
        """Remove every order, keeping the allocated capacity (for benchmarks)."""

    def apply(
        self, ops: numpy.typing.NDArray[numpy.void]
    ) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
        """
        Apply an OPS_DTYPE array in C++ with the GIL released; returns
        (fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a
        rejected op.
        """

    def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[int, int, float]:
        """
        Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop
        timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).
        """

    def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) -> tuple[int, int]:
        """
        Like apply (the same loop), through this layout's exported
        twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns
        (n_fills, n_rejects).
        """

    def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]:
        """
        Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's
        own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,
        max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).
        """

SHARD_WORKERS_MAX: int = 64

def shard_owner(locate: int, n: int) -> int:
    """The worker (0..n-1) that owns a locate."""

def broadcast_stress(items: int, capacity: int, readers: int) -> tuple[list[int], bool]:
    """
    items 0..items-1 through a BroadcastRing to `readers` threads:
    (items each reader saw, every reader saw them in order).
    """

def broadcast_slots_offset(capacity: int, readers: int) -> int:
    """
    Where a new broadcast ring's slots start, modulo 64 bytes (0: line aligned).
    """

class Shard:
    """One writer, N book workers (native/shard.hpp)."""

    def __init__(
        self, mode: str, design: str, workers: int, capacity: int, wait: str, writer_only: bool
    ) -> None: ...
    def run(self, buffer: object) -> None:
        """
        Decode a bytes-like ITCH buffer and shard it over the workers (GIL released).
        """

    def fills(self) -> numpy.typing.NDArray[numpy.void]:
        """Every worker's fills in stream order (FILL_DTYPE)."""

    def raw_counts(self) -> tuple[list[int], list[int], list[int], int, int]:
        """
        (events by type byte, anomalies by kind, rejects by reason, fills, volume), merged.
        """

    def books_csv(self, worker: int) -> str:
        """One worker's books CSV."""

    def live_orders(self, worker: int) -> int: ...
    def stats(self) -> dict[str, Any]:
        """The writer's and each worker's counts, after run()."""

class EntryServerCore:
    """Chapter 12's order-entry server (native/entry.hpp): one thread, epoll"""

    def __init__(
        self,
        users: Sequence[str],
        passwords: Sequence[str],
        symbols: Sequence[str],
        session: str,
        heartbeat_ms: int,
        idle_timeout_ms: int,
        login_timeout_ms: int,
        max_sessions: int,
        prelogin_max: int,
        out_limit: int,
        fixed_clock: bool,
        sndbuf: int,
        port: int,
        itch_out: str = "",
    ) -> None: ...
    @property
    def port(self) -> int: ...
    def run(self) -> None:
        """The event loop, until stop() (GIL released)"""

    def stop(self) -> None:
        """Ask run() to end (any thread)"""

    def timings(self) -> list[int]:
        """
        Server-side read-to-write times in ns, one per read (after run() returned)
        """

    def stats(self) -> list[int]: ...

def run_load_native(
    port: int,
    sessions: int,
    requests: int,
    open: bool,
    rate: float,
    window: int,
    cancel_share: float,
    replace_share: float,
    seed: int,
    timeout: float,
    first_user: int,
    pace: bool,
) -> tuple[
    int,
    int,
    float,
    int,
    int,
    Annotated[NDArray[numpy.int64], dict(shape=(None,))],
    Annotated[NDArray[numpy.int64], dict(shape=(None,))],
]:
    """
    Chapter 12's load client in C++ (native/load.hpp), GIL released.

    Returns (sent, acks, seconds, unanswered, late_sends, latencies_ns, send_delays_ns).
    """

TRADE_ORDER_BYTES: int = 50

TRADE_IO_URING: bool = True

class TradeStrategy:
    """contract/trade.py's rule and risk checks"""

    def __init__(
        self,
        imbalance: int,
        qty: int,
        cooldown_ns: int,
        max_per_second: int,
        max_open: int,
        max_orders: int,
    ) -> None: ...
    def decide(
        self,
        locate: int,
        stock: bytes,
        ts: int,
        bid: int,
        bid_qty: int,
        ask: int,
        ask_qty: int,
        open_orders: int,
    ) -> bytes:
        """The framed order after one book message, or b''"""

    def stats(self) -> list[int]: ...
    @property
    def tripped(self) -> bool: ...
    @tripped.setter
    def tripped(self, arg: bool, /) -> None: ...
    @property
    def urn(self) -> int: ...

class Trader:
    """Tick to trade: feed -> book -> strategy -> OUCH, in C++"""

    def __init__(
        self,
        port: int,
        request_port: int,
        start: int,
        timeout_ns: int,
        retries: int,
        batch: int,
        rcvbuf: int,
        spin: bool,
        session: bytes,
        hold: int,
        max_jump: int,
        order_fd: int,
        imbalance: int,
        qty: int,
        cooldown_ns: int,
        max_per_second: int,
        max_open: int,
        max_orders: int,
        path: int = 0,
    ) -> None: ...
    @property
    def port(self) -> int: ...
    def socket_to_book(self) -> list[int]:
        """(count, p50, p99, p99.9) ns, kernel receive to book, per datagram"""

    @property
    def request_port(self) -> int: ...
    @request_port.setter
    def request_port(self, arg: int, /) -> None: ...
    @property
    def bad_itch(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def datagrams(self) -> int: ...
    @property
    def stamp_cost_ns(self) -> int: ...
    @property
    def first_ns(self) -> int: ...
    @property
    def stop_ns(self) -> int: ...
    @property
    def clock(self) -> str: ...
    @property
    def stop(self) -> int: ...
    def run_until(self, until: int, begin: int, idle_ns: int, max_ns: int) -> int:
        """
        Run the loop until it stops or until `until` (CLOCK_REALTIME ns); the stop code
        """

    def feed_stats(self) -> list[int]: ...
    def missing(self) -> int: ...
    def trade_stats(self) -> list[int]: ...
    def rows(self) -> Annotated[NDArray[numpy.int64], dict(shape=(None, None))]:
        """One row per order: the STAGES stamps (0: not seen)"""

    def sent_log(self) -> bytes:
        """Every order sent, in order, as sent"""

    def books_csv(self) -> str: ...
