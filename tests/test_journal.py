"""The input journal (chapter 11), both twins: format, flush policies, replay, recovery.

Every test runs over both twins (the ``twin`` fixture) or compares them directly; the
golden journal in tests/data is what both must write, byte for byte.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import random
import selectors
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import naive.journal
import optimized.journal
from contract.dtypes import (
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
    records,
)
from contract.journal import (
    BUFFER_RECORDS,
    FILE_HEADER_SIZE,
    RECORD_SIZE,
    FlushTimer,
    JournalError,
    JournalLocked,
    books_csv,
    read_snapshot,
    write_snapshot,
)
from optimized import _native
from tests import fs_faults
from twinmatch.cli import main as cli_main
from twinmatch.flow import order_flow
from twinmatch.replay import write_fills

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
GOLDEN_JOURNAL = DATA / "journal-golden.tmj"
GOLDEN_SNAPSHOT = DATA / "journal-golden.snap"
TWINS = {"naive": naive.journal, "optimized": optimized.journal}


@pytest.fixture(params=sorted(TWINS))
def twin(request: pytest.FixtureRequest) -> ModuleType:
    """Each journal twin in turn: naive (Python), optimized (C++)."""
    return TWINS[str(request.param)]


# Every op kind, and most rejects of the batch API, in 16 commands.
GOLDEN_OPS = [
    (1, 0, 1000, 10, OP_LIMIT, 0),
    (2, 0, 1001, 5, OP_LIMIT, 0),
    (3, 0, 1003, 7, OP_LIMIT, 1),
    (4, 0, 1003, 3, OP_LIMIT, 1),
    (5, 0, 1001, 6, OP_LIMIT, 1),     # crosses the bid at 1001: 5 trade, 1 rests
    (6, 0, 0, 4, OP_MARKET, 0),       # sweeps two ask levels
    (1, 0, 0, 2, OP_REDUCE, 0),
    (3, 0, 0, 1, OP_EXECUTE, 0),
    (4, 7, 1002, 9, OP_REPLACE, 0),
    (1, 0, 0, 0, OP_CANCEL, 0),
    (11, 0, 999, 4, OP_LIMIT, 0),
    (12, 0, 999, 2, OP_LIMIT, 0),     # behind 11 in the queue
    (99, 0, 0, 0, OP_CANCEL, 0),      # unknown_id
    (8, 0, 0, 5, OP_LIMIT, 0),        # bad_price
    (9, 0, 1000, 5, OP_LIMIT, 2),     # bad_side
    (10, 0, 1000, 5, 9, 0),           # bad_op
]


def golden_ops() -> np.ndarray:
    return records(GOLDEN_OPS, OPS_DTYPE)


def record(twin: ModuleType, path: Path, ops: np.ndarray, chunk: int = 7,
           **writer: Any) -> tuple[Any, list[np.ndarray], list[np.ndarray]]:
    """Run ``ops`` through a journaled engine in chunks; (engine, fills, rejects)."""
    outputs = []
    with twin.JournalWriter(path, **writer) as w:
        engine = twin.Engine(w)
        for at in range(0, len(ops), chunk):
            outputs += engine.submit(ops[at:at + chunk])
        outputs += engine.flush()
    return engine, [o.fills for o in outputs], [o.rejects for o in outputs]


def fills_text(parts: list[np.ndarray]) -> str:
    """The fills CSV rows (no op_index: a chunk's fills count ops from the chunk's start)."""
    out = io.StringIO()
    for p in parts:
        write_fills(out, p)
    return out.getvalue()


# ------------------------------------------------------------------ format

def test_crc32_equals_zlib() -> None:
    rng = random.Random(5)
    data = bytes(rng.getrandbits(8) for _ in range(300))
    for n in range(301):
        for start in range(8):  # every alignment
            chunk = data[start:start + n]
            assert _native.journal_crc32(chunk) == zlib.crc32(chunk)
            assert optimized.journal.crc32(chunk) == naive.journal.crc32(chunk)
    assert _native.journal_crc32(data[100:], zlib.crc32(data[:100])) == zlib.crc32(data)


def test_record_size_matches_contract() -> None:
    assert _native.JOURNAL_RECORD_SIZE == RECORD_SIZE == 48
    assert _native.JOURNAL_BUFFER_RECORDS == BUFFER_RECORDS


def test_golden_journal_bytes(twin: ModuleType, tmp_path: Path) -> None:
    """Both twins write the golden file byte for byte (regenerate: see test below)."""
    engine, _, _ = record(twin, tmp_path / "j", golden_ops(), chunk=5, policy="batch", batch=3)
    assert (tmp_path / "j").read_bytes() == GOLDEN_JOURNAL.read_bytes()
    engine.snapshot(tmp_path / "s")
    assert (tmp_path / "s").read_bytes() == GOLDEN_SNAPSHOT.read_bytes()


def test_golden_journal_reads_back(twin: ModuleType) -> None:
    ops, scan = twin.read_journal(GOLDEN_JOURNAL)
    assert ops.tobytes() == golden_ops().tobytes()
    assert (scan.records, scan.first_seq, scan.last_seq) == (len(GOLDEN_OPS), 1, len(GOLDEN_OPS))
    assert scan.torn_bytes == 0 and scan.message() is None
    assert scan.valid_end == FILE_HEADER_SIZE + RECORD_SIZE * len(GOLDEN_OPS)


def test_golden_layout_by_hand() -> None:
    """The first record, decoded with struct alone: the format is what the contract says."""
    raw = GOLDEN_JOURNAL.read_bytes()
    assert raw[:16] == b"TMJOURN1" + struct.pack("<II", 1, 40)
    length, crc, seq = struct.unpack_from("<IIQ", raw, 16)
    assert (length, seq) == (40, 1)
    assert crc == zlib.crc32(raw[24:64])
    assert raw[32:64] == golden_ops()[:1].tobytes()


# ---------------------------------------------------------------- policies

@pytest.mark.parametrize(("policy", "options", "flushes"), [
    ("every", {}, 100),
    ("batch", {"batch": 16}, 7),           # 6 full batches, the rest at close
    ("timer", {"interval_ms": 0.0}, 100),  # an interval of 0 is due at every record
    ("timer", {"interval_ms": 3_600_000.0}, 1),  # never due: only the close flushes
])
def test_flush_policies(twin: ModuleType, tmp_path: Path, policy: str,
                        options: dict[str, float], flushes: int) -> None:
    ops = order_flow(100, seed=2)
    with twin.JournalWriter(tmp_path / "j", policy, **options) as w:
        w.append(ops[:50])
        if policy == "every":
            assert w.flushed_seq == 50
        w.append(ops[50:])
    assert w.flushes == flushes and w.flushed_seq == 100
    assert twin.read_journal(tmp_path / "j")[0].tobytes() == ops.tobytes()


def test_buffer_full_flushes_any_policy(twin: ModuleType, tmp_path: Path) -> None:
    ops = order_flow(BUFFER_RECORDS + 10, seed=3)
    with twin.JournalWriter(tmp_path / "j", "timer", interval_ms=3_600_000) as w:
        w.append(ops)
        assert w.flushed_seq == BUFFER_RECORDS and w.flushes == 1
    assert w.flushes == 2


@pytest.mark.parametrize(("args", "words"), [
    ({"policy": "sometimes"}, "policy must be one of"),
    ({"batch": 0}, "batch must be an int in 1..4096"),
    ({"batch": 5000}, "batch must be an int in 1..4096"),
    ({"interval_ms": -1.0}, "interval_ms must be in"),
    ({"interval_ms": float("nan")}, "interval_ms must be in"),
    ({"interval_ms": float("inf")}, "interval_ms must be in"),
])
def test_writer_arguments(twin: ModuleType, tmp_path: Path, args: dict[str, object],
                          words: str) -> None:
    with pytest.raises(ValueError, match=words):
        twin.JournalWriter(tmp_path / "j", **args)


def test_closed_writer(twin: ModuleType, tmp_path: Path) -> None:
    w = twin.JournalWriter(tmp_path / "j")
    w.close()
    w.close()  # a second close does nothing
    w.flush()  # nothing pending: nothing to do
    with pytest.raises(ValueError, match="journal: the writer is closed"):
        w.append(golden_ops())


# ------------------------------------------------------------------ replay

@pytest.mark.parametrize("seed", [1, 2])
def test_replay_reproduces_fills_and_books(tmp_path: Path, seed: int) -> None:
    """Record with each twin, replay with each twin: the same fills and books, all four."""
    ops = order_flow(3000, seed=seed, bad_fraction=0.02)
    results = set()
    replayed = set()
    for name, writer_twin in TWINS.items():
        engine, fills, rejects = record(writer_twin, tmp_path / name, ops, chunk=97)
        live = (fills_text(fills), books_csv(engine.resting_orders()))
        assert sum(map(len, rejects)) > 0
        for replay_twin in TWINS.values():
            for _ in range(2):  # replay twice: the same bytes
                again, scan, f, _r = replay_twin.Engine.recover(tmp_path / name)
                assert scan.records == len(ops)
                results.add((fills_text([f]), books_csv(again.resting_orders())))
                replayed.add(f.tobytes())  # op_index included: the whole FILL_DTYPE array
        results.add(live)
    assert len(results) == 1 and len(replayed) == 1
    assert (tmp_path / "naive").read_bytes() == (tmp_path / "optimized").read_bytes()


def test_snapshot_plus_tail_equals_full_replay(twin: ModuleType, tmp_path: Path) -> None:
    ops = order_flow(2000, seed=4)
    with twin.JournalWriter(tmp_path / "j", "batch", batch=50) as w:
        engine = twin.Engine(w)
        engine.submit(ops[:1234])
        engine.snapshot(tmp_path / "s")  # flushes the journal first
        assert w.flushed_seq == 1234
        engine.submit(ops[1234:])
    seq, resting = read_snapshot(tmp_path / "s")
    assert seq == 1234 and len(resting) > 0
    full, _, full_fills, _ = twin.Engine.recover(tmp_path / "j")
    fast, scan, fast_fills, _ = twin.Engine.recover(tmp_path / "j", tmp_path / "s")
    assert books_csv(fast.resting_orders()) == books_csv(full.resting_orders()) \
        == books_csv(engine.resting_orders())
    assert fast.applied_seq == full.applied_seq == scan.last_seq == 2000
    # The tail's fills are the full replay's fills of ops 1234 onwards.
    tail = full_fills[full_fills["op_index"] >= 1234]
    tail["op_index"] -= 1234
    assert len(tail) > 0 and len(fast_fills) == len(tail) and bool((fast_fills == tail).all())


def test_snapshot_newer_than_journal_is_an_error(twin: ModuleType, tmp_path: Path) -> None:
    record(twin, tmp_path / "j", golden_ops())
    write_snapshot(tmp_path / "s", 99, golden_ops()[:0])
    with pytest.raises(JournalError, match="covers sequence 99, the journal holds 1..16"):
        twin.Engine.recover(tmp_path / "j", tmp_path / "s")


@pytest.mark.parametrize(("damage", "words"), [
    (lambda b: b[:20], "file truncated"),
    (lambda b: b"XXXXXXXX" + b[8:], "bad magic"),
    (lambda b: b[:8] + struct.pack("<I", 7) + b[12:], "unsupported version 7"),
    (lambda b: b[:-4], "rows need"),
    (lambda b: b + b"\0", "rows need"),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC-32 does not match"),
    (lambda b: b[:24] + struct.pack("<Q", 2**60) + b[32:], "rows need"),  # a huge count
])
def test_damaged_snapshot(twin: ModuleType, tmp_path: Path, damage: object, words: str) -> None:
    raw = GOLDEN_SNAPSHOT.read_bytes()
    assert callable(damage)
    (tmp_path / "s").write_bytes(damage(raw))
    record(twin, tmp_path / "j", golden_ops())
    with pytest.raises(JournalError, match=words):
        twin.Engine.recover(tmp_path / "j", tmp_path / "s")


# ------------------------------------------------------- torn and hostile

def scan_outcome(twin: ModuleType, path: Path) -> tuple[object, ...]:
    """What reading ``path`` gives, comparable across twins: the result or the error."""
    try:
        ops, scan = twin.read_journal(path)
    except JournalError as exc:
        return ("error", str(exc), exc.offset)
    return ("ok", ops.tobytes(), scan)


def test_torn_last_record_is_dropped_and_counted(twin: ModuleType, tmp_path: Path) -> None:
    """Every way a write of the last record can stop short: dropped, counted, not applied."""
    full = GOLDEN_JOURNAL.read_bytes()
    last = len(full) - RECORD_SIZE
    for cut in range(last + 1, len(full)):
        (tmp_path / "j").write_bytes(full[:cut])
        ops, scan = twin.read_journal(tmp_path / "j")
        assert len(ops) == scan.records == len(GOLDEN_OPS) - 1
        assert (scan.torn_offset, scan.torn_bytes, scan.valid_end) == (last, cut - last, last)
        assert scan.message() == (f"journal: dropped 1 torn record at byte offset {last} "
                                  f"({cut - last} bytes, the file ends inside it)")
        assert scan_outcome(naive.journal, tmp_path / "j") == \
            scan_outcome(optimized.journal, tmp_path / "j")
    # The whole last record there, but its bytes damaged (a write the disk half did).
    damaged = bytearray(full)
    damaged[-3] ^= 0xFF
    (tmp_path / "j").write_bytes(bytes(damaged))
    ops, scan = twin.read_journal(tmp_path / "j")
    assert scan.records == len(GOLDEN_OPS) - 1 and scan.torn_bytes == RECORD_SIZE


def test_resume_cuts_the_torn_tail(twin: ModuleType, tmp_path: Path) -> None:
    full = GOLDEN_JOURNAL.read_bytes()
    (tmp_path / "j").write_bytes(full[:-RECORD_SIZE - 10])  # 13 records and part of a 13th
    ops = golden_ops()
    with twin.JournalWriter(tmp_path / "j", resume=True) as w:
        assert w.scan is not None and w.scan.torn_bytes == RECORD_SIZE - 10
        assert w.next_seq == len(GOLDEN_OPS) - 1
        w.append(ops[-2:])
    assert (tmp_path / "j").read_bytes() == full


def _header(version: int = 1, size: int = 40) -> bytes:
    return b"TMJOURN1" + struct.pack("<II", version, size)


HOSTILE = {
    "empty": (b"", "at byte offset 0: file header truncated (0 of 16 bytes)"),
    "short header": (b"TMJOURN1\x01", "file header truncated (9 of 16 bytes)"),
    "garbage": (bytes(range(200)), "at byte offset 0: not a twinmatch journal (bad magic)"),
    "version": (_header(2), "at byte offset 8: unsupported version 2 or payload size 40"),
    "payload size": (_header(1, 41), "unsupported version 1 or payload size 41"),
    "huge length": (_header() + struct.pack("<II", 0xFFFF_FFFF, 0) + b"\0" * 100,
                    "at byte offset 16: record length 4294967295, expected 40"),
    "huge length at the end": (_header() + struct.pack("<II", 0x7FFF_FFFF, 0),
                               "at byte offset 16: record length 2147483647, expected 40"),
    "zero length": (_header() + b"\0" * 48, "record length 0, expected 40"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_journal(twin: ModuleType, tmp_path: Path, name: str) -> None:
    data, words = HOSTILE[name]
    (tmp_path / "j").write_bytes(data)
    with pytest.raises(JournalError, match=words.replace("(", r"\(").replace(")", r"\)")):
        twin.read_journal(tmp_path / "j")
    with pytest.raises(JournalError):
        twin.JournalWriter(tmp_path / "j", resume=True)  # never appends to a bad file
    assert (tmp_path / "j").read_bytes() == data  # and leaves it as it was


def test_corruption_before_the_end_is_an_error(twin: ModuleType, tmp_path: Path) -> None:
    full = bytearray(GOLDEN_JOURNAL.read_bytes())
    at = FILE_HEADER_SIZE + 3 * RECORD_SIZE
    full[at + 30] ^= 0x01
    (tmp_path / "j").write_bytes(bytes(full))
    with pytest.raises(JournalError, match=f"at byte offset {at}: record CRC-32 0x") as info:
        twin.read_journal(tmp_path / "j")
    assert info.value.offset == at


def test_sequence_gap_and_repeat(twin: ModuleType, tmp_path: Path) -> None:
    full = GOLDEN_JOURNAL.read_bytes()
    rec = FILE_HEADER_SIZE
    second = full[rec + RECORD_SIZE:rec + 2 * RECORD_SIZE]
    repeat = full[:rec + RECORD_SIZE] + full[rec:rec + RECORD_SIZE] + second
    (tmp_path / "j").write_bytes(repeat)
    with pytest.raises(JournalError, match=f"offset {rec + RECORD_SIZE}: sequence number 1, "
                                           "expected 2"):
        twin.read_journal(tmp_path / "j")
    (tmp_path / "j").write_bytes(full[:rec] + second)
    with pytest.raises(JournalError, match="sequence number 2, expected 1"):
        twin.read_journal(tmp_path / "j")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_damage_same_in_both_twins(tmp_path: Path, data: st.DataObject) -> None:
    """Flip, cut or splice the golden journal anywhere: both twins say the same."""
    raw = bytearray(GOLDEN_JOURNAL.read_bytes())
    kind = data.draw(st.sampled_from(["flip", "cut", "splice", "random"]))
    if kind == "flip":
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] ^= data.draw(st.integers(1, 255))
    elif kind == "cut":
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    elif kind == "splice":
        at = data.draw(st.integers(0, len(raw)))
        raw[at:at] = data.draw(st.binary(max_size=60))
    else:
        raw = bytearray(_header() + data.draw(st.binary(max_size=200)))
    path = tmp_path / "j"
    path.write_bytes(bytes(raw))
    assert scan_outcome(naive.journal, path) == scan_outcome(optimized.journal, path)


# --------------------------------------------------------------- crash test

def _engine(journal: Path, snapshot: Path, inputs: Path, impl: str) -> subprocess.Popen[str]:
    env = dict(os.environ, TWINMATCH_NO_REBUILD="1", PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "twinmatch", "journal", "run", str(journal), "--impl", impl,
         "--input", str(inputs), "--snapshot", str(snapshot), "--policy", "every",
         "--chunk", "8", "--snapshot-every", "150"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read_until(proc: subprocess.Popen[str], acks_wanted: int, deadline: float) -> list[str]:
    """Lines from the engine until ``acks_wanted`` acks, its exit, or the deadline."""
    assert proc.stdout is not None
    lines: list[str] = []
    acks = 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while acks < acks_wanted and time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
                continue
            line = proc.stdout.readline()
            if not line:
                break  # the engine exited
            lines.append(line.strip())
            acks += line.startswith("ack ")
    return lines


@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_kill_9_and_recover(tmp_path: Path, impl: str) -> None:
    """SIGKILL the engine at random points, restart it, and check what it recovered.

    Every command acknowledged before a kill is in the journal exactly once (the
    journal holds input[0..n) in order, n >= the last ack), the restarted engine carries
    on from there, and the final books (and a full replay's fills) equal a clean run's.
    Some restarts first get a torn record appended (a write cut short): it is dropped.
    """
    rng = random.Random(f"kill-{impl}")
    ops = order_flow(5000, seed=9, bad_fraction=0.01)
    np.save(tmp_path / "ops.npy", ops)
    journal, snapshot = tmp_path / "journal", tmp_path / "snapshot"
    clean = naive.journal.Engine()
    clean_fills, _ = clean.apply(ops)
    clean_books = books_csv(clean.resting_orders())
    twin = TWINS[impl]
    budget = time.monotonic() + 90  # total time bounded: then the last run just finishes
    acked = 0
    kills = torn = 0
    torn_pending = False
    while True:
        proc = _engine(journal, snapshot, tmp_path / "ops.npy", impl)
        try:
            killing = kills < 12 and time.monotonic() < budget
            lines = _read_until(proc, rng.randint(1, 60) if killing else 10**9,
                                time.monotonic() + 60)
            if killing:
                proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        lines += out.split()
        lines = " ".join(lines).split()
        starts = [int(lines[k + 1]) for k, w in enumerate(lines) if w == "start"]
        if torn_pending:  # the torn record was dropped, and said so, before the engine started
            if "torn" in lines:
                torn_pending = False
            else:
                assert not starts, f"a torn record was not reported: {lines[:20]}"
        if starts:
            assert starts[0] >= acked, "an acknowledged command was lost"
        acks = [int(lines[k + 1]) for k, w in enumerate(lines) if w == "ack"]
        acked = max([acked, *acks])
        if "done" in lines:  # it finished (perhaps just before the kill reached it)
            assert proc.returncode in (0, -signal.SIGKILL), err
            break
        assert proc.returncode == -signal.SIGKILL, err
        kills += 1
        # What the journal holds: input[0..n), in order, each once (the scan checks 1..n).
        held, scan = twin.read_journal(journal)
        assert scan.last_seq >= acked
        assert held.tobytes() == ops[:scan.last_seq].tobytes()
        if kills == 1 or rng.random() < 0.3:  # a write cut short: part of the next record
            part = naive.journal.encode_record(scan.last_seq + 1, ops[scan.last_seq:][:1].tobytes())
            with open(journal, "ab") as f:
                f.write(part[:rng.randint(1, RECORD_SIZE - 1)])
            torn += 1
            torn_pending = True
    print(f"{impl}: {kills} kills, {torn} torn records")
    assert kills >= 3 and torn >= 1
    done = lines.index("done")
    assert int(lines[done + 1]) == len(ops)
    held, scan = twin.read_journal(journal)
    assert held.tobytes() == ops.tobytes() and scan.torn_bytes == 0
    full, _, fills, _ = twin.Engine.recover(journal)
    assert books_csv(full.resting_orders()) == clean_books
    assert fills.tobytes() == clean_fills.tobytes()
    fast, _, _, _ = twin.Engine.recover(journal, snapshot)
    assert books_csv(fast.resting_orders()) == clean_books


# --------------------------------------------------------------------- CLI

def test_cli_record_and_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = []
    for impl in ("naive", "optimized"):
        j = tmp_path / impl
        assert cli_main(["journal", "record", str(j), "--impl", impl, "--ops", "1500",
                         "--bad-fraction", "0.01", "--policy", "every"]) == 0
        recorded = capsys.readouterr().out.splitlines()
        assert cli_main(["journal", "replay", str(j), "--impl", impl, "--twice",
                         "--books", str(tmp_path / f"{impl}.csv")]) == 0
        replayed = capsys.readouterr().out.splitlines()
        assert replayed[-1] == "replayed twice: identical"
        assert recorded[1:3] == replayed[1:3]  # the fills and books digests
        assert recorded[1].startswith("fills ") and "sha256:" in recorded[2]
        outs.append(replayed[1:3])
    assert outs[0] == outs[1]
    assert (tmp_path / "naive").read_bytes() == (tmp_path / "optimized").read_bytes()
    assert (tmp_path / "naive.csv").read_text() == (tmp_path / "optimized.csv").read_text()


def test_cli_replay_bad_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "j").write_bytes(b"not a journal at all")
    assert cli_main(["journal", "replay", str(tmp_path / "j")]) == 1
    assert "bad magic" in capsys.readouterr().err
    assert cli_main(["journal", "replay", str(tmp_path / "missing")]) == 2


# ------------------------------------------------ the two engines' books

op_rows = st.tuples(
    st.integers(0, 12),                                   # order_id: few, so they collide
    st.integers(0, 12),                                   # new_order_id
    st.sampled_from([0, 1, 99, 100, 101, 102, 2**32 - 1]),  # price, 0 is bad_price
    st.sampled_from([0, 1, 2, 5, 50, 2**32 - 1]),         # qty, 0 is bad_qty
    st.integers(0, 7),                                    # op, 6 and 7 are bad_op
    st.integers(0, 2),                                    # side, 2 is bad_side
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(op_rows, max_size=30), max_size=4))
def test_engines_agree_on_random_commands(batches: list[list[tuple[int, ...]]]) -> None:
    """The optimized engine's own dispatch (SnapshotBook) against the naive Book.apply."""
    engines: list[Any] = [naive.journal.Engine(), optimized.journal.Engine()]
    for batch in batches:
        ops = records(batch, OPS_DTYPE)
        (nf, nr), (of, orj) = (e.apply(ops) for e in engines)
        assert nf.tobytes() == of.tobytes() and nr.tobytes() == orj.tobytes()
        assert engines[0].resting_orders().tobytes() == engines[1].resting_orders().tobytes()
    assert len(engines[0].book) == len(engines[1].book)



# ------------------------------------------------------------------ faults
#
# Issue 29. A write that fails or stops short is made real with RLIMIT_FSIZE in a forked
# child: write(2) stops at the limit (a short write), the next one fails with EFBIG
# (SIGXFSZ ignored, or it would kill the child). The child may lift its own limit again
# (up to the hard limit), as a disk that is freed. A real full disk: see the tmpfs test.

def in_child(fn: Any, fsize: int | None = None, timeout: float = 60.0) -> Any:
    """Run ``fn()`` in a forked child under a file-size limit; its result, or
    ("raised", type, words), or ("signal", n) if the child died (an abort, a crash)."""
    import pickle
    import resource

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(r)
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            if fsize is not None:
                hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, hard))
            out: tuple[Any, ...]
            try:
                out = ("ok", fn())
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                out = ("raised", type(exc).__name__, str(exc))
            os.write(w, pickle.dumps(out))
        except BaseException:  # noqa: BLE001 - never unwind into pytest in the child
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(r, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(timeout=1.0):
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                data += chunk
    os.close(r)
    for _ in range(100):  # the child has closed its end: it exits at once
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child did not finish in time")
    if os.WIFSIGNALED(status):
        return ("signal", os.WTERMSIG(status))
    assert data, f"the child exited with status {os.WEXITSTATUS(status)} and no answer"
    import pickle as _pickle

    return _pickle.loads(data)


def unlimit() -> None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))


