"""Hostile input at every public entry point, over both twins: the same outcome or a bug.

Beside the bad-input catalogue of each component's suite, this file throws what a careless
or malicious caller would at everything public (book, ITCH decode and read_file, pcap,
CSV / LOBSTER orders, market, pipeline, histogram, the generators, replay, the command
line): None, wrong types, numpy scalars, empty, truncated, random bytes, huge, negative
and NaN values, a directory, a device, a FIFO, a missing file. The rules (DESIGN.md, the
twins contract):

* both twins give the same outcome: the same result, or the same exception type with the
  same message (the contract asks for a message naming the offset, line or id);
* an error is one clear line, never nanobind's dump of the function's signatures;
* nothing crashes the process and nothing hangs.

Each (case, twin) runs in a worker subprocess, so a segfault or a hang costs that case
only: the worker is killed after ``UNIT_TIMEOUT`` seconds (``QUICK_TIMEOUT`` for the
FIFO and zero-chunk cases, which hang at once if they hang at all) and a new one carries on.
Cases that fail because of a defect another change is fixing are ``xfail(strict=True)``
with the defect named; once it is fixed they XPASS, which fails, and the marker goes.

The second half is a hypothesis differential test of the replay behind ``twinmatch
replay``: a small generated ITCH day, mutated (bytes flipped, inserted, deleted), replayed
by both twins in both modes: the same report (timing and memory aside), the same books
CSV, or the same error. ``make test`` runs a few dozen examples; ``make fuzz`` sets
TWINMATCH_FUZZ_EXAMPLES for a longer run.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import queue
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TWINS = ("naive", "optimized")
DIR_ENV = "TWINMATCH_HOSTILE_DIR"
UNIT_TIMEOUT = 20.0
# A call that blocks (a FIFO's open) or spins (a zero chunk size) does so at once on these
# tiny inputs: a short wait keeps the known hangs from slowing the suite.
QUICK_TIMEOUT = 4.0
STARTUP_TIMEOUT = 120.0
SIGNATURE_DUMP = "incompatible function arguments"
# Report fields that measure this run rather than describe the feed.
RUN_FIELDS = ("seconds", "messages_per_s", "ns_per_message", "peak_rss_mb", "impl", "file")


def _mod(twin: str, name: str) -> Any:
    import importlib

    return importlib.import_module(f"{twin}.{name}")


def _path(name: str) -> Path:
    """A file of the hostile fixture folder (made by ``make_files``)."""
    return Path(os.environ[DIR_ENV]) / name


_FIFOS = iter(range(10**9))


def _fed_fifo(content: str = "valid.itch") -> Path:
    """A new FIFO that a writer thread fills with a fixture file's bytes once a reader
    opens it: a stream, read once, as ``<(cat day.itch)`` is. (A FIFO nobody writes to
    blocks its reader's open() as it would block cat: that is the FIFO, not a hang.)"""
    path = _path(f"fifo-{next(_FIFOS)}")
    os.mkfifo(path)
    data = _path(content).read_bytes()

    def write() -> None:
        with contextlib.suppress(OSError), open(path, "wb") as f:
            f.write(data)  # a reader that stops early closes the pipe: EPIPE, ignored

    threading.Thread(target=write, daemon=True).start()
    return path


# ---- the fixture files ------------------------------------------------------------------


def make_files(folder: Path) -> None:
    """Every file the cases read: good ones, and each way a file can be bad."""
    from twinmatch import gen

    folder.mkdir(parents=True, exist_ok=True)
    raw, _ = gen.market_day_bytes(80, 5, 3)
    (folder / "dir").mkdir(exist_ok=True)
    if not (folder / "fifo").exists():
        os.mkfifo(folder / "fifo")
    (folder / "empty").write_bytes(b"")
    rng = random.Random(12)
    (folder / "random.bin").write_bytes(b"\x00" + bytes(rng.randrange(256) for _ in range(300)))
    (folder / "valid.itch").write_bytes(raw)
    (folder / "truncated.itch").write_bytes(raw[:-3])
    (folder / "zero_length.itch").write_bytes(raw[:40] + b"\x00\x00" + raw[40:])
    junk = bytes(rng.randrange(256) for _ in range(64))
    (folder / "bad.gz").write_bytes(b"\x1f\x8b\x08\x00" + junk)
    (folder / "truncated.gz").write_bytes(gzip.compress(raw, mtime=0)[:-20])
    pcap = gen.pcap_from_itch(raw)
    (folder / "valid.pcap").write_bytes(pcap)
    (folder / "truncated.pcap").write_bytes(pcap[:-7])
    (folder / "header_only.pcap").write_bytes(pcap[:24])
    (folder / "bad_header.pcap").write_bytes(pcap[:4] + b"\xff" * 20)
    (folder / "random_records.pcap").write_bytes(
        pcap[:24] + bytes(rng.randrange(256) for _ in range(200)))
    texts = {
        "good.csv": "order_id,price,quantity,side\n1,1000,5,0\n2,1000,3,1\n",
        "bad_side.csv": "order_id,price,quantity,side\n1,100,5,9\n",
        "negative.csv": "order_id,price,quantity,side\n-1,100,5,0\n",
        "nan.csv": "order_id,price,quantity,side\n1,nan,5,0\n",
        "huge.csv": "order_id,price,quantity,side\n1,100,99999999999999999999999,0\n",
        "short_row.csv": "order_id,price,quantity,side\n1,100,5\n",
        "binary.csv": "order_id,price,quantity,side\n1,1\x00\xff,5,0\n",
        "good_lobster.csv": "34200.1,1,7,100,1000000,1\n34200.2,3,7,100,1000000,1\n",
        "bad_lobster.csv": "34200.1,1,7,100,1000000,2\n",
        "nan_lobster.csv": "nan,1,7,100,1000000,1\n",
        "huge_lobster.csv": "34200.1,1,7,100,99999999999999999999,1\n",
    }
    for name, text in texts.items():
        (folder / name).write_bytes(text.encode("latin-1"))


# ---- normalising results so the twins can be compared ----------------------------------


def normal(value: Any) -> Any:
    """A JSON-able picture of a result: arrays as field lists, Fills as tuples."""
    if isinstance(value, np.ndarray):
        if value.dtype.names:
            return {"fields": list(value.dtype.names),
                    "rows": normal([list(row) for row in value.tolist()])}
        return {"values": normal(value.tolist())}
    if isinstance(value, np.generic):
        return normal(value.item())
    if hasattr(value, "resting_id") and hasattr(value, "aggressor_side"):
        return [int(value.resting_id), int(value.aggressor_id), int(value.price),
                int(value.qty), int(value.aggressor_side)]
    if isinstance(value, dict):
        return {str(k): normal(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [normal(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value
    if isinstance(value, bool | int | str) or value is None:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
    return f"<{type(value).__name__}>"


# The state of the object after the call (``_after``): a rejected call must change nothing.
_STATE: list[Any] = []


def outcome(fn: Callable[[], Any]) -> dict[str, Any]:
    """Run one call: its normalised result, or the exception's type and message (and the
    object's state after it, where the case records one)."""
    _STATE.clear()
    try:
        result: dict[str, Any] = {"kind": "ok", "value": normal(fn())}
    except BaseException as exc:  # noqa: BLE001 - the outcome is what we compare
        if isinstance(exc, KeyboardInterrupt):
            raise
        families = [b.__name__ for b in (TypeError, ValueError, OSError, OverflowError,
                                         RuntimeError, IndexError, KeyError, SystemExit)
                    if isinstance(exc, b)]
        result = {"kind": "raised", "type": type(exc).__name__, "family": families,
                  "message": str(exc)}
    if _STATE:
        result["state"] = normal(_STATE[-1])
    return result


# ---- the cases --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    run: Callable[[str], Any]  # the call, given the twin ("naive" or "optimized")
    xfail: str = ""            # the known defect, while it is being fixed elsewhere
    twins: bool = True         # False: one implementation (harness), run once


CASES: list[Case] = []


def case(id: str, run: Callable[[str], Any], xfail: str = "", twins: bool = True) -> None:
    assert all(c.id != id for c in CASES), id
    CASES.append(Case(id, run, xfail, twins))


def _book(twin: str) -> Any:
    return _mod(twin, "book").Book()


def _resting(twin: str) -> Any:
    b = _book(twin)
    b.add_limit(1, 0, 1000, 10)
    b.add_limit(2, 1, 1100, 10)
    return b


def _ops(rows: list[tuple[int, int, int, int, int, int]]) -> np.ndarray:
    from contract.dtypes import OPS_DTYPE, records

    return records(rows, OPS_DTYPE)


def _after(b: Any, call: Callable[[Any], Any]) -> Any:
    """The call's result; the book's state after it is recorded (an error must not
    change it)."""
    try:
        return call(b)
    finally:
        _STATE.append((len(b), b.depth(0, 10), b.depth(1, 10)))


def _on_book(twin: str, call: Callable[[Any], Any]) -> Any:
    return _after(_resting(twin), call)


def _call(module: str, function: str, twin: str, make: Callable[[], Any]) -> Any:
    """``<twin>.<module>.<function>(make())``."""
    return getattr(_mod(twin, module), function)(make())


def _file_bytes(name: str) -> bytes:
    return _path(name).read_bytes()


def _itch_all(twin: str, make: Callable[[], Any], chunk: Any = 1 << 12) -> Any:
    return list(_mod(twin, "itch").read_file(make(), chunk))


NAN = float("nan")
# Book: each bad argument of each operation.
for name, call in {
    "add_limit-id-none": lambda b: b.add_limit(None, 0, 1000, 1),
    "add_limit-id-negative": lambda b: b.add_limit(-1, 0, 1000, 1),
    "add_limit-id-2**64": lambda b: b.add_limit(2**64, 0, 1000, 1),
    "add_limit-id-str": lambda b: b.add_limit("7", 0, 1000, 1),
    "add_limit-side-2": lambda b: b.add_limit(7, 2, 1000, 1),
    "add_limit-side-none": lambda b: b.add_limit(7, None, 1000, 1),
    "add_limit-price-none": lambda b: b.add_limit(7, 0, None, 1),
    "add_limit-price-0": lambda b: b.add_limit(7, 0, 0, 1),
    "add_limit-price-2**32": lambda b: b.add_limit(7, 0, 2**32, 1),
    "add_limit-price-nan": lambda b: b.add_limit(7, 0, NAN, 1),
    "add_limit-price-float": lambda b: b.add_limit(7, 0, 1000.0, 1),
    "add_limit-qty-0": lambda b: b.add_limit(7, 0, 1000, 0),
    "add_limit-qty-negative": lambda b: b.add_limit(7, 0, 1000, -5),
    "add_limit-qty-2**32": lambda b: b.add_limit(7, 0, 1000, 2**32),
    "add_limit-duplicate": lambda b: b.add_limit(1, 0, 1000, 1),
    "add_limit-numpy-scalars": lambda b: b.add_limit(np.uint64(7), np.int8(1), np.uint32(900),
                                                     np.int64(4)),
    "add_market-qty-negative": lambda b: b.add_market(7, 1, -1),
    "add_market-id-none": lambda b: b.add_market(None, 1, 5),
    "add_market-empty-side": lambda b: _book_empty_market(b),
    "cancel-none": lambda b: b.cancel(None),
    "cancel-negative": lambda b: b.cancel(-1),
    "cancel-unknown": lambda b: b.cancel(99),
    "reduce-negative": lambda b: b.reduce(1, -1),
    "reduce-too-much": lambda b: b.reduce(1, 11),
    "execute-0": lambda b: b.execute(1, 0),
    "execute-none": lambda b: b.execute(1, None),
    "replace-price-0": lambda b: b.replace(1, 5, 0, 5),
    "replace-to-live-id": lambda b: b.replace(1, 2, 1000, 5),
    "depth-negative": lambda b: b.depth(0, -1),
    "depth-side-2": lambda b: b.depth(2, 5),
    "depth-side-none": lambda b: b.depth(None, 5),
    "depth-huge": lambda b: b.depth(0, 2**70),
    "order-none": lambda b: b.order(None),
    "order-negative": lambda b: b.order(-1),
    "apply-none": lambda b: b.apply(None),
    "apply-float-array": lambda b: b.apply(np.zeros(3)),
    "apply-wrong-fields": lambda b: b.apply(np.zeros(3, dtype=[("x", "<u8")])),
    "apply-empty": lambda b: b.apply(_ops([])),
    "apply-bytes": lambda b: b.apply(b"\x00" * 32),
    "apply-strided": lambda b: b.apply(
        _ops([(9, 0, 1000, 5, 0, 0), (8, 0, 1000, 5, 0, 1)] * 3)[::2]),
    "apply-bad-op-and-side": lambda b: b.apply(_ops([(9, 0, 1000, 5, 42, 0), (8, 0, 1000, 5, 0, 7),
                                                      (7, 0, 1000, 5, 0, 0)])),
    "apply-2d": lambda b: b.apply(_ops([(9, 0, 1000, 5, 0, 0)] * 4).reshape(2, 2)),
}.items():
    case(f"book-{name}", partial(_on_book, call=call))


def _book_empty_market(b: Any) -> Any:
    b.cancel(2)
    return b.add_market(7, 0, 5)


# ITCH decode: every kind of buffer.
_rng = random.Random(5)
_RANDOM = bytes(_rng.randrange(256) for _ in range(64))
_A = b"\x00\x24A" + b"\x00\x01\x00\x00" + b"\x00" * 6 + b"\x00" * 7 + b"\x01B" + b"\x00" * 4 \
    + b"ABCD    " + b"\x00\x00\x03\xe8"
for name, buffer_fn in {
    "none": lambda: None,
    "str": lambda: "hello",
    "int": lambda: 123,
    "list": lambda: [0, 1],
    "empty": lambda: b"",
    "one-byte": lambda: b"\x00",
    "length-only": lambda: b"\x00\x24",
    "zero-length": lambda: b"\x00\x00",
    "huge-length": lambda: b"\xff\xff" + b"A" * 10,
    "random": lambda: _RANDOM,
    "add-order": lambda: _A,
    "add-order-truncated": lambda: _A[:-1],
    "add-order-bytearray": lambda: bytearray(_A),
    "add-order-memoryview": lambda: memoryview(_A),
    "strided-memoryview": lambda: memoryview(_A * 2)[::2],
    "float-array": lambda: np.zeros(5),
    "uint8-array": lambda: np.frombuffer(_A, dtype=np.uint8),
    "int16-array": lambda: np.zeros(19, dtype=np.int16),
    "2d-array": lambda: np.frombuffer(_A * 2, dtype=np.uint8).reshape(2, -1),
}.items():
    case(f"itch-decode-{name}", partial(_call, "itch", "decode", make=buffer_fn))

# Files: every reader over every kind of bad path.
_PATHS: dict[str, Callable[[], Any]] = {
    "missing": lambda: _path("missing"),
    "directory": lambda: _path("dir"),
    "dev-null": lambda: Path("/dev/null"),
    "fifo": _fed_fifo,
    "empty": lambda: _path("empty"),
    "random": lambda: _path("random.bin"),
    "none": lambda: None,
    "int": lambda: 3,
}
_ITCH_FILES = ("valid.itch", "truncated.itch", "zero_length.itch", "bad.gz", "truncated.gz",
               "valid.pcap")
_PCAP_FILES = ("valid.pcap", "truncated.pcap", "header_only.pcap", "bad_header.pcap",
               "random_records.pcap", "valid.itch")
_ITCH_SOURCES: dict[str, Callable[[], Any]] = {**_PATHS,
                                              **{f: partial(_path, f) for f in _ITCH_FILES}}
for name, path_fn in _ITCH_SOURCES.items():
    case(f"itch-read_file-{name}", partial(_itch_all, make=path_fn))
for size in (0, -1, 2**40, 1.5, None):
    case(f"itch-read_file-chunk-{size}",
         partial(_itch_all, make=partial(_path, "valid.itch"), chunk=size))


def _pcap_all(twin: str, make: Callable[[], Any], chunk: Any = 1 << 12) -> Any:
    reader = _mod(twin, "pcap").read_file(make(), chunk)
    batches = list(reader)
    return batches, dict(reader.stats)


_PCAP_SOURCES: dict[str, Callable[[], Any]] = {**_PATHS,
                                              **{f: partial(_path, f) for f in _PCAP_FILES}}
for name, path_fn in _PCAP_SOURCES.items():
    case(f"pcap-read_file-{name}", partial(_pcap_all, make=path_fn))
for size in (0, -1, 2**40, 1.5, None):
    case(f"pcap-read_file-chunk-{size}",
         partial(_pcap_all, make=partial(_path, "valid.pcap"), chunk=size))
for name, buffer_fn in {"none": lambda: None, "empty": lambda: b"", "random": lambda: _RANDOM,
                        "str": lambda: "pcap"}.items():
    case(f"pcap-scan-{name}", partial(_call, "pcap", "scan", make=buffer_fn))

# Orders: CSV and LOBSTER readers, from paths and from bytes.
for reader in ("read_csv", "read_lobster"):
    for name, path_fn in _PATHS.items():
        case(f"orders-{reader}-{name}", partial(_call, "orders", reader, make=path_fn))
for name in ("good.csv", "bad_side.csv", "negative.csv", "nan.csv", "huge.csv", "short_row.csv",
             "binary.csv"):
    case(f"orders-read_csv-{name}", partial(_call, "orders", "read_csv",
                                            make=partial(_path, name)))
    case(f"orders-read_csv-bytes-{name}", partial(_call, "orders", "read_csv",
                                                  make=partial(_file_bytes, name)))
for name in ("good_lobster.csv", "bad_lobster.csv", "nan_lobster.csv", "huge_lobster.csv"):
    case(f"orders-read_lobster-{name}", partial(_call, "orders", "read_lobster",
                                                make=partial(_path, name)))
case("orders-read_csv-str-content",
     lambda twin: _mod(twin, "orders").read_csv("1,100,5,0\n"))
case("orders-lobster_to_ops-none", lambda twin: _mod(twin, "orders").lobster_to_ops(None))
case("orders-lobster_to_ops-floats",
     lambda twin: _mod(twin, "orders").lobster_to_ops(np.zeros(3)))


# Market: construction, run() on bad arrays, queries with bad arguments.
def _events(raw: bytes | None = None, n: int = 0) -> np.ndarray:
    from contract.dtypes import EVENT_DTYPE

    if raw is None:
        return np.zeros(n, dtype=EVENT_DTYPE)
    size = len(raw) - len(raw) % EVENT_DTYPE.itemsize
    return np.frombuffer(raw[:size], dtype=EVENT_DTYPE).copy()


def _market(twin: str, mode: str = "book") -> Any:
    m = _mod(twin, "market").Market(mode)
    m.run(_mod(twin, "itch").decode(_path("valid.itch").read_bytes())[0])
    return m


def _market_state(m: Any) -> Any:
    return m.counts(), len(m), m.books_csv()


_noise = random.Random(9)
_NOISE = bytes(_noise.randrange(256) for _ in range(64 * 40))
for name, call in {
    "new-bogus-mode": lambda twin: _mod(twin, "market").Market("bogus"),
    "new-none-mode": lambda twin: _mod(twin, "market").Market(None),
    "run-none": lambda twin: _market(twin).run(None),
    "run-floats": lambda twin: _market(twin).run(np.zeros(4)),
    "run-empty": lambda twin: (_market(twin).run(_events(n=0)), "ran"),
    "run-zeros": lambda twin: _after_market(_market(twin), lambda m: m.run(_events(n=5))),
    "run-noise-book": lambda twin: _after_market(_market(twin), lambda m: m.run(_events(_NOISE))),
    "run-noise-match": lambda twin: _after_market(_market(twin, "match"),
                                                  lambda m: m.run(_events(_NOISE))),
    "run-strided": lambda twin: _after_market(_market(twin),
                                              lambda m: m.run(_events(_NOISE)[::3])),
    "top-none": lambda twin: _market(twin).top(None),
    "top-negative": lambda twin: _market(twin).top(-1),
    "top-unknown": lambda twin: _market(twin).top(2**16),
    "depth-negative-levels": lambda twin: _market(twin).depth(1, 0, -1),
    "depth-side-5": lambda twin: _market(twin).depth(1, 5, 3),
    "order-none": lambda twin: _market(twin).order(None),
    "order-negative": lambda twin: _market(twin).order(-1),
    "stock-negative": lambda twin: _market(twin).stock(-1),
    "stock-none": lambda twin: _market(twin).stock(None),
}.items():
    case(f"market-{name}", call)


def _after_market(m: Any, call: Callable[[Any], Any]) -> Any:
    try:
        return call(m)
    finally:
        _STATE.append(_market_state(m))


# Pipeline: construction and run() on bad input (the report's timing and placement differ
# between the twins by design, so only its outcome and fill counts are compared).
def _pipe_run(twin: str, data: Any, **options: Any) -> Any:
    report = _mod(twin, "pipeline").Pipeline(**options).run(data)
    return {k: report.get(k) for k in ("fills_produced", "fills_logged", "fills_dropped")}


for name, call in {
    "new-bogus-policy": lambda twin: _mod(twin, "pipeline").Pipeline(policy="bogus"),
    "new-bogus-mode": lambda twin: _mod(twin, "pipeline").Pipeline("bogus"),
    "new-ring-0": lambda twin: _mod(twin, "pipeline").Pipeline(ring_capacity=0),
    "new-ring-negative": lambda twin: _mod(twin, "pipeline").Pipeline(ring_capacity=-1),
    "run-none": lambda twin: _pipe_run(twin, None),
    "run-empty": lambda twin: _pipe_run(twin, b""),
    "run-random": lambda twin: _pipe_run(twin, _RANDOM),
    "run-truncated": lambda twin: _pipe_run(twin, _path("truncated.itch").read_bytes()),
    "run-valid": lambda twin: _pipe_run(twin, _path("valid.itch").read_bytes()),
    "run_file-missing": lambda twin: _mod(twin, "pipeline").run_file(_path("missing")),
    "run_file-directory": lambda twin: _mod(twin, "pipeline").run_file(_path("dir")),
}.items():
    case(f"pipeline-{name}", call)


# Histogram: bad shapes, bad values, bad percentiles.
def _hist(twin: str) -> Any:
    h = _mod(twin, "histogram").Histogram(10, 100)
    for v in (5, 15, 999, 5000):
        h.record(v)
    return h


for name, call in {
    "new-width-0": lambda twin: _mod(twin, "histogram").Histogram(0, 10),
    "new-width-negative": lambda twin: _mod(twin, "histogram").Histogram(-1, 10),
    "new-buckets-0": lambda twin: _mod(twin, "histogram").Histogram(1, 0),
    "new-buckets-2**27": lambda twin: _mod(twin, "histogram").Histogram(1, 2**27),
    "new-width-none": lambda twin: _mod(twin, "histogram").Histogram(None, 10),
    "record-negative": lambda twin: _hist(twin).record(-1),
    "record-none": lambda twin: _hist(twin).record(None),
    "record-nan": lambda twin: _hist(twin).record(NAN),
    "record-2**64": lambda twin: _hist(twin).record(2**64),
    "record-numpy": lambda twin: (lambda h: (h.record(np.uint64(25)), h.summary()))(_hist(twin)),
    "percentile-nan": lambda twin: _hist(twin).percentile(NAN),
    "percentile-negative": lambda twin: _hist(twin).percentile(-1),
    "percentile-101": lambda twin: _hist(twin).percentile(101),
    "percentile-none": lambda twin: _hist(twin).percentile(None),
    "percentile-empty": lambda twin: _mod(twin, "histogram").Histogram(10, 10).percentile(50),
}.items():
    case(f"histogram-{name}", call)


# The generators (harness: one implementation, so only "clear and no crash" applies).
def _gen() -> Any:
    from twinmatch import gen

    return gen


for name, call in {
    "pcap_from_itch-none": lambda twin: _gen().pcap_from_itch(None),
    "pcap_from_itch-cut": lambda twin: _gen().pcap_from_itch(b"\x00\x24A"),
    "pcap_from_itch-random": lambda twin: _gen().pcap_from_itch(_RANDOM),
    "messages_csv-none": lambda twin: _gen().messages_csv(None),
    "messages_csv-random": lambda twin: _gen().messages_csv(_RANDOM),
    "market_day-none": lambda twin: _gen().market_day_bytes(None, 10, 1),
    "market_day-negative": lambda twin: _gen().market_day_bytes(-1, 10, 1),
    "market_day-nan": lambda twin: _gen().market_day_bytes(NAN, 10, 1),
    "market_day-huge-symbols": lambda twin: _gen().market_day_bytes(10**6, 10**9, 1),
    "csv_flow-negative": lambda twin: _gen().csv_flow_ops(-1),
    "itch_flow-negative": lambda twin: _gen().write_itch_flow(_path("dir") / "f.itch", -1),
}.items():
    case(f"gen-{name}", call, twins=False)


# Replay (the API behind `twinmatch replay`) and the command line itself.
def _replay(twin: str, path: Any, mode: str = "book") -> Any:
    from twinmatch.replay import replay

    result = replay(path, twin, mode)
    report = {k: v for k, v in result.report.items() if k not in RUN_FIELDS}
    return report, result.market.books_csv()


def _cli(argv: list[str]) -> Any:
    """main(argv): (exit status, stdout without timing, stderr's last line)."""
    from twinmatch.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
    text = out.getvalue()
    if "--json" in argv and status == 0:
        report = json.loads(text)
        text = json.dumps({k: v for k, v in report.items() if k not in RUN_FIELDS})
    lines = err.getvalue().strip().splitlines()
    return status, text, lines[-1] if lines else ""


def _replay_made(twin: str, make: Callable[[], Any]) -> Any:
    return _replay(twin, make())


def _cli_replay(twin: str, make: Callable[[], Any]) -> Any:
    return _cli(["replay", str(make()), "--impl", twin, "--json"])


def _cli_template(twin: str, argv: list[str]) -> Any:
    """The command line with {name} replaced by the fixture file's path."""
    names = ("missing", "fifo", "truncated.itch", "dir")
    return _cli([a.format(**{k: _path(k) for k in names}) for a in argv])


_REPLAY_FILES: dict[str, Callable[[], Any]] = {**_PATHS, **{f: partial(_path, f) for f in (
    "valid.itch", "truncated.itch", "bad.gz", "truncated.gz", "valid.pcap", "truncated.pcap",
    "bad_header.pcap", "good.csv", "bad_side.csv", "good_lobster.csv", "bad_lobster.csv")}}
for name, path_fn in _REPLAY_FILES.items():
    case(f"replay-{name}", partial(_replay_made, make=path_fn))
    if name not in ("none", "int"):
        case(f"cli-replay-{name}", partial(_cli_replay, make=path_fn))
case("replay-bogus-mode", lambda twin: _replay(twin, _path("valid.itch"), "bogus"))
case("replay-match-valid", lambda twin: _replay(twin, _path("valid.itch"), "match"))
case("cli-replay-books-to-directory", lambda twin: _cli(
    ["replay", str(_path("valid.itch")), "--impl", twin, "--books", str(_path("dir"))]))
case("cli-replay-fills-no-folder", lambda twin: _cli(
    ["replay", str(_path("valid.itch")), "--impl", twin, "--fills",
     str(_path("missing") / "fills.csv")]))
case("cli-replay-pipeline-truncated", lambda twin: _cli(
    ["replay", str(_path("truncated.itch")), "--impl", twin, "--pipeline", "--mode", "match"])[0])
for name, argv in {
    "compare-missing": ["compare", "{missing}"],
    "compare-fifo": ["compare", "{fifo}"],
    "compare-truncated": ["compare", "{truncated.itch}"],
    "gen-flow-negative": ["gen", "flow", "--orders", "-1", "--out", "{dir}/x.csv"],
    "gen-market-huge": ["gen", "market", "--messages", str(10**40), "--out", "{dir}"],
    "gen-market-seed-negative": ["gen", "market", "--seed", "-1", "--out", "{dir}"],
    "gen-market-not-a-number": ["gen", "market", "--messages", "many", "--out", "{dir}"],
    "no-command": [],
}.items():
    case(f"cli-{name}", partial(_cli_template, argv=argv), twins=False)


# Known defects in other components (being fixed in parallel), one entry per case:
# "<what is wrong> (issue 12: <item>)". Each such case is xfail(strict=True): once the
# defect is fixed it XPASSes, the run fails, and the entry is removed.
_DUMP = "(issue 12: `decode(None)` ... give nanobind's raw signature dump)"
_SAME = "(issue 12: hostile-input suite: the same outcome in both twins)"
_HANG = "(issue 12: no input may hang)"
_MEMORYVIEW = "the TypeError messages differ ('memoryview: ...' in naive only) " + _SAME
XFAIL: dict[str, str] = {
}


# ---- the worker: runs (case, twin) units in a subprocess and reports each as a line -----


def _units() -> list[tuple[int, str]]:
    return [(i, twin) for i, c in enumerate(CASES) for twin in (TWINS if c.twins else ("-",))]


def _worker(start: int) -> None:
    """Run every unit from ``start`` on, printing START before and DONE after each."""
    units = _units()
    for k in range(start, len(units)):
        i, twin = units[k]
        print(f"START {k}", flush=True)
        result = outcome(partial(CASES[i].run, twin))
        print("DONE " + json.dumps({"unit": k, "outcome": result}), flush=True)


def _run_all(folder: Path) -> dict[tuple[int, str], dict[str, Any]]:
    """Every unit's outcome; a crash or a hang is recorded as such and the rest go on."""
    units = _units()
    results: dict[tuple[int, str], dict[str, Any]] = {}
    env = {**os.environ, DIR_ENV: str(folder), "TWINMATCH_NO_REBUILD": "1"}
    start = 0
    while start < len(units):
        proc = subprocess.Popen(
            [sys.executable, "-c", f"import tests.test_hostile as t; t._worker({start})"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump(stream: Any = proc.stdout, q: queue.Queue[str | None] = lines) -> None:
            for line in stream:
                q.put(line)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
        current: int | None = None
        while True:
            if current is None:
                wait = STARTUP_TIMEOUT
            else:
                quick = CASES[units[current][0]].id.endswith(("-fifo", "-chunk-0", "-chunk--1"))
                wait = QUICK_TIMEOUT if quick else UNIT_TIMEOUT
            try:
                line = lines.get(timeout=wait)
            except queue.Empty:
                proc.kill()
                proc.wait(timeout=30)
                assert current is not None, "the hostile worker did not start"
                results[units[current]] = {"kind": "hang"}
                start = current + 1
                break
            if line is None:  # the worker ended: finished, or crashed inside `current`
                code = proc.wait(timeout=30)
                if current is not None and units[current] not in results:
                    results[units[current]] = {"kind": "crash", "returncode": code}
                    start = current + 1
                else:
                    start = len(units)
                break
            if line.startswith("START "):
                current = int(line.split()[1])
            elif line.startswith("DONE "):
                done = json.loads(line[5:])
                results[units[done["unit"]]] = done["outcome"]
    return results


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], dict[str, Any]]:
    folder = tmp_path_factory.mktemp("hostile")
    make_files(folder)
    return _run_all(folder)


def _params() -> Iterator[Any]:
    for i, c in enumerate(CASES):
        reason = c.xfail or XFAIL.get(c.id, "")
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(i, id=c.id, marks=marks)


def _clear(o: dict[str, Any]) -> str | None:
    """Why an outcome is not acceptable on its own (a crash, a hang, an unclear error)."""
    if o["kind"] in ("crash", "hang"):
        return f"the call {'crashed the process' if o['kind'] == 'crash' else 'hung'}: {o}"
    if o["kind"] == "raised":
        message = o["message"]
        if SIGNATURE_DUMP in message:
            return f"nanobind's signature dump instead of a clear error: {message[:300]!r}"
        if "\n" in message.strip():
            return f"a multi-line error: {message[:300]!r}"
        if not message.strip() and o["type"] not in ("StopIteration",):
            return f"an error with no message: {o['type']}"
        if not o["family"]:
            return f"{o['type']} is not a TypeError/ValueError/OSError-like error: {message!r}"
    return None


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("index", list(_params()))
def test_hostile_input(index: int, outcomes: dict[tuple[int, str], dict[str, Any]]) -> None:
    c = CASES[index]
    if not c.twins:
        o = outcomes[(index, "-")]
        problem = _clear(o)
        assert problem is None, problem
        return
    naive, opt = outcomes[(index, "naive")], outcomes[(index, "optimized")]
    for twin, o in (("naive", naive), ("optimized", opt)):
        problem = _clear(o)
        assert problem is None, f"{twin}: {problem}"
    assert naive == opt, f"the twins differ:\n  naive:     {naive}\n  optimized: {opt}"


def test_every_entry_point_is_covered() -> None:
    prefixes = {c.id.split("-")[0] + "-" + c.id.split("-")[1] for c in CASES}
    for entry in ("book-add_limit", "book-apply", "itch-decode", "itch-read_file",
                  "pcap-read_file", "pcap-scan", "orders-read_csv", "orders-read_lobster",
                  "market-run", "pipeline-run", "histogram-record", "histogram-percentile",
                  "gen-market_day", "replay-missing", "cli-replay", "cli-gen"):
        assert entry in prefixes, entry


# ---- differential fuzzing of replay: mutated feeds through both twins -------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("TWINMATCH_FUZZ_EXAMPLES", "30"))
_DAY: dict[str, bytes] = {}


def _day(fmt: str = "itch") -> bytes:
    """A small generated day, as raw ITCH or as its MoldUDP64 pcap."""
    if not _DAY:
        from twinmatch import gen

        _DAY["itch"] = gen.market_day_bytes(120, 4, 7)[0]
        _DAY["pcap"] = gen.pcap_from_itch(_DAY["itch"])
    return _DAY[fmt]


@st.composite
def mutated(draw: st.DrawFn, fmt: str = "itch") -> bytes:
    data = bytearray(_day(fmt))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        else:
            del data[at:]
    return bytes(data)


def _replay_outcome(path: Path, twin: str, mode: str) -> dict[str, Any]:
    """replay()'s outcome, plus the market as it stood when reading stopped: what was
    accepted before a bad record must be the same (and kept) in both twins."""
    whole = outcome(lambda: _replay(twin, path, mode))
    market = _mod(twin, "market").Market(mode)
    by_type: dict[str, int] = {}

    def feed() -> None:
        reader = "pcap" if path.suffix == ".pcap" else "itch"
        for events, counts in _mod(twin, reader).read_file(path, 1 << 10):
            market.run(events)
            for k, v in counts.items():
                by_type[k] = by_type.get(k, 0) + v

    stopped = outcome(feed)
    whole["partial"] = normal([stopped, by_type, market.counts(), len(market),
                               market.books_csv()])
    return whole


@settings(max_examples=FUZZ_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(feed=st.sampled_from(["itch", "pcap"]).flatmap(lambda fmt: st.tuples(
    st.just(fmt), mutated(fmt))), mode=st.sampled_from(["book", "match"]))
def test_replay_mutated_feed_same_in_both_twins(tmp_path: Path, feed: tuple[str, bytes],
                                                mode: str) -> None:
    path = tmp_path / f"mutated.{feed[0]}"
    path.write_bytes(feed[1])
    naive = _replay_outcome(path, "naive", mode)
    opt = _replay_outcome(path, "optimized", mode)
    assert _clear(naive) is None and _clear(opt) is None, (naive, opt)
    assert naive == opt


@settings(max_examples=max(3, FUZZ_EXAMPLES // 6), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(feed=mutated())
def test_cli_replay_mutated_feed_same_report_and_books(tmp_path: Path, feed: bytes) -> None:
    path = tmp_path / "mutated.itch"
    path.write_bytes(feed)
    seen = {}
    for twin in TWINS:
        books = tmp_path / f"{twin}.books.csv"
        books.unlink(missing_ok=True)
        status, out, err = _cli(["replay", str(path), "--impl", twin, "--json",
                                 "--books", str(books)])
        seen[twin] = (status, out, err.replace(twin, "<impl>"),
                      books.read_text() if books.exists() else None)
    assert seen["naive"] == seen["optimized"]
