"""twinmatch optimized twins (C++20)"""

from collections.abc import Iterator
import enum

import numpy
import numpy.typing


COMPILER: str

BUILD_TYPE: str

class Side(enum.IntEnum):
    """Order side: BUY = 0, SELL = 1."""

    BUY = 0

    SELL = 1

class OrderRejected(ValueError):
    """An operation the book refused; the book is unchanged."""

    def __init__(self, order_id: int, reason: str) -> None: ...

class Fill:
    """
    One trade: compares equal to the tuple (resting_id, aggressor_id, price, qty, aggressor_side).
    """

    def __init__(self, resting_id: int, aggressor_id: int, price: int, qty: int, aggressor_side: Side) -> None: ...

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

    def __init__(self, window_levels: int = 262144, initial_orders: int = 65536) -> None: ...

    def stats(self) -> dict[str, int]:
        """Internals (window, pool, hash sizes) for tests and the book's tables."""

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

    def apply(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
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

class MapBook:
    """The std::map / std::list / std::unordered_map baseline, same API."""

    def __init__(self, initial_orders: int = 65536) -> None: ...

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

    def apply(self, ops: numpy.typing.NDArray[numpy.void]) -> tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]:
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