def test_failed_write_leaves_the_writer_failed(twin: ModuleType, tmp_path: Path) -> None:
    """Room for 100 records, then far more appends than the 4,096-record buffer holds.

    Before the fix the C++ writer kept its full buffer after the failed write and wrote
    each later record one further past its end (the child aborted: "corrupted size");
    now the first error is write(2)'s, every later call is refused with WriterFailed,
    and the file holds exactly the 100 records flushed."""
    path = tmp_path / "j"
    ops = order_flow(BUFFER_RECORDS + 3000, seed=3)

    def run() -> tuple[list[str], int, int, int]:
        w = twin.JournalWriter(path, "timer", interval_ms=3_600_000)  # flush when full
        errors = []
        for at in range(0, len(ops), 50):
            try:
                w.append(ops[at:at + 50])
            except OSError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        try:
            w.flush()
        except OSError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        w.close()  # a failed writer just closes
        return errors, len(errors), w.flushed_seq, w.next_seq

    result = in_child(run, fsize=FILE_HEADER_SIZE + 100 * RECORD_SIZE + 20)
    assert result[0] == "ok", result
    errors, count, flushed, next_seq = result[1]
    assert errors[0] == f"OSError: [Errno {errno.EFBIG}] File too large: '{path}'"
    refused = (f"WriterFailed: [Errno {errno.EFBIG}] journal: the writer failed earlier "
               f"(File too large); it takes no more records: '{path}'")
    assert errors[1:] == [refused] * (count - 1) and count > 50
    assert (flushed, next_seq) == (100, 101)
    held, scan = twin.read_journal(path)  # the partial 101st record was cut off
    assert held.tobytes() == ops[:100].tobytes() and scan.torn_bytes == 0


