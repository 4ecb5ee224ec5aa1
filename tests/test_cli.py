"""`twinmatch demo` end to end, small: both parts run and report identical results; the
replay report of a feed with hostile text is the same in both twins; the output files of
gen and replay are all or nothing (a full tmpfs, signals, an output that is the input)."""

from __future__ import annotations

import json
import os
import signal
import struct
import time
from pathlib import Path

import pytest

from twinmatch.cli import main


def test_demo_reports_identical_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["demo", "--ops", "3000", "--feed-messages", "4000", "--feed-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "fills identical: yes" in out
    assert "counts, top of book and rejects identical: yes" in out
    assert "to the simulator's books CSV: yes" in out
    assert (tmp_path / "demo-day.itch").exists()


def test_demo_refuses_a_negative_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--seed", "-1"]) == 2
    assert "--seed must be 0..2**64-1, not -1" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [["--ops", "-1"], ["--feed-messages", "5"],
                                 ["--feed-messages", "-3"]])
def test_demo_refuses_bad_sizes(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", *bad]) == 2
    assert "--feed-messages 0 (skip part 2) or at least" in capsys.readouterr().out


# ------------------------------------------------------------ hostile text in the feed

def _rec(msg: bytes) -> bytes:
    return struct.pack(">H", len(msg)) + msg


def _hdr(kind: int, locate: int, ts: int) -> bytes:
    return bytes([kind]) + struct.pack(">HH", locate, 0) + ts.to_bytes(6, "big")


def _r(locate: int, stock: bytes) -> bytes:  # R: stock directory, 39 bytes
    return _rec(_hdr(ord("R"), locate, 1) + stock + b"QN" + struct.pack(">I", 100) + b"NCZ PNN1N"
                + struct.pack(">I", 0) + b"N")


def _h(locate: int, stock: bytes, state: bytes, ts: int) -> bytes:  # H: trading action
    return _rec(_hdr(ord("H"), locate, ts) + stock + state + b" " + b"    ")


def _a(locate: int, ref: int, side: bytes, shares: int, stock: bytes, price: int, ts: int
       ) -> bytes:  # A: add order, 36 bytes
    return _rec(_hdr(ord("A"), locate, ts) + struct.pack(">Q", ref) + side
                + struct.pack(">I", shares) + stock + struct.pack(">I", price))


HOSTILE_NAMES = (b"\x00AB\xff \x80  ", b"NUL\x00    ", b"\xe9T\xc3\xa9    ", b"        ",
                 b"a;b\\  \x7f ")


def hostile_feed() -> bytes:
    """R/H/A messages whose stock names and states hold NUL, bytes >= 0x80, DEL, a semicolon
    and a backslash; messages of types 0x80, 0xff and 0; a crossed book."""
    out = [_r(i + 1, name) for i, name in enumerate(HOSTILE_NAMES)]
    out += [_h(1, HOSTILE_NAMES[0], b"\xff", 5), _h(2, HOSTILE_NAMES[1], b"\x00", 6)]
    out += [_a(i + 1, 10 + i, b"B", 100, name, 1000, 10 + i)
            for i, name in enumerate(HOSTILE_NAMES)]
    out += [_a(1, 99, b"S", 50, HOSTILE_NAMES[0], 900, 20)]
    out += [_rec(bytes([0x80]) + bytes(11)), _rec(bytes([0xFF]) + bytes(2)),
            _rec(bytes([0x00]) + bytes(4))]
    return b"".join(out)


TIMING = ("impl", "seconds", "messages_per_s", "ns_per_message", "peak_rss_mb")


def test_hostile_text_one_rule_both_impls(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    feed = tmp_path / "hostile.itch"
    feed.write_bytes(hostile_feed())
    reports, books, texts = [], [], []
    for impl in ("naive", "optimized"):
        csv_path = tmp_path / f"{impl}.books.csv"
        assert main(["replay", str(feed), "--impl", impl, "--json", "--books",
                     str(csv_path)]) == 0
        report = json.loads(capsys.readouterr().out)
        reports.append({k: v for k, v in report.items() if k not in TIMING})
        books.append(csv_path.read_text(encoding="ascii"))  # ASCII only: \xNN escapes
        assert main(["replay", str(feed), "--impl", impl]) == 0
        texts.append(capsys.readouterr().out.splitlines()[2:])  # no timing lines
    assert reports[0] == reports[1]
    assert books[0] == books[1]
    assert texts[0] == texts[1]
    report = reports[0]
    assert report["by_type"] == {"A": 6, "H": 2, "R": 5, "\\x00": 1, "\\x80": 1, "\\xff": 1}
    assert report["trading_states"] == {"\\x00": 1, "\\xff": 1}
    stocks = {row["locate"]: row["stock"] for row in report["top"]}
    assert stocks == {1: "\\x00AB\\xff \\x80", 2: "NUL\\x00", 3: "\\xe9T\\xc3\\xa9", 4: "",
                      5: "a;b\\x5c  \\x7f"}
    assert report["book_states"]["crossed"] == 1 and report["book_states"]["crossed_now"] == 1
    assert books[0].splitlines()[1] == "1,\\x00AB\\xff \\x80,B,1000,0,10,100"


def test_peak_rss_is_this_process_not_its_parent(tmp_path: Path) -> None:
    # ru_maxrss survives exec on Linux: a small replay started by a process that once held
    # 300 MB would report 300 MB. VmHWM is the child's own high-water mark.
    import subprocess
    import sys
    code = ("import os, sys; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "del b; os.execv(sys.executable, [sys.executable, '-c', "
            "'from twinmatch.replay import peak_rss_mb; print(peak_rss_mb())'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert float(out) < 250, out


def test_cli_formats_are_the_generators() -> None:
    from twinmatch import cli, gen

    assert cli.GEN_FORMATS == gen.FORMATS


@pytest.mark.parametrize("argv, message", [
    (["gen", "flow", "--orders", "-1"], "orders must be 0..100,000,000, not -1"),
    (["gen", "flow", "--orders", "100000001"], "orders must be 0..100,000,000"),
    (["gen", "flow", "--orders", "5", "--seed", "-1"], "seed must be 0..18,446,744"),
    (["gen", "flow", "--orders", "5", "--seed", str(2**64)], "seed must be 0.."),
    (["gen", "flow", "--format", "itch", "--orders", "-5"], "orders must be 0.."),
    (["gen", "flow", "--format", "itch", "--orders", "5", "--symbols", "0"],
     "symbols must be 1..60,000, not 0"),
    (["gen", "flow", "--format", "itch", "--orders", "5", "--symbols", "-2"],
     "symbols must be 1..60,000, not -2"),
    (["gen", "flow", "--format", "itch", "--orders", str(10**30)], "orders must be 0.."),
    (["gen", "market", "--messages", "-1"], "messages must be at least 1,006 for 500"),
    (["gen", "market", "--messages", "25", "--symbols", "10"], "at least 26 for 10 symbols"),
    (["gen", "market", "--messages", str(10**11)], "messages must be 1,006..10,000,000,000"),
    (["gen", "market", "--symbols", "0"], "symbols must be 1..60,000, not 0"),
    (["gen", "market", "--symbols", "60001"], "symbols must be 1..60,000, not 60,001"),
    (["gen", "market", "--seed", "-7"], "seed must be 0.."),
    (["gen", "market", "--messages", "100", "--symbols", "2", "--name", "../up"],
     "name must be a file stem"),
    (["gen", "market", "--messages", "100", "--symbols", "2", "--name", ""],
     "name must be a file stem"),
])
def test_gen_refuses_bad_sizes(argv: list[str], message: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    target = out / "f.itch" if argv[1] == "flow" else out
    assert main([*argv, "--out", str(target)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], captured.err
    assert lines[0].startswith(f"twinmatch gen {argv[1]}: error: ")
    assert not out.exists() or not any(out.iterdir()), "a refused command wrote a file"


@pytest.mark.parametrize("argv", [
    ["gen", "flow", "--orders", "x"], ["gen", "market", "--messages", "1.5"],
    ["gen", "market", "--gzip-level", "0"], ["gen", "flow", "--format", "pcap"],
])
def test_gen_refuses_non_numbers(argv: list[str], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path / "x")])
    assert exc.value.code == 2
    assert "error: argument" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_gen_zero_orders_is_a_valid_flow(tmp_path: Path) -> None:
    assert main(["gen", "flow", "--orders", "0", "--out", str(tmp_path / "o.csv")]) == 0
    assert (tmp_path / "o.csv").read_text() == "order_id,price,quantity,side\n"


def _one_line_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"twinmatch {command}: error: "), lines
    return lines[0]


@pytest.mark.parametrize("command, kind, message", [
    *((command, kind, message) for command in ("replay", "compare") for kind, message in [
        ("missing", "no such file"), ("directory", "is a directory")]),
    # replay reads a FIFO or a device as a stream (tests/test_itch.py); compare reads the
    # feed once per twin, so it takes regular files only, refused before they are opened
    ("compare", "fifo", "not a regular file"), ("compare", "device", "not a regular file"),
    ("compare", "stdin", "can be read once"),
])
@pytest.mark.timeout(60)
def test_replay_refuses_what_is_not_a_feed_file(
    command: str, kind: str, message: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import os

    path = {"missing": tmp_path / "nope.itch", "directory": tmp_path,
            "fifo": tmp_path / "fifo", "device": Path("/dev/null"), "stdin": Path("-")}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # opening it would block for ever: it must be refused first
    assert main([command, str(path)]) == 2
    assert message in _one_line_error(capsys, command)


def test_replay_refuses_unwritable_outputs(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from twinmatch import gen

    feed = tmp_path / "day.itch"
    feed.write_bytes(gen.market_day_bytes(60, 3, 1)[0])
    assert main(["replay", str(feed), "--books", str(tmp_path)]) == 2
    assert "is a directory" in _one_line_error(capsys, "replay")
    assert main(["replay", str(feed), "--fills", str(tmp_path / "no" / "f.csv")]) == 2
    assert "no such directory" in _one_line_error(capsys, "replay")


@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_replay_reports_a_bad_feed_in_one_line(impl: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from twinmatch import gen

    feed = tmp_path / "cut.itch"
    feed.write_bytes(gen.market_day_bytes(60, 3, 1)[0][:-3])
    assert main(["replay", str(feed), "--impl", impl]) == 1
    assert "at byte 2142" in _one_line_error(capsys, "replay")
    assert main(["compare", str(feed)]) == 1
    assert "at byte 2142" in capsys.readouterr().err


def test_commands_start_no_blas_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() asks numpy's OpenBLAS (imported later, by the command) for one thread: no
    pool spinning beside the threads that work. A value the user set is kept."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "3"


# ------------------------------------------------------------ output files (issue 29)
# One rule for every command that writes files (twinmatch/atomic.py): a temporary name,
# fsync, rename only when the whole run succeeded; on failure or SIGINT/SIGTERM nothing
# is left; an output that is the input is refused.

def _flow(tmp_path: Path) -> Path:
    """A small ITCH order flow whose match-mode replay fills a few thousand times."""
    from twinmatch.gen import write_itch_flow

    path = tmp_path / "flow.itch"
    write_itch_flow(path, 6_000, symbols=4, seed=5)
    return path


@pytest.mark.parametrize("impl", ["naive", "optimized"])
@pytest.mark.parametrize("option", ["--fills", "--books"])
def test_replay_refuses_its_own_feed_as_output(impl: str, option: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`replay F --fills F` truncated the feed before reading it (0 messages, exit 0)."""
    feed = _flow(tmp_path)
    data = feed.read_bytes()
    link = tmp_path / "same-inode.itch"
    os.link(feed, link)
    for target in (feed, link):  # the same file by another name, too
        assert main(["replay", str(feed), "--impl", impl, option, str(target)]) == 2
        assert "is an input of this run" in _one_line_error(capsys, "replay")
        assert feed.read_bytes() == data
    assert main(["replay", str(feed), "--fills", str(tmp_path / "x"),
                 "--books", str(tmp_path / "x")]) == 2
    assert "name the same file" in _one_line_error(capsys, "replay")
    if impl == "naive" and option == "--fills":  # the feed as standard input: `- < F`
        import subprocess
        import sys
        with open(feed, "rb") as stdin:
            done = subprocess.run([sys.executable, "-m", "twinmatch", "replay", "-",
                                   option, str(feed)], stdin=stdin, capture_output=True,
                                  text=True, timeout=60)
        assert done.returncode == 2 and "is an input of this run" in done.stderr
        assert feed.read_bytes() == data


@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_replay_outputs_are_all_or_nothing(impl: str, tmp_path: Path) -> None:
    """A replay that fails (a cut feed) leaves neither fills nor books nor a part; one
    that succeeds leaves exactly the two files."""
    from tests.fs_faults import listing

    feed = _flow(tmp_path)
    cut = tmp_path / "cut.itch"
    cut.write_bytes(feed.read_bytes()[:-3])
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--impl", impl, "--mode", "match", "--fills", str(out / "f.csv"),
            "--books", str(out / "b.csv")]
    assert main(["replay", str(cut), *argv]) == 1
    assert listing(out) == []
    assert main(["replay", str(feed), *argv]) == 0
    assert listing(out) == ["b.csv", "f.csv"]
    assert (out / "f.csv").read_text().count("\n") > 100


@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_replay_on_a_full_disk(impl: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """The fills CSV outgrows a 64 KiB tmpfs: one line, exit 1, no file left there."""
    from tests.fs_faults import full_disk, listing

    feed = _flow(tmp_path)
    with full_disk(tmp_path / "disk") as disk:
        assert main(["replay", str(feed), "--impl", impl, "--mode", "match",
                     "--fills", str(disk / "fills.csv"), "--books", str(disk / "b.csv")]) == 1
        assert "No space left on device" in _one_line_error(capsys, "replay")
        assert listing(disk) == []


@pytest.mark.parametrize("argv", [
    ["gen", "market", "--messages", "30000", "--symbols", "20", "--format", "all"],
    ["gen", "flow", "--format", "itch", "--orders", "30000", "--symbols", "20"],
    ["gen", "flow", "--orders", "30000"],
    ["gen", "uniform", "--orders", "30000"],
])
def test_gen_on_a_full_disk(argv: list[str], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """gen on a full disk: was an OSError traceback and files cut under their final
    names; now one line, exit 1, nothing left."""
    from tests.fs_faults import full_disk, listing

    with full_disk(tmp_path / "disk") as disk:
        target = disk if argv[1] == "market" else disk / "f.out"
        assert main([*argv, "--out", str(target)]) == 1
        assert "No space left on device" in _one_line_error(capsys, f"gen {argv[1]}")
        assert listing(disk) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_gen_stopped_by_a_signal_leaves_nothing(sig: int, tmp_path: Path) -> None:
    from tests.fs_faults import listing, parts, start, stop, wait_for

    out = tmp_path / "out"
    out.mkdir()
    proc = start("gen", "market", "--messages", "50000000", "--symbols", "100",
                 "--format", "all", "--out", str(out))
    feed = out / f".day.itch.part-{proc.pid}"
    wait_for(lambda: len(parts(out)) == 5 and feed.exists() and feed.stat().st_size > 0,
             proc=proc)
    rc, err = stop(proc, sig)
    assert rc == 128 + sig, err
    assert f"interrupted by {signal.Signals(sig).name}" in err
    assert listing(out) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_replay_stopped_by_sigterm_leaves_nothing(impl: str, tmp_path: Path) -> None:
    """The feed comes through a FIFO that stops mid-day: the replay waits for more, gets
    SIGTERM, and removes its fills and books parts."""
    from tests.fs_faults import listing, parts, start, wait_for

    data = _flow(tmp_path).read_bytes()
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    proc = start("replay", str(fifo), "--impl", impl, "--mode", "match",
                 "--fills", str(out / "f.csv"), "--books", str(out / "b.csv"))
    wait_for(lambda: len(parts(out)) == 2, proc=proc)
    with open(fifo, "wb") as writer:
        writer.write(data[:len(data) // 2])
        writer.flush()
        time.sleep(0.5)  # it reads that much, then waits for the rest
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        # The optimized reader (optimized/itch.py) reads on a thread of its own and, once
        # interrupted, waits for the read under way: the pipe must end for it to return.
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert listing(out) == []
