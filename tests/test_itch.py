"""ITCH 5.0 decoding (chapter 3): one suite over both twins, plus differential checks.

Every behaviour is checked on both ``naive.itch`` and ``optimized.itch`` (the ``impl``
fixture); the differential tests feed the same bytes to both and require identical
events, counts and errors. itchfeed (pure Python and its C++ backend itchcpp) is the
independent cross-check of field values.
"""

from __future__ import annotations

import array
import gzip
import hashlib
import importlib
import importlib.util
import io
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import naive.itch as naive_itch
import optimized.itch as optimized_itch
import peers.itch_numpy as itch_numpy
from contract.dtypes import EVENT_DTYPE, EVENT_TYPES
from contract.itch_errors import ItchError
from optimized import _native
from tests.conftest import REAL_DATA, ROOT, SHARED
from twinmatch.itch_samples import random_record, random_stream, sample_day

REAL = REAL_DATA
REAL_ITCH = REAL / "stock-directory-sample.itch"
REAL_PCAP = REAL / "moldudp64-multiple-packets.pcap"
SPEC_TABLE = SHARED / "spec" / "itch50_table.py"

TWINS = {"naive": naive_itch, "optimized": optimized_itch}
Batch = tuple[np.ndarray, dict[str, int]]


@pytest.fixture(params=sorted(TWINS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return TWINS[request.param]


# ---------------------------------------------------------------- helpers

def outcome_decode(mod: ModuleType, data: bytes) -> tuple[bytes, dict[str, int], str | None]:
    """decode's outcome as comparable values: event bytes, counts, error (reason@offset)."""
    try:
        events, counts = mod.decode(data)
    except ItchError as exc:
        return exc.events.tobytes(), exc.counts, f"{exc.reason}@{exc.offset}: {exc}"
    return events.tobytes(), counts, None


def outcome_file(
    mod: ModuleType, path: Path, chunk_size: int
) -> tuple[list[tuple[bytes, dict[str, int]]], str | None]:
    """read_file's outcome: every batch yielded, then the error (or None)."""
    batches: list[tuple[bytes, dict[str, int]]] = []
    try:
        for events, counts in mod.read_file(path, chunk_size):
            assert events.dtype == EVENT_DTYPE
            batches.append((events.tobytes(), counts))
    except ItchError as exc:
        return batches, f"{exc.reason}@{exc.offset}: {exc}"
    return batches, None


def concat(batches: list[tuple[bytes, dict[str, int]]]) -> tuple[bytes, dict[str, int]]:
    total: dict[str, int] = {}
    for _, counts in batches:
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    return b"".join(b for b, _ in batches), dict(sorted(total.items()))


def assert_twins_agree_on(data: bytes) -> tuple[bytes, dict[str, int], str | None]:
    a = outcome_decode(naive_itch, data)
    b = outcome_decode(optimized_itch, data)
    assert a == b
    return a


# ---------------------------------------------------------------- layouts

def test_lengths_match_spec_table() -> None:
    if not SPEC_TABLE.exists():
        pytest.skip(f"spec table not found at {SPEC_TABLE}")
    spec = importlib.util.spec_from_file_location("itch50_table", SPEC_TABLE)
    assert spec is not None and spec.loader is not None
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    assert sorted(t.encode() for t in table.ORDER) == sorted(naive_itch.STRUCTS)
    for t in table.ORDER:
        assert naive_itch.FORMATS[t.encode()][0] == table.struct_fmt(t), t
        assert naive_itch.LENGTHS[ord(t)] == table.length(t), t


def test_cpp_length_table_matches_naive() -> None:
    assert optimized_itch.LENGTHS == naive_itch.LENGTHS
    assert _native.ITCH_EVENT_SIZE == EVENT_DTYPE.itemsize == 56


def test_event_dtype_layout() -> None:
    fields = EVENT_DTYPE.fields
    assert fields is not None
    for name, (dt, offset, *_) in fields.items():  # every field naturally aligned
        assert offset % dt.alignment == 0, name
    for name in ("type", "locate", "timestamp", "order_ref", "new_order_ref", "side",
                 "shares", "price", "match_number", "printable", "stock"):
        assert name in (EVENT_DTYPE.names or ())


# ---------------------------------------------------------------- worked examples

SPEC_A = bytes.fromhex("00244100010000" "1f1aced9f000" "000000000000002a" "42"
                       "00000064" "4141504c20202020" "0016ed24")


def test_spec_worked_example(impl: ModuleType) -> None:
    events, counts = impl.decode(SPEC_A)
    assert counts == {"A": 1}
    (e,) = events
    assert e["type"] == ord("A") and e["locate"] == 1
    assert e["timestamp"] == 34_200_000_000_000
    assert e["order_ref"] == 42 and e["side"] == ord("B") and e["shares"] == 100
    assert e["stock"] == b"AAPL    " and e["price"] == 1_502_500
    assert e["new_order_ref"] == 0 and e["match_number"] == 0 and e["printable"] == 0


def test_spec_example_record_and_encode() -> None:
    rec = naive_itch.parse_message(SPEC_A[2:])
    assert rec == naive_itch.AddOrder(1, 0, 34_200_000_000_000, 42, b"B", 100, b"AAPL    ",
                                      1_502_500)
    assert naive_itch.frame(rec) == SPEC_A
    # itchy's body vector: ref 1412, B, 100, ZXZZT, 1.0000
    body = bytes.fromhex("0000000000000584" "42" "00000064" "5a585a5a54202020" "00002710")
    rec2 = naive_itch.parse_message(b"A" + bytes(10) + body)
    assert isinstance(rec2, naive_itch.AddOrder)
    assert (rec2.order_ref, rec2.side, rec2.shares, rec2.stock.rstrip(), rec2.price) == (
        1412, b"B", 100, b"ZXZZT", 10_000)


# ---------------------------------------------------------------- real capture

def test_real_capture(impl: ModuleType) -> None:
    if not REAL_ITCH.exists():
        pytest.skip(f"real capture not found at {REAL_ITCH}")
    events, counts = impl.decode(REAL_ITCH.read_bytes())
    assert counts == {"H": 3, "R": 993, "S": 1, "Y": 3}
    assert len(events) == 997  # S, R and H make events; Y is only counted
    assert events[0]["type"] == ord("S") and events[0]["side"] == ord("O")
    directory = {int(e["locate"]): bytes(e["stock"]).rstrip() for e in events
                 if e["type"] == ord("R")}
    assert directory[13] == b"AAPL"
    assert np.all(np.diff(events["timestamp"].astype(np.int64)) >= 0)


def test_real_capture_twins_identical_field_by_field() -> None:
    if not REAL_ITCH.exists():
        pytest.skip(f"real capture not found at {REAL_ITCH}")
    a, ca = naive_itch.decode(REAL_ITCH.read_bytes())
    b, cb = optimized_itch.decode(REAL_ITCH.read_bytes())
    assert ca == cb
    for name in EVENT_DTYPE.names or ():
        assert np.array_equal(a[name], b[name]), name
    assert a.tobytes() == b.tobytes()  # padding included: both zero it


def test_real_capture_via_read_file(impl: ModuleType) -> None:
    if not REAL_ITCH.exists():
        pytest.skip(f"real capture not found at {REAL_ITCH}")
    whole, counts = impl.decode(REAL_ITCH.read_bytes())
    batches, error = outcome_file(impl, REAL_ITCH, 4096)
    assert error is None and len(batches) == 10
    assert concat(batches) == (whole.tobytes(), counts)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("type_char", sorted(t.decode() for t in naive_itch.STRUCTS))
def test_every_type_round_trips(impl: ModuleType, type_char: str) -> None:
    rng = random.Random(ord(type_char))
    for _ in range(50):
        rec = random_record(rng, type_char)
        raw = naive_itch.encode(rec)
        assert len(raw) == naive_itch.LENGTHS[ord(type_char)]
        assert naive_itch.parse_message(raw) == rec
        events, counts = impl.decode(naive_itch.frame(rec))
        assert counts == {type_char: 1}
        row = naive_itch.event_row(rec)
        if type_char in EVENT_TYPES:
            assert row is not None and len(events) == 1
            assert events[0].item() == row[:10] + (row[10].rstrip(b"\0"),)
            assert events[0]["type"] == ord(type_char)
            assert events[0]["locate"] == rec.locate
            assert events[0]["timestamp"] == rec.timestamp
        else:
            assert row is None and len(events) == 0


def test_event_fields_per_type() -> None:
    """The documented mapping (EVENT_DTYPE docstring) for the trickier types."""
    cls = naive_itch.CLASSES
    q = cls[b"Q"](7, 0, 5, 2**64 - 1, b"MSFT    ", 123, 99, b"O")
    c = cls[b"C"](7, 0, 5, 11, 22, 33, b"N", 44)
    u = cls[b"U"](7, 0, 5, 11, 12, 13, 14)
    h = cls[b"H"](7, 0, 5, b"AAPL    ", b"H", b" ", b"LUDP")
    data = b"".join(naive_itch.frame(r) for r in (q, c, u, h))
    for mod in TWINS.values():
        ev, _ = mod.decode(data)
        assert ev[0]["order_ref"] == 2**64 - 1 and ev[0]["printable"] == ord("O")
        assert ev[0]["match_number"] == 99 and ev[0]["price"] == 123
        assert ev[1]["printable"] == ord("N") and ev[1]["price"] == 44
        assert ev[1]["shares"] == 22 and ev[1]["match_number"] == 33
        assert (ev[2]["order_ref"], ev[2]["new_order_ref"], ev[2]["shares"]) == (11, 12, 13)
        assert ev[3]["side"] == ord("H") and ev[3]["stock"] == b"AAPL    "


def test_parse_message_errors() -> None:
    with pytest.raises(ItchError) as err:
        naive_itch.parse_message(b"z123")
    assert err.value.reason == "unknown_type"
    with pytest.raises(ItchError) as err:
        naive_itch.parse_message(SPEC_A[2:-1])
    assert err.value.reason == "bad_length"


# ---------------------------------------------------------------- the two C++ loops

@pytest.fixture
def portable_loop() -> Iterator[None]:
    """Force the portable C++ loop (not the AVX-512 VBMI one) for one test."""
    _native.itch_simd(False)
    try:
        yield
    finally:
        _native.itch_simd(True)


def both_loops(data: bytes) -> tuple[bytes, dict[str, int], str | None]:
    """decode's outcome from the SIMD loop and the portable loop; they must be equal."""
    fast = outcome_decode(optimized_itch, data)
    _native.itch_simd(False)
    try:
        portable = outcome_decode(optimized_itch, data)
    finally:
        _native.itch_simd(True)
    assert fast == portable
    return fast


def damaged_copies(data: bytes) -> Iterator[bytes]:
    """data with a bad record in the middle (zero length, wrong length, unknown type,
    a length >= 256) and with a cut tail: errors after many flushed batches of events."""
    cut = len(data) // 2
    off = 0
    while off < cut:  # walk the framing to a record boundary near the middle
        off += 2 + int.from_bytes(data[off:off + 2], "big")
    yield data[:off] + b"\x00\x00" + data[off:]
    yield data[:off] + b"\x00\x05A1234" + data[off:]
    yield data[:off] + b"\x00\x03z12" + data[off:]
    yield data[:off] + b"\x01\x00z" + bytes(255) + data[off:]
    yield data[:off] + b"\x01\x00" + bytes(10)
    yield data[:-3]


@pytest.mark.parametrize("size", [1, 127, 128, 129, 3000, 60_000])
def test_simd_and_portable_loops_identical(size: int) -> None:
    """Sizes around the 128-event staging buffer, and past the 1 MiB streaming threshold."""
    data = random_stream(random.Random(size), size)
    assert outcome_decode(naive_itch, data) == both_loops(data)
    for bad in damaged_copies(data):
        assert outcome_decode(naive_itch, bad) == both_loops(bad)


def test_simd_and_portable_loops_identical_on_a_day() -> None:
    data = sample_day(50_000, seed=5)
    assert outcome_decode(naive_itch, data) == both_loops(data)


# ---------------------------------------------------------------- generated streams

@pytest.mark.parametrize("seed", range(5))
def test_generated_random_streams_identical(seed: int) -> None:
    data = random_stream(random.Random(seed), 3000)
    events, counts, error = assert_twins_agree_on(data)
    assert error is None and sum(counts.values()) == 3000


def test_generated_day_identical() -> None:
    data = sample_day(20_000, seed=3)
    events, counts, error = assert_twins_agree_on(data)
    assert error is None and sum(counts.values()) == 20_000
    assert counts["A"] > counts["P"] > 0


def test_decode_accepts_any_bytes_like(impl: ModuleType, tmp_path: Path) -> None:
    data = sample_day(500, seed=4)
    want, counts = naive_itch.decode(data)
    path = tmp_path / "day.itch"
    path.write_bytes(data)
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        ev, c = impl.decode(mm)
        assert ev.tobytes() == want.tobytes() and c == counts
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        ev, c = impl.decode(buf)
        assert ev.tobytes() == want.tobytes() and c == counts


def test_empty_buffer(impl: ModuleType) -> None:
    events, counts = impl.decode(b"")
    assert len(events) == 0 and events.dtype == EVENT_DTYPE and counts == {}


# ---------------------------------------------------------------- bad input catalogue

def good(n: int = 40, seed: int = 9) -> bytes:
    return sample_day(n, seed=seed)


GOOD = good()
GZ_GOOD = gzip.compress(GOOD)
PCAP_BYTES = REAL_PCAP.read_bytes() if REAL_PCAP.exists() else (
    bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000") + bytes(64))


def corrupt_gzip(data: bytes) -> bytes:
    z = bytearray(data)
    z[len(z) // 2] ^= 0xFF  # inside the deflate stream
    return bytes(z)


# name -> (file bytes, expected error "reason@offset" or None, expected total records)
CATALOGUE: dict[str, tuple[bytes, str | None, int]] = {
    "empty": (b"", None, 0),
    "good": (GOOD, None, 40),
    "truncated_prefix": (GOOD + b"\x00", f"truncated_prefix@{len(GOOD)}", 40),
    "truncated_body": (GOOD + SPEC_A[:20], f"truncated_body@{len(GOOD)}", 40),
    "truncated_mid_body": (GOOD[:-3], None, 39),  # expected error filled in below
    "zero_length": (GOOD + b"\x00\x00" + SPEC_A, f"zero_length@{len(GOOD)}", 40),
    "length_type_mismatch": (GOOD + b"\x00\x23" + SPEC_A[2:-1] + SPEC_A,
                             f"bad_length@{len(GOOD)}", 40),
    "prefix_says_longer": (GOOD + b"\x00\x25" + SPEC_A[2:] + b"!",
                           f"bad_length@{len(GOOD)}", 40),
    "unknown_type": (GOOD + b"\x00\x05z1234" + b"\x00\x01\x00" + SPEC_A, None, 43),
    "unknown_type_long": (b"\x01\x00" + b"~" * 256 + SPEC_A, None, 2),
    "gzip": (GZ_GOOD, None, 40),
    "gzip_two_members": (GZ_GOOD + gzip.compress(SPEC_A), None, 41),
    "gzip_truncated": (GZ_GOOD[: len(GZ_GOOD) - 12], None, -1),
    "gzip_corrupt": (corrupt_gzip(GZ_GOOD), None, -1),
    "gzip_of_truncated_itch": (gzip.compress(GOOD[:-3]), None, 39),
    "pcap_as_itch": (PCAP_BYTES, "not_itch@0", 0),
    "gzip_pcap_as_itch": (gzip.compress(PCAP_BYTES), "not_itch@0", 0),
    "garbage": (bytes(random.Random(5).getrandbits(8) for _ in range(3000)), None, -1),
}
# GOOD ends with the 14-byte S (end of messages) record: cutting 3 bytes cuts its body.
CATALOGUE["truncated_mid_body"] = (GOOD[:-3], f"truncated_body@{len(GOOD) - 14}", 39)
CATALOGUE["gzip_of_truncated_itch"] = (gzip.compress(GOOD[:-3]),
                                       f"truncated_body@{len(GOOD) - 14}", 39)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 14, 37, 100, 4096, 1 << 20])
@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_bad_input_catalogue(tmp_path: Path, case: str, chunk: int) -> None:
    data, want_error, want_records = CATALOGUE[case]
    path = tmp_path / f"{case}.itch"
    path.write_bytes(data)
    got = {name: outcome_file(mod, path, chunk) for name, mod in TWINS.items()}
    assert got["naive"] == got["optimized"]  # identical batches and error, byte for byte
    batches, error = got["naive"]
    events, counts = concat(batches)
    if want_error is not None:
        assert error is not None and error.startswith(want_error + ":"), error
    if want_records >= 0:
        assert sum(counts.values()) == want_records
    if case.startswith("gzip_") and want_error is None and want_records < 0:
        assert error is not None and error.startswith("bad_gzip@"), error
    # Whatever the chunking, the batches add up to the same thing as one big chunk.
    whole = concat(outcome_file(naive_itch, path, 1 << 20)[0])
    assert (events, counts) == whole
    # Nothing accepted is lost: what was yielded is exactly the decode of the good prefix.
    plain = gzip.decompress(data) if data[:2] == b"\x1f\x8b" and error is None else None
    if plain is not None:
        assert (events, counts) == outcome_decode(naive_itch, plain)[:2]


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_bad_input_decode_identical(case: str) -> None:
    data = CATALOGUE[case][0]
    assert_twins_agree_on(data)


def test_error_keeps_what_came_before(impl: ModuleType) -> None:
    data = GOOD + b"\x00\x00"
    with pytest.raises(ItchError) as err:
        impl.decode(data)
    exc = err.value
    assert isinstance(exc, ValueError) and exc.offset == len(GOOD)
    want, counts = naive_itch.decode(GOOD)
    assert exc.events.tobytes() == want.tobytes() and exc.counts == counts
    assert f"at byte {len(GOOD)}" in str(exc)


def test_read_file_error_after_everything_before(impl: ModuleType, tmp_path: Path) -> None:
    data = sample_day(3000, seed=2)
    cut = len(data) - 5
    path = tmp_path / "cut.itch"
    path.write_bytes(data[:cut])
    batches, error = outcome_file(impl, path, 1000)
    assert error is not None and error.startswith("truncated_body@")
    offset = int(error.split("@")[1].split(":")[0])
    assert concat(batches) == outcome_decode(naive_itch, data[:offset])[:2]
    assert len(batches) > 10


@pytest.mark.parametrize("damage", ["cut", "bad_length", "none"])
def test_read_file_big_chunks_read_ahead(impl: ModuleType, tmp_path: Path, damage: str) -> None:
    """Chunks of 1 MiB and more: the optimized reader reads the next one on a thread while
    this one decodes. The batches and the error (in a later chunk: the day is ~3 chunks)
    are the naive twin's, and closing the generator early waits for the read under way."""
    data = bytearray(sample_day(100_000, seed=5))
    if damage == "cut":
        data = data[:-5]
    elif damage == "bad_length":
        off = 0
        while off < 2 << 20:  # the first record past 2 MiB: its A gets a wrong length
            off += 2 + int.from_bytes(data[off:off + 2], "big")
        data[off:off + 2] = (999).to_bytes(2, "big")
    path = tmp_path / "day.itch"
    path.write_bytes(bytes(data))
    chunk = 1 << 20
    assert len(data) > 2 * chunk
    got = outcome_file(impl, path, chunk)
    assert got == outcome_file(naive_itch, path, chunk)
    assert (got[1] is None) == (damage == "none") and len(got[0]) >= 2
    it = impl.read_file(path, chunk)
    next(it)
    it.close()  # a read of the next chunk is under way: waited for, no error


def test_read_buffers_reused_safely(tmp_path: Path) -> None:
    """The optimized reader's buffers go back to a spare pair for the next read in this
    process: a read after one closed early, reads of two different files one after the
    other, and two at once on two threads all give the naive twin's batches (no byte of
    one file's buffer shows up in another's)."""
    import optimized.itch as opt
    chunk = 1 << 20
    paths = []
    for seed in (6, 7):
        path = tmp_path / f"day{seed}.itch"
        path.write_bytes(sample_day(60_000, seed=seed))
        paths.append(path)
    want = [outcome_file(naive_itch, p, chunk) for p in paths]
    it = opt.read_file(paths[0], chunk)
    next(it)
    it.close()  # type: ignore[attr-defined]
    assert [outcome_file(opt, p, chunk) for p in paths] == want
    assert [outcome_file(opt, p, chunk) for p in reversed(paths)] == want[::-1]
    got: list[Any] = [None, None]

    def read(k: int) -> None:
        got[k] = outcome_file(opt, paths[k], chunk)
    threads = [threading.Thread(target=read, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert got == want


def test_bad_chunk_size(impl: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "x.itch"
    path.write_bytes(SPEC_A)
    with pytest.raises(ValueError):
        list(impl.read_file(path, 0))


def test_gzip_detected_by_magic_not_name(impl: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "looks_plain.itch"
    path.write_bytes(GZ_GOOD)
    assert concat(outcome_file(impl, path, 64)[0]) == outcome_decode(naive_itch, GOOD)[:2]


# ---------------------------------------------------------------- differential (hypothesis)

def frames_and_garbage() -> st.SearchStrategy[bytes]:
    valid = st.builds(
        lambda seed, t: naive_itch.frame(random_record(random.Random(seed), t)),
        st.integers(0, 2**32), st.sampled_from(sorted(t.decode() for t in naive_itch.STRUCTS)))
    framed_unknown = st.builds(
        lambda t, body: len(body).to_bytes(2, "big") + bytes([t]) + body[1:] if body else b"",
        st.sampled_from([0, 1, ord("a"), ord("z"), 200, 255]), st.binary(min_size=1,
                                                                         max_size=60))
    garbage = st.binary(max_size=12)
    piece = st.one_of(valid, valid, valid, framed_unknown, garbage)
    return st.lists(piece, max_size=30).map(b"".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=frames_and_garbage())
def test_differential_decode(data: bytes) -> None:
    assert_twins_agree_on(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=frames_and_garbage(), chunk=st.integers(1, 200), gz=st.booleans())
def test_differential_read_file(tmp_path: Path, data: bytes, chunk: int, gz: bool) -> None:
    path = tmp_path / "h.itch"
    path.write_bytes(gzip.compress(data) if gz else data)
    a = outcome_file(naive_itch, path, chunk)
    b = outcome_file(optimized_itch, path, chunk)
    assert a == b
    # read_file over a file agrees with decode over the same bytes (bar pcap-like heads).
    if data[:4] not in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                        b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a"):
        ev, counts, err = outcome_decode(naive_itch, data)
        assert concat(a[0]) == (ev, counts)
        assert (a[1] is None) == (err is None)
        if err is not None and a[1] is not None:
            assert a[1] == err


# ---------------------------------------------------------------- itchfeed cross-check

# itchfeed's attribute names for each type's body fields, in wire order (after the header).
ITCHFEED_FIELDS: dict[str, tuple[str, ...]] = {
    "S": ("event_code",),
    "R": ("stock", "market_category", "financial_status_indicator", "round_lot_size",
          "round_lots_only", "issue_classification", "issue_sub_type", "authenticity",
          "short_sale_threshold_indicator", "ipo_flag", "luld_ref", "etp_flag",
          "etp_leverage_factor", "inverse_indicator"),
    "H": ("stock", "trading_state", "reserved", "reason"),
    "Y": ("stock", "reg_sho_action"),
    "L": ("mpid", "stock", "primary_market_maker", "market_maker_mode",
          "market_participant_state"),
    "V": ("level1_price", "level2_price", "level3_price"),
    "W": ("breached_level",),
    "K": ("stock", "ipo_release_time", "ipo_release_qualifier", "ipo_price"),
    "J": ("stock", "auction_collar_reference_price", "upper_auction_collar_price",
          "lower_auction_collar_price", "auction_collar_extention"),
    "h": ("stock", "market_code", "operational_halt_action"),
    "A": ("order_reference_number", "buy_sell_indicator", "shares", "stock", "price"),
    "F": ("order_reference_number", "buy_sell_indicator", "shares", "stock", "price",
          "attribution"),
    "E": ("order_reference_number", "executed_shares", "match_number"),
    "C": ("order_reference_number", "executed_shares", "match_number", "printable",
          "execution_price"),
    "X": ("order_reference_number", "cancelled_shares"),
    "D": ("order_reference_number",),
    "U": ("order_reference_number", "new_order_reference_number", "shares", "price"),
    "P": ("order_reference_number", "buy_sell_indicator", "shares", "stock", "price",
          "match_number"),
    "Q": ("shares", "stock", "cross_price", "match_number", "cross_type"),
    "B": ("match_number",),
    "I": ("paired_shares", "imbalance_shares", "imbalance_direction", "stock", "far_price",
          "near_price", "current_reference_price", "cross_type", "variation_indicator"),
    "N": ("stock", "interest_flag"),
    "O": ("stock", "open_eligibility_status", "minimum_allowable_price",
          "maximum_allowable_price", "near_execution_price", "near_execution_time",
          "lower_price_range_collar", "upper_price_range_collar"),
}


def itchfeed_parsers() -> Iterator[tuple[str, Callable[[bytes], Iterator[Any]]]]:
    """itchfeed's parsers: its C++ backend (itchcpp) and its pure-Python one, when present."""
    try:
        import itchcpp

        yield "itchcpp", itchcpp.MessageParser().parse_stream
    except ImportError:
        pass
    os.environ.setdefault("ITCH_NO_CPP", "1")  # only effective if itch is not imported yet
    try:
        import itch
        import itch.parser
    except ImportError:
        return
    if not itch.USING_CPP_BACKEND:
        yield "itchfeed", itch.parser.MessageParser().parse_stream


def as_bytes(v: object) -> object:
    return v.encode("latin-1") if isinstance(v, str) else v


def test_itchfeed_cross_check() -> None:
    parsers = dict(itchfeed_parsers())
    if not parsers:
        pytest.skip("itchfeed/itchcpp not installed")
    rng = random.Random(11)
    # itchfeed stops at S/C (end of messages), so keep S event codes other than C.
    records = [r for r in (random_record(rng) for _ in range(3000))
               if not (isinstance(r, naive_itch.SystemEvent) and r.event_code == b"C")]
    streams = [b"".join(naive_itch.frame(r) for r in records), sample_day(5000, seed=8)[:-14]]
    if REAL_ITCH.exists():
        streams.append(REAL_ITCH.read_bytes())
    for data in streams:
        ours = []
        off = 0
        while off < len(data):
            n = int.from_bytes(data[off:off + 2], "big")
            ours.append(naive_itch.parse_message(data[off + 2:off + 2 + n]))
            off += 2 + n
        for name, parse in parsers.items():
            theirs = list(parse(data))
            assert len(theirs) == len(ours), name
            for rec, msg in zip(ours, theirs, strict=True):
                t = as_bytes(msg.message_type)
                assert t == naive_itch.TYPE_OF[type(rec)], name
                got = (msg.stock_locate, msg.tracking_number, msg.timestamp) + tuple(
                    as_bytes(getattr(msg, a)) for a in ITCHFEED_FIELDS[t.decode()])
                assert got == tuple(rec), (name, rec, msg)


def test_zero_length_and_mismatch_rejected_where_itchfeed_is_silent() -> None:
    """Records itchfeed would mis-frame (it reads a 1-byte length) are clear errors here."""
    data = GOOD + b"\x01\x00" + b"z" * 256
    assert assert_twins_agree_on(data)[2] is None  # a long unknown type: skipped, counted
    _, counts, _ = assert_twins_agree_on(data)
    assert counts.get("z") == 1


@pytest.mark.parametrize("damage", ["cut", "corrupt"])
def test_gzip_damage_delivers_everything_before(
    impl: ModuleType, tmp_path: Path, damage: str
) -> None:
    """Damaged gzip: every record zlib could recover arrives, whatever the chunking."""
    data = sample_day(20_000, seed=1)
    z = gzip.compress(data)
    path = tmp_path / "bad.gz"
    path.write_bytes(z[: len(z) // 2] if damage == "cut" else corrupt_gzip(z))
    results = [outcome_file(impl, path, chunk) for chunk in (1000, 4096, 1 << 20)]
    assert len({r[1] for r in results}) == 1  # the same error at the same offset
    assert len({repr(concat(r[0])) for r in results}) == 1  # the same records delivered
    error = results[0][1]
    assert error is not None
    offset = int(error.split("@")[1].split(":")[0])
    assert 0 < offset < len(data)
    if damage == "cut":  # zlib recovered data[:offset] exactly: all its whole records arrive
        assert error.startswith("bad_gzip@")
        events, counts = concat(results[0][0])
        scanned = naive_itch.scan(data[:offset])
        assert (events, counts) == (scanned[0].tobytes(), scanned[1])
        assert offset - scanned[2] < 60  # only the record cut by the damage is missing


# ---------------------------------------------------------------- numpy big-endian variant

def test_numpy_variant_matches_naive() -> None:

    inputs = [sample_day(5000, seed=5), random_stream(random.Random(6), 2000), b"", SPEC_A]
    inputs += [data for data, _, _ in CATALOGUE.values()]
    rng = random.Random(7)
    inputs += [rng.randbytes(rng.randrange(0, 100)) for _ in range(300)]
    if REAL_ITCH.exists():
        inputs.append(REAL_ITCH.read_bytes())
    for data in inputs:
        assert outcome_decode(itch_numpy, data) == outcome_decode(naive_itch, data)


@settings(max_examples=200, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=frames_and_garbage())
def test_portable_loop_differential(portable_loop: None, data: bytes) -> None:
    """The hypothesis differential again, through the portable C++ loop."""
    assert_twins_agree_on(data)


# ---------------------------------------------------------------- streams: FIFOs, pipes, stdin

STREAM_CASES = ("empty", "good", "gzip", "gzip_two_members", "truncated_mid_body",
                "zero_length", "pcap_as_itch", "unknown_type_long")


def write_in_thread(path: str | Path, data: bytes) -> threading.Thread:
    """Write ``data`` into a FIFO or pipe from a thread: opening a FIFO to write waits for
    its reader, and a reader that stops early (an error) closes the pipe under the writer."""
    def write() -> None:
        try:
            with open(path, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("case", STREAM_CASES)
def test_read_file_from_a_fifo(impl: ModuleType, tmp_path: Path, case: str) -> None:
    """A FIFO is read once, in chunks: nothing is eaten by looking for the gzip magic (the
    naive twin lost its first bytes) and nothing is skipped for having size 0 (the
    optimized one mapped it and reported no messages)."""
    data = CATALOGUE[case][0]
    regular = tmp_path / "feed.itch"
    regular.write_bytes(data)
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    writer = write_in_thread(fifo, data)
    got = outcome_file(impl, fifo, 37)
    writer.join(timeout=60)
    assert got == outcome_file(naive_itch, regular, 37)
    if case == "good":
        assert sum(concat(got[0])[1].values()) == 40


def test_read_file_from_process_substitution(impl: ModuleType) -> None:
    """``<(cat day.itch)`` hands the program /dev/fd/N, a pipe."""
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as f:  # the writer owns its end and closes it
            f.write(GZ_GOOD)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        got = outcome_file(impl, Path(f"/dev/fd/{r}"), 100)
    finally:
        os.close(r)
        writer.join(timeout=60)
    assert concat(got[0]) == outcome_decode(naive_itch, GOOD)[:2] and got[1] is None


def test_read_file_from_an_open_stream(impl: ModuleType) -> None:
    got = [(e.tobytes(), c) for e, c in impl.read_file(io.BytesIO(GZ_GOOD), 64)]
    assert concat(got) == outcome_decode(naive_itch, GOOD)[:2]
    with pytest.raises(TypeError, match="a path, '-' .* or an open binary stream, got int"):
        list(impl.read_file(5))
    with pytest.raises(TypeError, match="got NoneType"):
        list(impl.read_file(None))


def stream_outcome(module: str, source: str, chunk: int) -> str:
    """read_file's outcome as one line (events digest, counts, error): the stdin test runs
    this in a child process reading ``-`` and compares it with a regular file's."""
    mod = importlib.import_module(module)
    digest = hashlib.sha256()
    total: dict[str, int] = {}
    error = None
    try:
        for events, counts in mod.read_file(source, chunk):
            digest.update(events.tobytes())
            for k, v in counts.items():
                total[k] = total.get(k, 0) + v
    except ItchError as exc:
        error = f"{exc.reason}@{exc.offset}: {exc}"
    return repr((digest.hexdigest(), dict(sorted(total.items())), error))


@pytest.mark.parametrize("case", ["good", "gzip", "truncated_mid_body", "zero_length"])
def test_read_file_from_stdin(impl: ModuleType, tmp_path: Path, case: str) -> None:
    data = CATALOGUE[case][0]
    regular = tmp_path / "feed.itch"
    regular.write_bytes(data)
    code = ("import sys; from tests.test_itch import stream_outcome;"
            " print(stream_outcome(sys.argv[1], '-', 37))")
    child = subprocess.run([sys.executable, "-c", code, impl.__name__], input=data,
                           capture_output=True, timeout=120, cwd=ROOT)
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout.decode().strip() == stream_outcome("naive.itch", str(regular), 37)


def test_read_file_dev_zero_is_a_clear_error(impl: ModuleType) -> None:
    """/dev/zero never ends: its first record has length 0, an error at byte 0 (the
    optimized twin used to map it, see size 0 and report nothing)."""
    with pytest.raises(ItchError, match="zero_length at byte 0") as err:
        list(impl.read_file("/dev/zero", 1 << 16))
    assert err.value.offset == 0 and err.value.reason == "zero_length"


SHRINK_CHILD = """
import os, sys, importlib
mod = importlib.import_module(sys.argv[1])
path, cut = sys.argv[2], int(sys.argv[3])
it = mod.read_file(path, 1 << 16)
events = len(next(it)[0])
os.truncate(path, cut)  # the file shrinks under the reader
try:
    for ev, _ in it:
        events += len(ev)
    print("no error", events)
except Exception as exc:
    print(type(exc).__name__, exc.reason, exc.offset, events)
"""


def test_file_shrinking_while_read_is_a_truncation_error(impl: ModuleType, tmp_path: Path,
                                                         ) -> None:
    """A file cut while it is being read: everything before the cut record is delivered,
    then truncated_body names that record. (A mapped file killed the process: SIGBUS. The
    child process keeps a crash from taking pytest with it.)"""
    data = sample_day(60_000, seed=8)
    off = 0
    while off < len(data) * 3 // 4:  # a record boundary three quarters in
        off += 2 + int.from_bytes(data[off:off + 2], "big")
    path = tmp_path / "shrinking.itch"
    path.write_bytes(data)
    child = subprocess.run([sys.executable, "-c", SHRINK_CHILD, impl.__name__, str(path),
                            str(off + 5)], capture_output=True, timeout=120, cwd=ROOT)
    assert child.returncode == 0, f"killed by signal {-child.returncode}" \
        if child.returncode < 0 else child.stderr.decode()
    want = len(naive_itch.decode(data[:off])[0])
    assert child.stdout.decode().split() == ["ItchError", "truncated_body", str(off), str(want)]


# ---------------------------------------------------------------- what the decoders accept

BAD_BUFFERS: dict[str, object] = {
    "None": None,
    "str": "AAPL",
    "int": 5,
    "float": 1.5,
    "list": [0, 36, 65],
    "tuple": (0, 36),
    "2-D array": np.zeros((2, 19), dtype=np.uint8),
    "non-contiguous array": np.zeros(40, dtype=np.uint8)[::2],
    "uint32 array": np.zeros(8, dtype=np.uint32),
    "float array": np.zeros(8),
    "memoryview of u16": memoryview(bytes(38)).cast("H"),
    "2-D memoryview": memoryview(bytes(38)).cast("B", shape=[2, 19]),
    "array('i')": array.array("i", [0, 1]),
}


def type_error(call: Callable[[], object]) -> str:
    with pytest.raises(TypeError) as err:
        call()
    return str(err.value)


@pytest.mark.parametrize("case", sorted(BAD_BUFFERS))
def test_decoders_refuse_what_is_not_bytes_alike(case: str) -> None:
    """Same TypeError, same words, from every decoder entry point of both twins (the C++
    one used to answer with nanobind's signature dump or a BufferError)."""
    bad = BAD_BUFFERS[case]
    words: set[str] = set()
    for mod in TWINS.values():
        words.add(type_error(lambda: mod.decode(bad)))  # noqa: B023 - called at once
        words.add(type_error(lambda: mod.scan(bad)))  # noqa: B023
    words.add(type_error(lambda: itch_numpy.decode(bad)))  # type: ignore[arg-type]
    words.add(type_error(lambda: optimized_itch.sum_bytes(bad)))  # type: ignore[arg-type]
    assert len(words) == 1, words
    assert words.pop().startswith("buffer must be one-dimensional contiguous bytes")


def test_decoders_accept_every_byte_buffer(impl: ModuleType) -> None:
    want = naive_itch.decode(GOOD)[0].tobytes()
    for ok in (GOOD, bytearray(GOOD), memoryview(GOOD), np.frombuffer(GOOD, np.uint8),
               np.frombuffer(GOOD, np.int8), memoryview(GOOD).cast("c"),
               np.frombuffer(b"x" + GOOD, np.uint8)[1:]):
        assert impl.decode(ok)[0].tobytes() == want


# ---------------------------------------------------------------- stock bytes are raw

HOSTILE_STOCKS = [b"\x00AB\xff \x00  ", b"\xe9T\x00\x00\x00\x00\x00\x00", b"        ",
                  b"\x00" * 8, b"A\tB\r\n\x7f\x80 ", b"ZZ      ", b"\xff" * 8, b" LEADING"]


def hostile_stream() -> bytes:
    recs: list[Any] = []
    for i, stock in enumerate(HOSTILE_STOCKS):
        recs.append(naive_itch.StockDirectory(i + 1, 0, 10 + i, stock, b"Q", b"N", 100, b"N",
                                              b"C", b"Z ", b"P", b"N", b"N", b"1", b"N", 0,
                                              b"N"))
        recs.append(naive_itch.StockTradingAction(i + 1, 0, 20 + i, stock, b"T", b" ",
                                                  b"    "))
        recs.append(naive_itch.AddOrder(i + 1, 0, 30 + i, 100 + i, b"B", 10, stock, 5000))
        recs.append(naive_itch.Trade(i + 1, 0, 40 + i, 0, b"B", 10, stock, 5000, 7))
        recs.append(naive_itch.CrossTrade(i + 1, 0, 50 + i, 10, stock, 5000, 8, b"O"))
    return b"".join(naive_itch.frame(r) for r in recs)


def test_stock_bytes_are_the_raw_wire_bytes(tmp_path: Path) -> None:
    """R, H, A, P, Q: NUL, bytes >= 0x80, control bytes, all spaces: every decoder hands
    back exactly the 8 wire bytes, unstripped and unpadded, byte-identical arrays (the
    report's readable form of a stock, replay.py's job, is built from these)."""
    data = hostile_stream()
    events, _ = naive_itch.decode(data)
    raw = events.view(np.uint8).reshape(-1, EVENT_DTYPE.itemsize)[:, 48:56]
    assert [bytes(r) for r in raw] == [s for s in HOSTILE_STOCKS for _ in range(5)]
    assert outcome_decode(optimized_itch, data) == outcome_decode(naive_itch, data)
    assert both_loops(data) == outcome_decode(naive_itch, data)
    assert itch_numpy.decode(data)[0].tobytes() == events.tobytes()
    path = tmp_path / "hostile.itch"
    path.write_bytes(data)
    for mod in TWINS.values():
        assert concat(outcome_file(mod, path, 50)[0])[0] == events.tobytes()


# ---------------------------------------------------------------- the command line on a pipe

def replay_json(args: list[str], stdin: bytes | None = None) -> dict[str, Any]:
    child = subprocess.run([sys.executable, "-m", "twinmatch", "replay", *args, "--json"],
                           input=stdin, capture_output=True, timeout=180, cwd=ROOT)
    assert child.returncode == 0, child.stderr.decode()
    report: dict[str, Any] = json.loads(child.stdout)
    return report


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_replay_reads_stdin_and_fifos(tmp_path: Path, twin: str) -> None:
    """``twinmatch replay -`` reads standard input, and a FIFO is sniffed without losing the
    bytes looked at: same counts as the regular file, for ITCH, gzip and PCAP."""
    day = sample_day(3000, seed=12)
    feeds = {"itch": day, "gz": gzip.compress(day)}
    if REAL_PCAP.exists():
        feeds["pcap"] = REAL_PCAP.read_bytes()
    for name, data in feeds.items():
        path = tmp_path / f"feed.{name}"
        path.write_bytes(data)
        want = replay_json([str(path), "--impl", twin])
        keys = ("messages", "by_type", "format", "live_orders", "fills")
        piped = replay_json(["-", "--impl", twin], stdin=data)
        assert {k: piped[k] for k in keys} == {k: want[k] for k in keys}, name
        fifo = tmp_path / f"{name}.fifo"
        os.mkfifo(fifo)
        writer = write_in_thread(fifo, data)
        from_fifo = replay_json([str(fifo), "--impl", twin])
        writer.join(timeout=60)
        assert {k: from_fifo[k] for k in keys} == {k: want[k] for k in keys}, name
        assert want["messages"] > 0


def test_sum_bytes_is_the_sum_of_words_at_every_length_and_offset() -> None:
    """The bandwidth ceiling's kernel (several accumulators, wide loads, a tail) adds the
    same 8-byte words as a plain loop would, whatever the length and alignment."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 1_200, dtype=np.uint8).tobytes()
    for start in range(0, 9):
        for n in (*range(0, 300), 511, 512, 513, 1_000):
            chunk = data[start:start + n]
            words = len(chunk) // 8
            want = sum(int.from_bytes(chunk[8 * k:8 * k + 8], "little") for k in range(words))
            want += sum(chunk[8 * words:])
            assert optimized_itch.sum_bytes(chunk) == want % 2**64, (start, n)