def test_short_write_is_not_written_twice(twin: ModuleType, tmp_path: Path) -> None:
    """A flush of 4 records stops inside the third, then the disk is freed and the
    caller flushes again. Before the fix the retry wrote all 4 records again after the
    2.4 already there: flushed_seq said 4 and the reader failed (a CRC mismatch at byte
    112). Now only the 2 whole records count, and the writer refuses the retry."""
    path = tmp_path / "j"
    ops = golden_ops()

    def run() -> tuple[str, str, int]:
        w = twin.JournalWriter(path, "batch", batch=4)
        try:
            w.append(ops[:4])
            first = "no error"
        except OSError as exc:
            first = type(exc).__name__
        unlimit()
        try:
            w.flush()
            again = "flushed"
        except OSError as exc:
            again = type(exc).__name__
        w.close()
        return first, again, w.flushed_seq

    assert in_child(run, fsize=FILE_HEADER_SIZE + 2 * RECORD_SIZE + 20) == \
        ("ok", ("OSError", "WriterFailed", 2))
    held, scan = twin.read_journal(path)
    assert held.tobytes() == ops[:2].tobytes() and scan.torn_bytes == 0
    with twin.JournalWriter(path, resume=True) as w:  # a restart carries on from 3
        assert w.next_seq == 3
        w.append(ops[2:])
    assert path.read_bytes() == GOLDEN_JOURNAL.read_bytes()


