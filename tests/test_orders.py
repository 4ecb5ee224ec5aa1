"""CSV orders and LOBSTER message files, both twins: same arrays or the same error."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive.orders as norders
import optimized.orders as oorders
from contract.dtypes import (
    LOBSTER_DTYPE,
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OPS_DTYPE,
)
from tests.conftest import REAL_DATA  # noqa: E402

REAL = REAL_DATA
LOBSTER_FILE = REAL / "lobster-AAPL-2012-06-21-message-10.csv"
IMPLS = {"naive": norders, "optimized": oorders}


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return IMPLS[request.param]


def outcome(mod: ModuleType, fn: str, data: bytes) -> Any:
    try:
        return getattr(mod, fn)(data).tolist()
    except mod.OrdersError as e:
        return ("error", str(e), e.line)


def agree(fn: str, data: bytes) -> Any:
    a, b = outcome(norders, fn, data), outcome(oorders, fn, data)
    assert a == b
    return a


# --- CSV --------------------------------------------------------------------------------------


def test_csv_ops(impl: ModuleType, tmp_path: Path) -> None:
    text = b"order_id,price,quantity,side\r\n1,1000,5,0\r\n\n2,0,7,1\n3,999,0,1\n"
    path = tmp_path / "o.csv"
    path.write_bytes(text)
    for source in (text, path, str(path), bytearray(text), memoryview(text)):
        ops = impl.read_csv(source)
        assert ops.dtype == OPS_DTYPE
        assert ops["op"].tolist() == [OP_LIMIT, OP_MARKET, OP_CANCEL]
        assert ops["order_id"].tolist() == [1, 2, 3]
        assert ops["price"].tolist() == [1000, 0, 999]
        assert ops["qty"].tolist() == [5, 7, 0]
        assert ops["side"].tolist() == [0, 1, 1]


def test_csv_header_optional_and_bom(impl: ModuleType) -> None:
    assert len(impl.read_csv(b"1,2,3,0")) == 1
    assert len(impl.read_csv(b"\xef\xbb\xbfid,price,qty,side\n1,2,3,0\n")) == 1
    assert len(impl.read_csv(b"")) == 0 and len(impl.read_csv(b"a,b,c,d\n")) == 0
    ops = impl.read_csv(b" 18446744073709551615 ,\t4294967295, 4294967295 ,1")
    assert ops.tolist() == [(2**64 - 1, 0, 2**32 - 1, 2**32 - 1, OP_LIMIT, 1)]


BAD_CSV = [
    (b"1,2,3", "line 2: expected 4 fields (order_id,price,quantity,side), got 3"),
    (b"1,2,3,0,9", "line 2: expected 4 fields (order_id,price,quantity,side), got 5"),
    (b"1,,3,0", "line 2: price: missing"),
    (b"1,abc,3,0", "line 2: price: not a number: 'abc'"),
    (b"1,1.5,3,0", "line 2: price: not a number: '1.5'"),
    (b"1,+5,3,0", "line 2: price: not a number: '+5'"),
    (b"1,2,-3,0", "line 2: quantity: negative: '-3'"),
    (b"-1,2,3,0", "line 2: order_id: negative: '-1'"),
    (b"1,4294967296,3,0", "line 2: price: out of range: '4294967296'"),
    (b"1,2,4294967296,0", "line 2: quantity: out of range: '4294967296'"),
    (b"18446744073709551616,2,3,0", "line 2: order_id: out of range: '18446744073709551616'"),
    (b"1,2,3,2", "line 2: side: must be 0 (buy) or 1 (sell): '2'"),
    (b"1,2,3,-1", "line 2: side: must be 0 (buy) or 1 (sell): '-1'"),
    (b"1,2,3,B", "line 2: side: not a number: 'B'"),
    (b"1,2,3,0\r\r", "line 2: side: not a number: '0\\r'"),
]


@pytest.mark.parametrize(("row", "message"), BAD_CSV)
def test_csv_bad_rows(impl: ModuleType, row: bytes, message: str) -> None:
    data = b"1,2,3,0\n" + row  # line 1 is good, the bad row is line 2
    with pytest.raises(impl.OrdersError) as e:
        impl.read_csv(data)
    assert str(e.value) == message and e.value.line == 2
    assert isinstance(e.value, ValueError)
    agree("read_csv", data)


def test_csv_line_numbers_count_blank_and_header_lines(impl: ModuleType) -> None:
    with pytest.raises(impl.OrdersError) as e:
        impl.read_csv(b"id,p,q,s\n\n1,2,3,0\n   \n1,2,3,x\n")
    assert e.value.line == 5


# --- LOBSTER ----------------------------------------------------------------------------------


def test_lobster_real_file(impl: ModuleType) -> None:
    if not LOBSTER_FILE.exists():
        pytest.skip(f"{LOBSTER_FILE.name} not found in {REAL}")
    msgs = impl.read_lobster(LOBSTER_FILE)
    assert msgs.dtype == LOBSTER_DTYPE and len(msgs) == 999
    first = msgs[0]
    assert first["time"] == 34_200_004_241_176  # 34200.004241176 s, exact in ns
    assert (first["type"], first["order_id"], first["size"]) == (1, 16113575, 18)
    assert (first["price"], first["direction"]) == (5853300, 1)
    assert np.all(np.diff(msgs["time"]) >= 0)
    counts = {int(k): int(v) for k, v in zip(*np.unique(msgs["type"], return_counts=True),
                                             strict=True)}
    assert counts == {1: 471, 3: 369, 4: 98, 5: 61}
    ops, skipped = impl.lobster_to_ops(msgs)
    assert skipped == {"hidden_execution": 61, "cross_trade": 0, "halt": 0, "other": 0}
    assert len(ops) == 999 - 61
    assert np.array_equal(ops, norders.lobster_to_ops(norders.read_lobster(LOBSTER_FILE))[0])


def test_lobster_to_ops_mapping(impl: ModuleType) -> None:
    data = (
        b"34200.5,1,10,100,1500000,1\n"
        b"34200.6,2,10,30,1500000,1\n"
        b"34200.7,4,10,20,1500000,1\n"
        b"34200.8,3,10,50,1500000,1\n"
        b"34200.9,1,11,5,1510000,-1\n"
        b"34201,5,0,7,1500000,-1\n"
        b"34202,6,0,9,1500000,1\n"
        b"34203,7,0,0,-1,-1\n"
    )
    msgs = impl.read_lobster(data)
    assert msgs["time"].tolist()[:2] == [34_200_500_000_000, 34_200_600_000_000]
    assert msgs["price"][-1] == -1
    ops, skipped = impl.lobster_to_ops(msgs)
    assert ops.tolist() == [
        (10, 0, 1500000, 100, OP_LIMIT, 0),
        (10, 0, 1500000, 30, OP_REDUCE, 0),
        (10, 0, 1500000, 20, OP_EXECUTE, 0),
        (10, 0, 1500000, 50, OP_CANCEL, 0),
        (11, 0, 1510000, 5, OP_LIMIT, 1),
    ]
    assert skipped == {"hidden_execution": 1, "cross_trade": 1, "halt": 1, "other": 0}
    with pytest.raises(TypeError):
        impl.lobster_to_ops(np.zeros(2, dtype=OPS_DTYPE))


BAD_LOBSTER = [
    (b"34200.1,1,5,10,100", "line 1: expected 6 fields (time,type,order_id,size,price,direction)"
     ", got 5"),
    (b"1,1,5,10,100,1\n,1,5,10,100,1", "line 2: time: missing"),
    (b"1,1,5,10,100,1\nx,1,5,10,100,1", "line 2: time: not a number: 'x'"),
    (b"1.,1,5,10,100,1", "line 1: time: not a number: '1.'"),
    (b"-1.5,1,5,10,100,1", "line 1: time: negative: '-1.5'"),
    (b"1.0000000001,1,5,10,100,1", "line 1: time: more than 9 decimal places: '1.0000000001'"),
    (b"9223372036.854775808,1,5,10,100,1", "line 1: time: out of range"),
    (b"1,8,5,10,100,1", "line 1: type: must be 1..7: '8'"),
    (b"1,0,5,10,100,1", "line 1: type: must be 1..7: '0'"),
    (b"1,1,-5,10,100,1", "line 1: order_id: negative: '-5'"),
    (b"1,1,5,4294967296,100,1", "line 1: size: out of range: '4294967296'"),
    (b"1,1,5,10,-100,1", "line 1: price: negative: '-100'"),
    (b"1,7,5,10,-9223372036854775809,1", "line 1: price: out of range"),
    (b"1,1,5,10,100,0", "line 1: direction: must be 1 (buy) or -1 (sell): '0'"),
    (b"1,1,5,10,100,buy", "line 1: direction: not a number: 'buy'"),
]


@pytest.mark.parametrize(("data", "message"), BAD_LOBSTER)
def test_lobster_bad_rows(impl: ModuleType, data: bytes, message: str) -> None:
    with pytest.raises(impl.OrdersError) as e:
        impl.read_lobster(data)
    assert str(e.value).startswith(message)
    agree("read_lobster", data)


def test_lobster_extremes(impl: ModuleType) -> None:
    msgs = impl.read_lobster(
        b"9223372036.854775807,7,18446744073709551615,4294967295,-9223372036854775808,-1\n"
    )
    assert msgs.tolist() == [(2**63 - 1, 2**64 - 1, -(2**63), 2**32 - 1, 7, -1)]


# --- the twins agree on random rows -----------------------------------------------------------

FIELD = st.one_of(
    st.integers(-(2**65), 2**65).map(str),
    st.sampled_from(["", " ", "0", "1", "-1", "-0", "+1", "1.5", ".5", "5.", "x", "00",
                     "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
                     "34200.123456789", "34200.1234567891", "9223372036.854775807"]),
    st.text(alphabet="0123456789-.,+ \t\rx", max_size=8),
)


@st.composite
def rows(draw: st.DrawFn, width: int) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        n = draw(st.sampled_from([width, width, width, width - 1, width + 1, 1]))
        lines.append(",".join(draw(FIELD) for _ in range(n)))
    sep = draw(st.sampled_from(["\n", "\r\n"]))
    return (sep.join(lines) + draw(st.sampled_from(["", sep]))).encode()


@settings(max_examples=400, deadline=None)
@given(rows(4))
def test_differential_csv(data: bytes) -> None:
    agree("read_csv", data)


@settings(max_examples=400, deadline=None)
@given(rows(6))
def test_differential_lobster(data: bytes) -> None:
    agree("read_lobster", data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_differential_random_bytes(data: bytes) -> None:
    agree("read_csv", data)
    agree("read_lobster", data)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**64 - 1),
                          st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**32 - 1),
                          st.integers(0, 255), st.integers(-128, 127)), max_size=20))
def test_differential_lobster_to_ops(records: list[tuple[int, ...]]) -> None:
    msgs = np.array(records, dtype=LOBSTER_DTYPE)
    a, b = norders.lobster_to_ops(msgs), oorders.lobster_to_ops(msgs)
    assert a[0].tolist() == b[0].tolist() and a[1] == b[1]
    c = oorders.lobster_to_ops(msgs[::2])  # a strided view: copied to contiguous first
    assert c[0].tolist() == norders.lobster_to_ops(msgs[::2])[0].tolist()


# --- byte-identical arrays, padding included ---------------------------------------------------

def dirty_heap(nbytes: int) -> None:
    """Leave freed memory full of 0xFF, so an array built on it shows any padding not set."""
    for _ in range(8):
        junk = np.full(nbytes, 0xFF, dtype=np.uint8)
        del junk


def test_arrays_are_byte_identical_padding_included(tmp_path: Path) -> None:
    """OPS_DTYPE has 6 padding bytes a record, LOBSTER_DTYPE 2: both twins' arrays must be
    equal as bytes and their padding zero (copies of slices used to carry heap leftovers)."""
    rows = b"".join(b"%d,%d,%d,%d\n" % (i, 100 + i % 7, i % 3, i % 2) for i in range(1, 3000))
    csv = b"order_id,price,quantity,side\n\n" + rows + b"\n\n\n"  # blank lines: count < lines
    lob = b"".join(b"34200.%09d,%d,%d,10,%d,%d\n" % (i, 1 + i % 7, i, 1000 + i,
                                                    1 if i % 2 else -1) for i in range(3000))
    path = tmp_path / "orders.csv"
    path.write_bytes(csv)
    for data, fn in ((csv, "read_csv"), (lob, "read_lobster"), (path, "read_csv")):
        dirty_heap(len(csv) * 8)
        a = getattr(norders, fn)(data)
        dirty_heap(len(csv) * 8)
        b = getattr(oorders, fn)(data)
        assert a.tobytes() == b.tobytes()
        pad = [o for o in range(a.dtype.itemsize)
               if not any(off <= o < off + a.dtype.fields[n][0].itemsize
                          for n in a.dtype.names for off in [a.dtype.fields[n][1]])]
        assert pad and not a.view(np.uint8).reshape(len(a), -1)[:, pad].any()
    msgs = norders.read_lobster(lob)
    dirty_heap(len(msgs) * 64)
    ops_a, skipped_a = norders.lobster_to_ops(msgs)
    dirty_heap(len(msgs) * 64)
    ops_b, skipped_b = oorders.lobster_to_ops(msgs)
    assert skipped_a == skipped_b and skipped_a["halt"] > 0
    assert ops_a.tobytes() == ops_b.tobytes()
    assert not ops_a.view(np.uint8).reshape(len(ops_a), -1)[:, 26:].any()


# --- sources: pipes, stdin, devices, and what is refused ------------------------------------

def test_read_from_a_fifo_and_an_open_stream(impl: ModuleType, tmp_path: Path) -> None:
    import io
    import os
    import threading

    data = b"\xef\xbb\xbforder_id,price,quantity,side\r\n1,100,10,0\r\n2,0,5,1\n3,100,0,0"
    want = norders.read_csv(data).tobytes()
    fifo = tmp_path / "orders.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert impl.read_csv(fifo).tobytes() == want
    writer.join(timeout=60)
    assert impl.read_csv(io.BytesIO(data)).tobytes() == want


def test_long_lines_pieces_and_line_numbers(impl: ModuleType) -> None:
    """Files are parsed a piece (about 1 MiB of whole lines) at a time; line numbers, the
    header and the first bad line are the same as for one whole buffer."""
    good = b"".join(b"%d,100,1,0\n" % i for i in range(1, 200_000))  # several pieces
    assert len(impl.read_csv(b"id,price,qty,side\n" + good)) == 199_999
    bad = good + b"7,x,1,0\n"
    with pytest.raises(impl.OrdersError, match="line 200000: price: not a number") as e:
        impl.read_csv(bad)
    assert e.value.line == 200_000
    long = good[:100] + b" " * (impl.MAX_LINE + 1) + b"\n" + b"5,x,1,0\n"
    with pytest.raises(impl.OrdersError, match=f"line 10: longer than {impl.MAX_LINE} bytes"):
        impl.read_csv(long)
    early = b"1,x,1,0\n" + long  # a bad line before the long one is reported first
    with pytest.raises(impl.OrdersError, match="line 1: price"):
        impl.read_csv(early)
    assert agree("read_csv", long) == agree("read_csv", long)


@pytest.mark.parametrize("fn", ["read_csv", "read_lobster"])
def test_devices_end_with_an_error(impl: ModuleType, fn: str) -> None:
    """/dev/zero is one endless line: refused after MAX_LINE bytes, not read for ever;
    /dev/urandom fails at its first bad line, before the next piece is read."""
    with pytest.raises(impl.OrdersError, match=f"line 1: longer than {impl.MAX_LINE}"):
        getattr(impl, fn)("/dev/zero")
    with pytest.raises(impl.OrdersError, match="line [0-9]+: "):
        getattr(impl, fn)("/dev/urandom")


BAD_SOURCES: dict[str, object] = {
    "None": None, "int": 5, "float": 2.5, "list": [b"1,1,1,0"],
    "2-D array": np.zeros((2, 4), dtype=np.uint8), "uint32 array": np.zeros(3, np.uint32),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_readers_refuse_what_is_not_a_source(case: str) -> None:
    """Same TypeError in both twins (open(5) would have read file descriptor 5)."""
    words = set()
    for mod in IMPLS.values():
        for fn in ("read_csv", "read_lobster"):
            with pytest.raises(TypeError) as err:
                getattr(mod, fn)(BAD_SOURCES[case])
            words.add(str(err.value))
    assert len(words) == 1, words


@pytest.mark.parametrize("bad", [None, [1, 2], np.zeros(2, dtype=OPS_DTYPE),
                                 np.zeros((2, 2), dtype=LOBSTER_DTYPE)])
def test_lobster_to_ops_refuses_alike(bad: object) -> None:
    words = set()
    for mod in IMPLS.values():
        with pytest.raises(TypeError, match="lobster_to_ops: expected") as err:
            mod.lobster_to_ops(bad)
        words.add(str(err.value))
    assert len(words) == 1, words
