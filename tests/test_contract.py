"""The twins keep the contract (contract/): its Protocols, and its codes in both languages.

* Protocols (contract/protocols.py): the assignments below are checked by ``mypy --strict``
  (part of ``make test``): a renamed method or a changed signature in either twin is a type
  error. At run time the test checks that every name of the contract exists on every twin.
* Codes and layouts: the C++ twins keep reject reasons, anomaly kinds, ITCH error reasons,
  op codes, sides and the record structs as enums and structs (native/dtypes.hpp,
  native/itch.hpp, native/market.hpp, native/pcap.hpp); the extension lists them
  (native/contract_bind.cpp) and :func:`test_the_cpp_codes_are_the_contracts` asserts
  they equal the Python tables. That is the one place a drift between the languages shows.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import naive.book
import optimized.book
from contract import dtypes, itch_errors, pcap
from contract.protocols import BookLike

# Checked statically by mypy: each twin is a BookLike.
_naive: BookLike = naive.book.Book()
_optimized: BookLike = optimized.book.Book()
_baseline: BookLike = optimized.book.MapBook()

CONTRACT = [name for name, _ in inspect.getmembers(BookLike, inspect.isfunction)
            if not name.startswith("_") or name == "__len__"]


@pytest.mark.parametrize("book_class", [naive.book.Book, optimized.book.Book,
                                        optimized.book.MapBook])
def test_every_contract_name_exists(book_class: type) -> None:
    missing = [name for name in CONTRACT if not callable(getattr(book_class, name, None))]
    assert not missing, f"{book_class.__qualname__} lacks {missing}"
    assert len(CONTRACT) >= 12


@pytest.mark.parametrize("module", [naive.book, optimized.book])
def test_module_names(module: object) -> None:
    for name in ("Side", "Fill", "OrderRejected", "BookFull", "Book"):
        assert hasattr(module, name), name
    assert issubclass(module.OrderRejected, ValueError)  # type: ignore[attr-defined]
    assert issubclass(module.BookFull, MemoryError)  # type: ignore[attr-defined]


def _layout(dtype: np.dtype) -> tuple[int, dict[str, int]]:
    assert dtype.fields is not None
    return dtype.itemsize, {name: int(dtype.fields[name][1]) for name in dtype.names or ()}


def test_the_cpp_codes_are_the_contracts() -> None:
    from optimized import _native

    cpp = _native.contract_tables()
    assert cpp["REASONS"] == list(dtypes.REASONS)  # dtypes.hpp: Reason, reason_name()
    assert cpp["ANOMALIES"] == list(dtypes.ANOMALIES)  # market.hpp: Anomaly
    # itch.hpp's Error has the codes the C++ scanner returns; the rest are Python-only
    # (not_itch, bad_gzip: the file readers; unknown_type: parse_message).
    n = len(cpp["ITCH_REASONS"])
    assert cpp["ITCH_REASONS"] == list(itch_errors.ITCH_REASONS[:n]) and n == 5
    assert cpp["OPS"] == {name: getattr(dtypes, name) for name in cpp["OPS"]}
    assert sorted(cpp["OPS"]) == sorted(n for n in dir(dtypes) if n.startswith("OP_"))
    assert cpp["SIDES"] == {"BUY": int(naive.book.Side.BUY), "SELL": int(naive.book.Side.SELL)}
    named = {"OPS_DTYPE": dtypes.OPS_DTYPE, "FILL_DTYPE": dtypes.FILL_DTYPE,
             "REJECT_DTYPE": dtypes.REJECT_DTYPE, "EVENT_DTYPE": dtypes.EVENT_DTYPE,
             "LOBSTER_DTYPE": dtypes.LOBSTER_DTYPE}
    assert set(cpp["LAYOUTS"]) == set(named)
    for name, dtype in named.items():
        assert tuple(cpp["LAYOUTS"][name]) == _layout(dtype), name
    assert cpp["PCAP_MAX_STREAMS"] == pcap.MAX_STREAMS


def test_the_cpp_pcap_statistics_are_the_contracts() -> None:
    """The C++ scanner's statistics and per-stream counts, by name and in order."""
    from naive.pcap import frame_udp, moldudp64_packet, pcap_bytes
    from optimized import _native

    scanner = _native.PcapScanner()
    data = pcap_bytes([frame_udp(moldudp64_packet("SESSION001", 1, [b"S" + bytes(11)]))])
    scanner.feed(np.frombuffer(data, dtype=np.uint8))
    assert list(scanner.stats()) == [*pcap.STAT_KEYS, "session"]
    streams = scanner.streams()
    assert len(streams) == 1 and list(streams[0]) == list(pcap.STREAM_KEYS)


def test_the_optimized_twins_own_codes_match_its_cpp() -> None:
    """Codes only the optimized twin has (C++ -> its Python face), kept in both languages."""
    import optimized.orders
    import optimized.pcap
    from optimized import _native

    cpp = _native.contract_tables()
    assert cpp["ORDERS_PROBLEMS"] == list(optimized.orders.PROBLEM_NAMES)  # orders.hpp
    assert cpp["PCAP_SCAN_ERRORS"] == list(optimized.pcap.SCAN_ERRORS)  # pcap.hpp: Error