@pytest.mark.parametrize("room", [0, 10, FILE_HEADER_SIZE - 1])
def test_journal_is_created_whole_or_not_at_all(twin: ModuleType, tmp_path: Path,
                                                room: int) -> None:
    """A disk full while the header is written used to leave 0-15 bytes that every
    restart then refused ("file header truncated"). The header now goes to a temporary
    file that is renamed into place only when whole: nothing is left, and a restart
    (resume) simply starts the journal."""
    path = tmp_path / "j"
    result = in_child(lambda: twin.JournalWriter(path) and "made", fsize=room)
    assert result == ("raised", "OSError", f"[Errno {errno.EFBIG}] File too large: '{path}'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.lock"]  # no journal, no .tmp
    with twin.JournalWriter(path, resume=True) as w:
        w.append(golden_ops())
    assert path.read_bytes() == GOLDEN_JOURNAL.read_bytes()


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    """Two engines on one journal (a supervisor restarting one while the old still runs)
    used to interleave records. The first writer holds a lock (flock on ``j.lock``); a
    second one, of either twin, in this process or another, is refused and the file is
    left as it was, whether it meant to resume or to start afresh."""
    path = tmp_path / "j"
    words = (f"[Errno {errno.EWOULDBLOCK}] journal: another writer has this journal open "
             f"(it holds {path}.lock); refusing a second: '{path}'")
    for first, second in [("naive", "optimized"), ("optimized", "naive"),
                          ("naive", "naive"), ("optimized", "optimized")]:
        path.unlink(missing_ok=True)
        with TWINS[first].JournalWriter(path) as w:
            w.append(golden_ops()[:5])
            before = path.read_bytes()
            for resume in (True, False):
                with pytest.raises(JournalLocked) as info:
                    TWINS[second].JournalWriter(path, resume=resume)
                assert str(info.value) == words
                opener = functools.partial(TWINS[second].JournalWriter, path)
                assert in_child(opener) == ("raised", "JournalLocked", words)
            assert path.read_bytes() == before
            w.append(golden_ops()[5:])
        with TWINS[second].JournalWriter(path, resume=True) as again:  # the lock is free
            assert again.next_seq == len(GOLDEN_OPS) + 1
    assert path.read_bytes() == GOLDEN_JOURNAL.read_bytes()


def test_output_waits_for_the_journal(twin: ModuleType, tmp_path: Path) -> None:
    """Output commit: submit used to hand out a batch's fills while its records sat in
    the writer's buffer, so a kill could take back commands whose fills were already
    out. Now an output is released only once the journal has flushed its commands,
    every output exactly once, in order, whatever the policy."""
    ops = order_flow(1000, seed=7, bad_fraction=0.02)
    clean_fills, clean_rejects = twin.Engine().apply(ops)
    with twin.JournalWriter(tmp_path / "j", "batch", batch=64) as w:
        engine = twin.Engine(w)
        released: list[Any] = []
        for at in range(0, len(ops), 8):
            out = engine.submit(ops[at:at + 8])
            assert all(o.last_seq <= w.flushed_seq for o in out)
            released += out
            if (at // 8) % 8 != 7:  # 8 commands per submit: 64 flush on every 8th
                assert out == [] and w.flushed_seq == at // 64 * 64
        released += engine.flush()
    assert [(o.first_seq, o.last_seq) for o in released] == \
        [(at + 1, min(at + 8, len(ops))) for at in range(0, len(ops), 8)]
    fills = np.concatenate([o.fills for o in released])
    assert fills_text([fills]) == fills_text([clean_fills])
    assert sum(len(o.rejects) for o in released) == len(clean_rejects) > 0
    assert len(engine.outbox) == 0


def test_timer_flushes_when_traffic_stops(twin: ModuleType, tmp_path: Path) -> None:
    """The timer policy used to check its clock only at the next append: when traffic
    stopped, the last records (and their outputs) waited for ever. Now ``due_in()``
    says when they are due and ``poll()``, which an event loop calls when the wait is
    up, flushes and releases them."""
    with twin.JournalWriter(tmp_path / "j", "timer", interval_ms=50) as w:
        engine = twin.Engine(w)
        assert w.due_in() is None and engine.poll() == []
        assert engine.submit(golden_ops()[:3]) == []  # the first record starts the clock
        wait = w.due_in()
        assert wait is not None and 0 < wait <= 0.05
        assert engine.poll() == [] and w.flushed_seq == 0  # not due yet
        time.sleep(wait + 0.01)
        assert w.due_in() == 0.0
        out = engine.poll()
        assert [(o.first_seq, o.last_seq) for o in out] == [(1, 3)] and w.flushed_seq == 3
        assert w.due_in() is None and engine.poll() == []


def test_snapshot_fsyncs_the_journal_first(twin: ModuleType, tmp_path: Path) -> None:
    """The snapshot was fsync'ed, the journal not: after a power cut a snapshot could
    cover commands the journal had lost ("snapshot covers sequence S"). A snapshot now
    fsyncs the journal first (synced_seq), whatever the writer's fsync option."""
    ops = order_flow(300, seed=5)
    with twin.JournalWriter(tmp_path / "j", "batch", batch=64) as w:
        engine = twin.Engine(w)
        engine.submit(ops[:100])
        assert w.synced_seq == 0  # no fsync option: flushed, not synced
        engine.snapshot(tmp_path / "s")
        assert w.synced_seq == w.flushed_seq == 100 == read_snapshot(tmp_path / "s")[0]
    with twin.JournalWriter(tmp_path / "k", "every", fsync=True) as w:
        w.append(ops[:5])
        assert w.synced_seq == w.flushed_seq == 5


def test_power_cut_at_every_byte(twin: ModuleType, tmp_path: Path) -> None:
    """What a power cut can leave: the journal cut anywhere at or after the point the
    last snapshot fsync'ed, with that snapshot (or the one before it, or none) beside
    it. Recovery meets each of these states, at every record boundary and inside every
    record: it rebuilds the book of the records that survived, never fails. (A cut
    before the synced point cannot happen: that is what the fsync order buys.)"""
    ops = order_flow(40, seed=8)
    journal, snap = tmp_path / "j", tmp_path / "s"
    with twin.JournalWriter(journal, "batch", batch=8) as w:
        engine = twin.Engine(w)
        engine.submit(ops[:20])
        engine.snapshot(snap)
        synced = FILE_HEADER_SIZE + w.synced_seq * RECORD_SIZE
        engine.submit(ops[20:])
    full = journal.read_bytes()
    cut_path = tmp_path / "cut"
    for cut in range(synced, len(full) + 1):
        cut_path.write_bytes(full[:cut])
        records = (cut - FILE_HEADER_SIZE) // RECORD_SIZE
        expected = naive.journal.Engine()
        expected.apply(ops[:records])
        for snapshot in (snap, None):
            got, scan, _, _ = twin.Engine.recover(cut_path, snapshot)
            assert scan.last_seq == got.applied_seq == records
            assert books_csv(got.resting_orders()) == books_csv(expected.resting_orders())
    cut_path.write_bytes(full[:synced - 1])  # the state the fsync order rules out
    with pytest.raises(JournalError, match="covers sequence 20"):
        twin.Engine.recover(cut_path, snap)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system with 64 KiB of room (tmpfs), mounted for the test only."""
    with fs_faults.full_disk(tmp_path / "disk", "64k") as mnt:
        yield mnt


@pytest.mark.parametrize("impl", sorted(TWINS))
def test_cli_on_a_full_disk(full_disk: Path, impl: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """`twinmatch journal record` and `run` on a full disk used to die with a Python
    traceback: now one line on stderr and exit status 1; the journal keeps what was
    acknowledged (run's acks), whole, and a restart with room finishes the work."""
    j = full_disk / "j"
    assert cli_main(["journal", "record", str(j), "--impl", impl, "--ops", "5000"]) == 1
    out = capsys.readouterr()
    assert out.err == (f"twinmatch journal record: error: [Errno {errno.ENOSPC}] No space "
                       f"left on device: '{j}'\n")
    _, scan = TWINS[impl].read_journal(j)
    assert 0 < scan.records < 5000 and scan.torn_bytes == 0
    j.unlink()
    assert cli_main(["journal", "run", str(j), "--impl", impl, "--ops", "5000", "--policy",
                     "batch", "--snapshot", str(full_disk / "s"),
                     "--snapshot-every", "200"]) == 1
    out = capsys.readouterr()
    assert out.err.startswith("twinmatch journal run: error: [Errno 28] No space left on "
                              "device") and out.err.count("\n") == 1
    acks = [int(line.split()[1]) for line in out.out.splitlines() if line.startswith("ack ")]
    _, scan = TWINS[impl].read_journal(j)
    assert acks and scan.last_seq >= acks[-1] and scan.torn_bytes == 0
    assert sorted(p.name for p in full_disk.iterdir()) in (["j", "j.lock", "s"], ["j", "j.lock"])


def test_flush_timer_answers_when_traffic_stops(twin: ModuleType, tmp_path: Path) -> None:
    """With no event loop to call poll(), FlushTimer's thread is the timer: the last
    outputs are delivered about interval_ms after traffic stops, with no further call,
    every output once and in order."""
    import threading

    ops = order_flow(200, seed=11)
    got: list[Any] = []
    arrived = threading.Event()

    def deliver(outputs: list[Any]) -> None:
        got.extend(outputs)
        if got[-1].last_seq == len(ops):
            arrived.set()

    with twin.JournalWriter(tmp_path / "j", "timer", interval_ms=30) as w:
        timer = FlushTimer(twin.Engine(w), deliver)
        for at in range(0, len(ops), 7):
            timer.submit(ops[at:at + 7])
        assert arrived.wait(timeout=10), "the timer never flushed"
        assert w.flushed_seq == len(ops) and timer.error is None
        timer.close()
    assert [(o.first_seq, o.last_seq) for o in got] == \
        [(at + 1, min(at + 7, len(ops))) for at in range(0, len(ops), 7)]
