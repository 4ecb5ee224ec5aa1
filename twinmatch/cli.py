"""The command line: ``twinmatch demo | gen | ...`` (also ``python -m twinmatch``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

# Only the standard library at module level: `twinmatch --help` and a bad argument
# cost no numpy and no native module. Each command imports what it uses.
if TYPE_CHECKING:
    import numpy as np

    from twinmatch.gen import GenResult

# The feed formats of `gen market` (twinmatch.gen.FORMATS; a test keeps them equal).
GEN_FORMATS = ("itch", "gz", "pcap", "csv")


def _fills_key(fills: np.ndarray) -> bytes:
    import numpy as np

    return np.ascontiguousarray(fills).tobytes()


def _run_batch(book: Any, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fills, rejects = book.apply(ops)
    return fills, rejects


def demo(args: argparse.Namespace) -> int:
    """Replay one generated stream through naive, optimized and the std::map baseline."""
    from naive.book import Book as NaiveBook
    from optimized import _native
    from optimized.book import Book as OptimizedBook
    from optimized.book import MapBook
    from twinmatch.flow import cached_order_flow

    demo_symbols = 200
    least = int(_native.GenSimulator.minimum_messages(demo_symbols))
    if args.ops < 0 or 0 < args.feed_messages < least or args.feed_messages < 0:
        print(f"twinmatch demo: --ops must be >= 0 and --feed-messages 0 (skip part 2) or at "
              f"least {least:,} (the S, R and H messages of {demo_symbols} symbols)")
        return 2
    if not 0 <= args.seed < 2**64:
        print(f"twinmatch demo: --seed must be 0..2**64-1, not {args.seed}")
        return 2
    t0 = time.perf_counter()
    ops = cached_order_flow(args.ops, args.seed)
    print(f"twinmatch demo: {len(ops):,} book operations for one symbol (seed {args.seed}), "
          f"generated or loaded in {time.perf_counter() - t0:.1f} s")
    print(f"machine: {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}, {_native.COMPILER} {_native.BUILD_TYPE} -O3")
    print("each time: one Book.apply(ops) call over the whole numpy array "
          "(matching + building the fills array; no parsing, no logging)\n")

    impls: list[tuple[str, Callable[[], Any]]] = [
        ("naive (Python)", NaiveBook),
        ("optimized (C++)", OptimizedBook),
        ("baseline (C++ std::map)", MapBook),
    ]
    results: list[tuple[str, float, np.ndarray, np.ndarray, Any]] = []
    for name, make in impls:
        book = make()
        start = time.perf_counter()
        fills, rejects = _run_batch(book, ops)
        seconds = time.perf_counter() - start
        results.append((name, seconds, fills, rejects, book))

    naive_seconds = results[0][1]
    print(f"{'implementation':<26}{'seconds':>10}{'ops/s':>14}{'vs naive':>10}{'fills':>10}")
    for name, seconds, fills, _, _ in results:
        print(f"{name:<26}{seconds:>10.3f}{len(ops) / seconds:>14,.0f}"
              f"{naive_seconds / seconds:>9.1f}x{len(fills):>10,}")

    reference = results[0]
    identical = True
    for name, _, fills, rejects, book in results[1:]:
        same = (
            _fills_key(fills) == _fills_key(reference[2])
            and _fills_key(rejects) == _fills_key(reference[3])
            and book.depth(0, 10**9) == reference[4].depth(0, 10**9)
            and book.depth(1, 10**9) == reference[4].depth(1, 10**9)
            and len(book) == len(reference[4])
        )
        identical = identical and same
        verdict = "identical to naive" if same else "DIFFERENT from naive"
        print(f"{name}: fills, rejects and final book {verdict}")
    print("\nfills identical: " + ("yes (checked, byte for byte)" if identical else "NO"))
    feed_ok = True
    if args.feed_messages > 0:
        feed_ok = _demo_feed(args.feed_messages, args.seed, args.feed_dir, demo_symbols)
    return 0 if identical and feed_ok else 1


def _demo_feed(messages: int, seed: int, out: Path, symbols: int) -> bool:
    """Part two: a generated ITCH day replayed through both twins' many-book markets."""
    from twinmatch.gen import write_market_day
    from twinmatch.replay import replay

    made = write_market_day(out, messages, symbols=symbols, seed=seed, name="demo-day")
    day, expected_books = made.paths[0], out / "demo-day.books.csv"
    print(f"\ntwinmatch demo, part 2: a generated ITCH 5.0 day, {messages:,} messages "
          f"({day.stat().st_size:,} bytes, {symbols} symbols), written to {day}")
    print("each time: read the file + decode every message + maintain every symbol's book "
          "(no matching, no logging)\n")
    print(f"{'implementation':<26}{'seconds':>10}{'messages/s':>14}{'vs naive':>10}")
    results = {}
    for impl in ("naive", "optimized"):
        results[impl] = replay(day, impl, "book")
    naive_s = results["naive"].report["seconds"]
    for impl, name in (("naive", "naive (Python)"), ("optimized", "optimized (C++)")):
        r = results[impl].report
        print(f"{name:<26}{r['seconds']:>10.3f}{r['messages_per_s']:>14,.0f}"
              f"{naive_s / max(r['seconds'], 1e-12):>9.1f}x")
    naive, opt = results["naive"], results["optimized"]
    keys = ("messages", "by_type", "anomalies", "rejects", "live_orders", "books", "top")
    same = all(naive.report[k] == opt.report[k] for k in keys)
    books = naive.market.books_csv() == opt.market.books_csv() == expected_books.read_text()
    print("\ncounts, top of book and rejects identical: " + ("yes" if same else "NO"))
    print("final books identical to each other and to the simulator's books CSV: "
          + ("yes (checked, line for line)" if books else "NO"))
    return same and books


def _report(what: str, result: GenResult) -> None:
    counts = " ".join(f"{k}={v:,}" for k, v in sorted(result.counts.items()))
    print(f"twinmatch gen {what}: {result.messages:,} messages in {result.seconds:.1f} s "
          f"({result.messages / max(result.seconds, 1e-9):,.0f} messages/s, generation and "
          f"writing every file)")
    print(f"by type: {counts}")
    if result.live_orders:
        print(f"resting orders at the end: {result.live_orders:,}")
    if result.packets:
        print(f"pcap: {result.packets:,} MoldUDP64 packets, {result.heartbeats:,} heartbeats")
    for path in result.paths:
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


def _bad_argument(command: str, exc: Exception) -> int:
    """A refused argument: one line on stderr, exit status 2 (as argparse does)."""
    print(f"twinmatch {command}: error: {_one_line(exc)}", file=sys.stderr)
    return 2


def gen_market(args: argparse.Namespace) -> int:
    """A market-data day: ITCH the simulated exchange publishes, plus its final books."""
    from twinmatch.atomic import OutputError
    from twinmatch.gen import FORMATS, GenArgumentError, write_market_day

    formats = list(FORMATS) if args.format == "all" else [args.format]
    try:
        result = write_market_day(args.out, args.messages, args.symbols, args.seed, formats,
                                  args.name, args.gzip_level, args.all_types,
                                  args.profile, progress=True)
    except (GenArgumentError, OutputError) as exc:
        return _bad_argument("gen market", exc)
    except OSError as exc:  # a full disk, a failed write: nothing is left under a final name
        return _feed_error("gen market", exc)
    _report("market", result)
    return 0


def gen_flow(args: argparse.Namespace) -> int:
    """Order flow for a matching engine: CSV (one symbol) or ITCH (many symbols)."""
    from twinmatch.atomic import OutputError
    from twinmatch.gen import GenArgumentError, write_csv_flow, write_itch_flow

    try:
        if args.format == "csv":
            result = write_csv_flow(args.out, args.orders, args.seed)
        else:
            result = write_itch_flow(args.out, args.orders, args.symbols, args.seed)
    except (GenArgumentError, OutputError) as exc:
        return _bad_argument("gen flow", exc)
    except OSError as exc:
        return _feed_error("gen flow", exc)
    _report("flow", result)
    return 0


def gen_uniform(args: argparse.Namespace) -> int:
    """One symbol's uniform adds (ITCH): half buys then half sells, prices 10,000..90,000."""
    from twinmatch.atomic import OutputError
    from twinmatch.gen import GenArgumentError, write_uniform_flow

    try:
        result = write_uniform_flow(args.out, args.orders, args.seed)
    except (GenArgumentError, OutputError) as exc:
        return _bad_argument("gen uniform", exc)
    except OSError as exc:
        return _feed_error("gen uniform", exc)
    _report("uniform", result)
    return 0


def _input_problem(path: Path, streams: bool = True) -> str | None:
    """Why ``path`` cannot be read as a feed, or None. ``streams``: standard input (``-``),
    a FIFO or a character device is a feed too, read once as it comes (replay); without it
    only a regular file is (compare reads the feed once per twin)."""
    import stat

    if str(path) == "-":
        return None if streams else "-: standard input can be read once; compare needs a file"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"{path}: is a directory, not a feed file"
    if streams and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        return None if os.access(path, os.R_OK) else f"{path}: permission denied"
    if not stat.S_ISREG(mode):
        kind = "a device, FIFO or socket" if streams else "a device or FIFO: it can be read once"
        return f"{path}: not a regular file ({kind}), not a feed file"
    if not os.access(path, os.R_OK):
        return f"{path}: permission denied"
    return None


def _output_problem(feed: Path, *outputs: Path | None) -> str | None:
    """Why the output files (--fills, --books) cannot be written, or None: a directory,
    a missing directory, the feed itself (the same inode: writing would destroy it), or
    one file named twice."""
    from twinmatch.atomic import OutputError, Outputs

    probe = Outputs("replay", [0 if str(feed) == "-" else feed])
    named = [p for p in outputs if p is not None]
    if len({os.path.abspath(p) for p in named}) < len(named):
        return f"{named[0]}: --fills and --books name the same file"
    for path in named:
        try:
            probe.check(path)
        except OutputError as exc:
            return str(exc)
    return None


def _feed_error(command: str, exc: Exception, path: Path | None = None) -> int:
    """The feed itself is bad (an error naming the offset, line or id): one line, exit 1;
    ``path``: the file, named first unless the error names it already."""
    text = _one_line(exc)
    if path is not None and str(path) not in text:
        text = f"{path}: {text}"
    print(f"twinmatch {command}: error: {text}", file=sys.stderr)
    return 1


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def replay_cmd(args: argparse.Namespace) -> int:
    """Replay a feed through one twin's many-books market and report."""
    if len(args.file) > 1 or args.workers is not None or args.cluster is not None:
        return replay_many_cmd(args)
    args.file = args.file[0]
    problem = _input_problem(args.file) or _output_problem(args.file, args.fills, args.books)
    if problem:
        return _bad_argument("replay", ValueError(problem))
    try:
        return _replay(args)
    except (ValueError, OSError) as exc:
        return _feed_error("replay", exc, args.file)


def _replay(args: argparse.Namespace) -> int:
    import json

    if args.pipeline:
        from contract.pipeline import PipelineInterrupted
        from twinmatch import pipeline_replay
        from twinmatch.atomic import Outputs

        code = 0
        with Outputs("replay", [args.file]) as outputs:  # the fills: whole, or nothing
            part = None if args.fills is None else outputs.add(args.fills)
            try:
                report = pipeline_replay.replay_pipeline(args.file, args.impl, args.mode,
                                                         part, policy=args.policy,
                                                         logger_delay_ns=args.logger_delay_ns)
            except PipelineInterrupted as e:  # Ctrl-C or SIGTERM: stopped and drained;
                report, code = e.report, 130  # the fills are exactly those of the prefix
            outputs.commit()                  # the report names (consumed): kept
        print(json.dumps(report, indent=2) if args.json else pipeline_replay.format_report(report),
              end="\n" if args.json else "", flush=True)
        return code
    from twinmatch.replay import format_report, replay

    result = replay(args.file, args.impl, args.mode, args.fills, args.books, progress=True)
    if args.json:
        print(json.dumps(result.report, indent=2))
    else:
        print(format_report(result.report), end="")
    return 0


def replay_many_cmd(args: argparse.Namespace) -> int:
    """Chapter 10: many feeds, one task each, in worker processes or on a dask cluster;
    the per-file reports merged (twinmatch/multi_replay.py)."""
    import json

    from contract.shard import usable_cpus
    from twinmatch.multi_replay import Stopped, format_many, replay_many

    if args.fills or args.books or args.pipeline:
        return _bad_argument("replay", ValueError(
            "--fills, --books and --pipeline take one file, without --workers or --cluster"))
    # --cluster local without --workers: one worker per CPU this process can keep busy
    workers = args.workers if args.workers is not None else (
        usable_cpus() if args.cluster == "local" else 1)
    if workers < 1:
        return _bad_argument("replay", ValueError(f"--workers must be at least 1, got {workers}"))
    for path in args.file:
        problem = _input_problem(path, streams=False)
        if problem:
            return _bad_argument("replay", ValueError(problem))
    try:
        report = replay_many(args.file, args.impl, args.mode, workers, args.cluster,
                             progress=True)
    except Stopped as stop:  # SIGINT / SIGTERM: the workers are gone, nothing written
        print(f"twinmatch replay: {stop}", file=sys.stderr)
        return 128 + stop.signum
    except (ValueError, OSError) as exc:
        return _feed_error("replay", exc)
    print(json.dumps(report, indent=2) if args.json else format_many(report), end="\n"
          if args.json else "")
    return 0


def compare_cmd(args: argparse.Namespace) -> int:
    """Run both twins on one feed; require identical fills, counts and final books."""
    problem = _input_problem(args.file, streams=False)
    if problem:
        return _bad_argument("compare", ValueError(problem))
    try:
        return _compare(args)
    except (ValueError, OSError) as exc:
        return _feed_error("compare", exc, args.file)


def _compare(args: argparse.Namespace) -> int:
    from twinmatch.replay import replay

    if not args.file.is_file():  # "-", a pipe or a FIFO could be read only once
        print(f"twinmatch compare: {args.file} is not a regular file (each twin reads it)",
              file=sys.stderr)
        return 2
    results = {}
    for impl in ("naive", "optimized"):
        results[impl] = replay(args.file, impl, args.mode, keep_fills=True, progress=True)
        r = results[impl].report
        print(f"{impl:<10} {r['messages']:>12,} messages in {r['seconds']:8.2f} s "
              f"({r['messages_per_s']:>12,.0f} messages/s, {r['ns_per_message']:,.0f} ns/message,"
              f" read + decode + books)")
    naive, opt = results["naive"], results["optimized"]
    keys = ("messages", "by_type", "fills", "volume", "anomalies", "rejects", "live_orders",
            "books", "top")
    same_report = all(naive.report[k] == opt.report[k] for k in keys)
    same_fills = _fills_equal(naive.fills, opt.fills)
    same_books = naive.market.books_csv() == opt.market.books_csv()
    print(f"fills: {naive.report['fills']:,} "
          + ("identical" if same_fills else "DIFFERENT"))
    print("final books: " + ("identical" if same_books else "DIFFERENT"))
    print("counts (types, anomalies, rejects, top of book): "
          + ("identical" if same_report else "DIFFERENT"))
    speedup = naive.report["seconds"] / max(opt.report["seconds"], 1e-12)
    print(f"speedup: optimized is {speedup:,.1f}x naive (end to end, mode {args.mode})")
    return 0 if same_report and same_fills and same_books else 1


def _fills_equal(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    # Field by field: numpy leaves a record's padding bytes undefined.
    return len(a) == len(b) and bool((a == b).all())


# --------------------------------------------------------------- journal (chapter 11)

def _journal_twin(impl: str) -> Any:
    """naive.journal or optimized.journal: the same API."""
    import importlib

    return importlib.import_module(f"{impl}.journal")


def _journal_input(args: argparse.Namespace) -> np.ndarray:
    """The commands: an OPS_DTYPE .npy file (--input), or generated (--ops, --seed)."""
    import numpy as np

    from contract.dtypes import OPS_DTYPE, as_records
    from twinmatch.flow import order_flow

    if args.input is not None:
        return as_records(np.load(args.input, allow_pickle=False), OPS_DTYPE, "--input")
    return order_flow(args.ops, args.seed, bad_fraction=args.bad_fraction)


class _Digest:
    """SHA-256 of the fills CSV (as fed, in order) and of the final books CSV."""

    def __init__(self) -> None:
        import hashlib

        from twinmatch.replay import FILLS_HEADER

        self.fills = hashlib.sha256(FILLS_HEADER.encode())
        self.count = 0

    def add(self, fills: np.ndarray) -> None:
        import io

        from twinmatch.replay import write_fills

        text = io.StringIO()
        write_fills(text, fills)
        self.fills.update(text.getvalue().encode())
        self.count += len(fills)

    def lines(self, books: str) -> list[str]:
        import hashlib

        rows = books.count("\n") - 1  # less the header
        return [f"fills {self.count} sha256:{self.fills.hexdigest()}",
                f"books {rows} sha256:{hashlib.sha256(books.encode()).hexdigest()}"]


def _writer(twin: Any, args: argparse.Namespace, resume: bool) -> Any:
    if args.chunk < 1:
        raise ValueError(f"--chunk must be >= 1, got {args.chunk}")
    return twin.JournalWriter(args.journal, args.policy, batch=args.batch,
                              interval_ms=args.interval_ms, fsync=args.fsync, resume=resume)


def journal_record(args: argparse.Namespace) -> int:
    """Run commands through a journaled engine; print the journal's size and the digests.

    The digest is over the outputs as the engine released them (output commit); a
    write error (a full disk) is one line on stderr and exit status 1."""
    from contract.journal import JournalError, books_csv

    twin = _journal_twin(args.impl)
    try:
        ops = _journal_input(args)
        writer = _writer(twin, args, resume=False)
    except (ValueError, TypeError, OSError) as exc:
        return _bad_argument("journal record", exc)
    digest = _Digest()
    engine = twin.Engine(writer)
    t0 = time.perf_counter()
    try:
        with writer:
            for at in range(0, len(ops), args.chunk):
                for out in engine.submit(ops[at:at + args.chunk]):
                    digest.add(out.fills)
            for out in engine.flush():
                digest.add(out.fills)
    except OSError as exc:  # the writer failed: what it flushed is in the file, whole
        return _feed_error("journal record", exc)
    seconds = time.perf_counter() - t0
    try:
        _, scan = twin.read_journal(args.journal)
    except JournalError as exc:
        return _feed_error("journal record", exc)
    print(f"journal {args.journal}: {scan.records:,} records, {scan.valid_end:,} bytes, "
          f"{writer.flushes:,} flushes (policy {args.policy}), {seconds:.2f} s")
    print("\n".join(digest.lines(books_csv(engine.resting_orders()))))
    return 0


def journal_replay(args: argparse.Namespace) -> int:
    """Rebuild the book from a journal (after a snapshot, if given); print the digests."""
    from contract.journal import JournalError, books_csv

    twin = _journal_twin(args.impl)
    runs: list[list[str]] = []
    for _ in range(2 if args.twice else 1):
        try:
            engine, scan, fills, _ = twin.Engine.recover(args.journal, args.snapshot)
        except JournalError as exc:
            return _feed_error("journal replay", exc)
        except OSError as exc:
            return _bad_argument("journal replay", exc)
        digest = _Digest()
        digest.add(fills)
        books = books_csv(engine.resting_orders())
        runs.append(digest.lines(books))
    if scan.message():
        print(scan.message(), file=sys.stderr)
    print(f"journal {args.journal}: {scan.records:,} records, the book rebuilt up to "
          f"sequence {engine.applied_seq}")
    print("\n".join(runs[0]))
    if args.fills is not None:
        from twinmatch.replay import FILLS_HEADER, write_fills

        with open(args.fills, "w") as out:
            out.write(FILLS_HEADER)
            write_fills(out, fills)
    if args.books is not None:
        Path(args.books).write_text(books)
    if args.twice:
        same = runs[0] == runs[1]
        print("replayed twice: " + ("identical" if same else "DIFFERENT"))
        return 0 if same else 1
    return 0


def journal_run(args: argparse.Namespace) -> int:
    """A restartable engine: recover from the journal (and snapshot), carry on with the
    input from the next sequence number, print ``ack SEQ`` once the outputs of the
    commands up to SEQ are released (their records flushed: output commit).

    What the crash test kills with SIGKILL and starts again (tests/test_journal.py). A
    second engine on the same journal, or a write that fails, is one line on stderr.
    """
    from contract.journal import JournalError, books_csv

    twin = _journal_twin(args.impl)
    try:
        ops = _journal_input(args)
        if args.snapshot_every < 1:
            raise ValueError(f"--snapshot-every must be >= 1, got {args.snapshot_every}")
    except (ValueError, TypeError, OSError) as exc:
        return _bad_argument("journal run", exc)
    try:
        # The writer first: its lock keeps a second engine from recovering meanwhile.
        writer = _writer(twin, args, resume=True)
    except JournalError as exc:
        return _feed_error("journal run", exc)
    except (ValueError, OSError) as exc:
        return _bad_argument("journal run", exc)
    try:
        with writer:
            return _journal_serve(twin, args, ops, writer, books_csv)
    except (JournalError, OSError) as exc:
        return _feed_error("journal run", exc)


def _journal_serve(twin: Any, args: argparse.Namespace, ops: np.ndarray, writer: Any,
                   books_csv: Callable[[np.ndarray], str]) -> int:
    """journal run, its writer open: recover, then submit, ack, snapshot."""
    if writer.scan is not None:  # the writer has read the journal and cut a torn tail
        if writer.scan.message():
            print(writer.scan.message(), flush=True)
        engine, _, _, _ = twin.Engine.recover(args.journal, args.snapshot)
    else:
        engine = twin.Engine()
    engine.journal = writer
    print(f"start {engine.applied_seq}", flush=True)

    def ack(outputs: list[Any]) -> None:
        if outputs:
            print(f"ack {outputs[-1].last_seq}", flush=True)

    since_snapshot = 0
    for at in range(engine.applied_seq, len(ops), args.chunk):
        chunk = ops[at:at + args.chunk]
        ack(engine.submit(chunk))
        since_snapshot += len(chunk)
        if args.snapshot is not None and since_snapshot >= args.snapshot_every:
            engine.snapshot(args.snapshot)  # flushes and fsyncs the journal first
            since_snapshot = 0
    ack(engine.flush())
    books = books_csv(engine.resting_orders())
    print(f"done {engine.applied_seq} " + digest_books(books), flush=True)
    return 0


def digest_books(books: str) -> str:
    import hashlib

    return "books sha256:" + hashlib.sha256(books.encode()).hexdigest()


def _add_journal_parser(sub: Any) -> None:
    j = sub.add_parser("journal", help="chapter 11: an input journal, its replay and recovery")
    j_sub = j.add_subparsers(dest="journal_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("journal", type=Path, help="the journal file")
        p.add_argument("--impl", choices=["naive", "optimized"], default="optimized")

    def commands(p: argparse.ArgumentParser) -> None:
        p.add_argument("--input", type=Path, help="an OPS_DTYPE .npy file of commands")
        p.add_argument("--ops", type=int, default=100_000, help="else: generated commands")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--bad-fraction", type=float, default=0.0,
                       help="share of generated commands the book rejects")
        p.add_argument("--policy", choices=["every", "batch", "timer"], default="batch",
                       help="flush every record, every --batch records, or every --interval-ms")
        p.add_argument("--batch", type=int, default=64)
        p.add_argument("--interval-ms", type=float, default=5.0)
        p.add_argument("--fsync", action="store_true", help="fsync at every flush")
        p.add_argument("--chunk", type=int, default=256, help="commands per submit")

    rec = j_sub.add_parser("record", help="run commands through a journaled engine")
    common(rec)
    commands(rec)
    rec.set_defaults(func=journal_record)
    rep = j_sub.add_parser("replay", help="rebuild the book from a journal; print digests")
    common(rep)
    rep.add_argument("--snapshot", type=Path, help="start from this snapshot")
    rep.add_argument("--fills", type=Path, help="write the fills CSV here")
    rep.add_argument("--books", type=Path, help="write the final books CSV here")
    rep.add_argument("--twice", action="store_true", help="replay twice and compare")
    rep.set_defaults(func=journal_replay)
    run = j_sub.add_parser("run", help="a restartable engine (recovers, then carries on)")
    common(run)
    commands(run)
    run.add_argument("--snapshot", type=Path, help="snapshot file (read and written)")
    run.add_argument("--snapshot-every", type=int, default=1000, metavar="N")
    run.set_defaults(func=journal_run)


def serve_cmd(args: argparse.Namespace) -> int:
    """Chapter 12: an order-entry server on 127.0.0.1 until SIGINT or SIGTERM."""
    import json
    import signal
    import threading

    from contract.soupbin import EntryConfig
    from twinmatch.load import load_users

    try:
        cfg = EntryConfig.load(args.config) if args.config else EntryConfig()
        if args.load_users:
            cfg.users = {**cfg.users, **load_users(args.load_users)}
        if args.clock:
            cfg.clock = args.clock
        cfg.check()
    except (OSError, ValueError) as exc:
        return _bad_argument("serve", exc)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        if args.impl == "naive":
            from naive.entry import Server
            server: Any = Server(cfg, args.port, itch_out=args.itch_out)
        else:
            from optimized.entry import Server as OptimizedServer
            server = OptimizedServer(cfg, args.port, itch_out=args.itch_out)
        port = server.start()
    except (OSError, RuntimeError, ValueError) as exc:
        return _bad_argument("serve", exc)
    print(f"twinmatch serve: {args.impl} order entry on 127.0.0.1:{port}", flush=True)
    while not done.wait(0.2):
        pass
    server.stop()
    if args.timings_out:
        _write_timings(args.timings_out, server.timings())
    print(json.dumps(server.stats()), flush=True)
    return 0


def _write_timings(path: Path, timings: Any) -> None:
    """The server-side read-to-write times (.npy, int64 ns): written to a temporary name,
    fsynced and renamed, so a failed run leaves no half-written file."""
    import numpy as np

    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.asarray(timings, dtype=np.int64))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_cmd(args: argparse.Namespace) -> int:
    """Chapter 12: drive an order-entry server with many sessions; latency and acks/s."""
    import json

    from twinmatch.load import run_load

    try:
        result = run_load(args.port, sessions=args.sessions, requests=args.requests,
                          mode=args.mode, rate=args.rate, window=args.window,
                          cancel_share=args.cancel, replace_share=args.replace,
                          seed=args.seed, timeout=args.timeout, first_user=args.first_user,
                          pace=args.pace, client=args.client)
    except (OSError, ValueError) as exc:
        return _bad_argument("load", exc)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:>12}: {value}")
    return 0 if result.unanswered == 0 else 1


def _add_entry_parsers(sub: Any) -> None:
    s = sub.add_parser("serve", help="chapter 12: an order-entry server (SoupBinTCP + OUCH 5.0)")
    s.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    s.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free)")
    s.add_argument("--config", type=Path, help="TOML: session, timers, symbols, [users]")
    s.add_argument("--load-users", type=int, default=0, metavar="N",
                   help="also users L00001..N, password LOAD (for twinmatch load)")
    s.add_argument("--clock", choices=["wall", "fixed"], help="fixed: deterministic stamps")
    s.add_argument("--itch-out", type=Path, metavar="FILE",
                   help="write the exchange's own ITCH 5.0 market data here (an ITCH file)")
    s.add_argument("--timings-out", type=Path, metavar="FILE.npy",
                   help="at stop, the server-side read-to-write times (int64 ns, numpy)")
    s.set_defaults(func=serve_cmd)
    ld = sub.add_parser("load", help="chapter 12: a load client for twinmatch serve")
    ld.add_argument("--port", type=int, required=True)
    ld.add_argument("--sessions", type=int, default=4)
    ld.add_argument("--requests", type=int, default=20_000, help="requests in all")
    ld.add_argument("--mode", choices=["closed", "open"], default="closed")
    ld.add_argument("--rate", type=float, default=10_000.0, help="open loop: requests/s")
    ld.add_argument("--window", type=int, default=1, help="closed loop: outstanding/session")
    ld.add_argument("--cancel", type=float, default=0.1, help="share of Cancels")
    ld.add_argument("--replace", type=float, default=0.05, help="share of Replaces")
    ld.add_argument("--seed", type=int, default=1)
    ld.add_argument("--timeout", type=float, default=60.0, help="seconds, at most")
    ld.add_argument("--first-user", type=int, default=1, help="sessions log in from L<N>")
    ld.add_argument("--pace", action="store_true",
                    help="closed loop: also hold each request to the --rate schedule")
    ld.add_argument("--client", choices=["native", "python"], default="native",
                    help="native/load.hpp (C++, the default: so the client is less "
                         "likely to be what limits acks/s) or twinmatch/load.py; same rules")
    ld.add_argument("--json", action="store_true")
    ld.set_defaults(func=load_cmd)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line. Given the command about to run, only its own sub-parser is built
    (start-up: building all of them imports what they name, chapter 13's modules too);
    otherwise, or for a name that is no command (so the error lists them all), every one."""
    parser = _Parser(prog="twinmatch", description=__doc__, epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"twinmatch {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    groups = _parser_groups()
    known = {name for names, _ in groups for name in names}
    for names, add in groups:
        if command not in known or command in names:
            add(sub)
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, with a refused argument on one line (it names the argument) instead of
    the usage text above it; ``--help`` shows the usage. Sub-parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} "
                     f"(see {self.prog} --help)\n")


# The exit statuses every command keeps (README.md lists them too; tests/test_readme.py).
EXIT_CODES: Final = """exit status:
  0    done (compare: the twins agreed)
  1    the input is bad (one line on stderr names the file and offset, line or id),
       or reading or writing failed (a full disk);
       or a check failed: demo, compare or journal --twice found the twins (or the
       runs) different, load had unanswered requests, feed rerequest got no reply
  2    a bad argument (one line on stderr names it), as argparse does
  128+N  stopped by signal N (130: Ctrl-C, 143: SIGTERM); unfinished files removed"""


def _version() -> str:
    """The installed distribution's version (pyproject.toml), without importing numpy."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("twinmatch")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _parser_groups() -> list[tuple[tuple[str, ...], Callable[[Any], None]]]:
    """(the commands, the function that adds their sub-parsers), in --help's order."""
    def feed(sub: Any) -> None:
        from twinmatch.feed_cli import add_feed_parser  # chapter 13 (standard library only)
        add_feed_parser(sub)
    return [(("demo", "gen", "replay", "compare"), _add_core_parsers),
            (("journal",), _add_journal_parser), (("feed",), feed),
            (("tables", "lobster"), _add_tables_parsers),
            (("serve", "load"), _add_entry_parsers), (("trade",), _add_trade_parser),
            (("view",), _add_view_parser)]


def _add_trade_parser(sub: Any) -> None:
    from twinmatch.trade_cli import add_trade_parser  # chapter 15
    add_trade_parser(sub)


def _add_core_parsers(sub: Any) -> None:
    p = sub.add_parser("demo", help="replay a generated stream through every twin")
    p.add_argument("--ops", type=int, default=1_000_000, help="number of operations")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--feed-messages", type=int, default=500_000,
                   help="messages in the generated ITCH day of part two (0: skip it)")
    p.add_argument("--feed-dir", type=Path,
                   default=Path(__file__).resolve().parent.parent / "out" / "demo",
                   help="where part two writes its day")
    p.set_defaults(func=demo)

    gen = sub.add_parser("gen", help="write synthetic feeds, reproducible from a seed")
    gen_sub = gen.add_subparsers(dest="feed", required=True)
    m = gen_sub.add_parser("market", help="a market-data day (ITCH) and its final books")
    m.add_argument("--messages", type=int, default=1_000_000,
                   help="exact number of messages in the day")
    m.add_argument("--symbols", type=int, default=500)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--out", type=Path, required=True, help="output directory")
    m.add_argument("--name", default="day", help="file stem: NAME.itch, NAME.books.csv, ...")
    m.add_argument("--format", choices=[*GEN_FORMATS, "all"], default="itch")
    m.add_argument("--gzip-level", type=int, default=1, choices=range(1, 10), metavar="1-9",
                   help="1 (default) is fast; 6 is gzip's default, ~4x slower, ~10%% smaller")
    m.add_argument("--all-types", action="store_true",
                   help="also Q crosses, B breaks, I imbalances, h halts and C prints away "
                        "from the resting price (no book changes; off: the day as before)")
    m.add_argument("--profile", choices=["flat", "intraday"], default="flat",
                   help="when events happen: flat (evenly, the default) or intraday (busy "
                        "open and close, bursts within seconds: a self-exciting process)")
    m.set_defaults(func=gen_market)
    f = gen_sub.add_parser("flow", help="incoming orders for a matching engine")
    f.add_argument("--orders", type=int, default=1_000_000)
    f.add_argument("--seed", type=int, default=1)
    f.add_argument("--out", type=Path, required=True, help="output file")
    f.add_argument("--format", choices=["csv", "itch"], default="csv",
                   help="csv: one symbol, order_id,price,quantity,side; itch: many symbols")
    f.add_argument("--symbols", type=int, default=500, help="itch only")
    f.set_defaults(func=gen_flow)
    u = gen_sub.add_parser("uniform", help="one symbol, uniform prices: the match-mode stress "
                                           "file (ITCH adds, buys then sells)")
    u.add_argument("--orders", type=int, default=1_000_000)
    u.add_argument("--seed", type=int, default=1)
    u.add_argument("--out", type=Path, required=True, help="output file (ITCH)")
    u.set_defaults(func=gen_uniform)
    r = sub.add_parser("replay", help="replay a feed (ITCH, gzip, PCAP, CSV, LOBSTER) "
                                      "through the many-books market")
    r.add_argument("file", type=Path, nargs="+",
                   help="one feed, or many (chapter 10: one task each, reports merged)")
    r.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    r.add_argument("--mode", choices=["book", "match"], default="book",
                   help="book: rebuild the feed's books (never match); match: an engine")
    r.add_argument("--fills", type=Path, help="write the fills CSV here")
    r.add_argument("--books", type=Path, help="write the final books CSV here")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--pipeline", action="store_true",
                   help="parser -> engine -> fill logger threads (ITCH only): latency report")
    r.add_argument("--policy", choices=["lossless", "drop"], default="lossless",
                   help="--pipeline: when the fill logger falls behind, wait or drop (counted)")
    r.add_argument("--logger-delay-ns", type=int, default=0, metavar="NS",
                   help="--pipeline: simulate a slow disk, NS per fill logged (teaching, tests)")
    r.add_argument("--workers", type=int, metavar="N",
                   help="many files: N worker processes (or --cluster local's workers)")
    r.add_argument("--cluster", metavar="ADDRESS",
                   help="many files: run the tasks on a dask.distributed scheduler at "
                        "ADDRESS, or 'local' for a local cluster started here")
    r.set_defaults(func=replay_cmd)
    c = sub.add_parser("compare", help="replay with both twins: identical results, speedup")
    c.add_argument("file", type=Path)
    c.add_argument("--mode", choices=["book", "match"], default="book")
    c.set_defaults(func=compare_cmd)


def tables_cmd(args: argparse.Namespace) -> int:
    from twinmatch.tables_cli import tables_cmd as run
    return run(args)


def lobster_cmd(args: argparse.Namespace) -> int:
    from twinmatch.tables_cli import lobster_cmd as run
    return run(args)


def _add_tables_parsers(sub: Any) -> None:
    """`tables` and `lobster` (chapter 14; the code is in twinmatch/tables_cli.py)."""
    t = sub.add_parser("tables", help="an ITCH day (raw, gzip, PCAP) to research tables "
                                      "(bbo, trades, messages, depth, halts, noii, symbols)")
    t.add_argument("file", type=Path)
    t.add_argument("out", type=Path, help="output directory: <table>.parquet (or .csv) each")
    t.add_argument("--tables", default="bbo,trades", help="comma-separated (default bbo,trades)")
    t.add_argument("--symbols", default=None, help="comma-separated symbols (default: all)")
    t.add_argument("--depth", type=int, default=None, help="levels in `depth` (default 5)")
    t.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    t.add_argument("--date", default=None,
                   help="session date YYYY-MM-DD (default: from the file name)")
    t.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    t.set_defaults(func=tables_cmd)
    lob = sub.add_parser("lobster", help="an ITCH day to LOBSTER's message + orderbook files")
    lob.add_argument("file", type=Path)
    lob.add_argument("out", type=Path, help="output directory")
    lob.add_argument("--symbols", required=True, help="comma-separated symbols")
    lob.add_argument("--levels", type=int, default=10, help="book levels (default 10)")
    lob.add_argument("--date", default=None,
                     help="session date YYYY-MM-DD (default: from the file name)")
    lob.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    lob.set_defaults(func=lobster_cmd)


def view_cmd(args: argparse.Namespace) -> int:
    """Chapter 16: replay a day and watch it in a browser (twinmatch/view_web.py)."""
    if (args.file is None) == (args.feed is None):
        return _bad_argument("view", ValueError("give a FILE to replay or --feed PORT"))
    problem = None if args.file is None else _input_problem(args.file, streams=False)
    if problem:
        return _bad_argument("view", ValueError(problem))
    from twinmatch.view import LiveFeed, LiveReplay
    from twinmatch.view_web import HOST, listen, serve

    try:
        symbols = {s for s in args.symbols.split(",") if s} if args.symbols else None
        if args.feed is not None:  # (the feed's socket first: once the page's port is
            # bound, a sender may start)
            replay: LiveReplay = LiveFeed(args.feed, args.impl, args.request_port or None,
                                          symbols, args.idle_ms / 1e3, args.max_seconds)
            what = f"feed on udp 127.0.0.1:{replay.port}"  # type: ignore[attr-defined]
        else:
            replay = LiveReplay(args.file, args.impl, args.mode, args.speed, symbols)
            what = f"replay of {args.file}"
        sock = listen(args.port)
    except (ValueError, OSError) as exc:
        return _bad_argument("view", exc)
    port = sock.getsockname()[1]
    print(f"twinmatch view: {args.impl} {what} on http://{HOST}:{port}/ "
          f"(API: /api/book/SYMBOL?depth=N /api/bbo /api/stats /api/symbols); Ctrl-C stops",
          flush=True)
    serve(replay, sock)
    snap = replay.snapshot
    print(f"twinmatch view: stopped at message {snap.messages:,} "
          + ("(to the end)" if snap.done and not snap.error else "")
          + (f"error: {snap.error}" if snap.error else ""), flush=True)
    return 1 if snap.error else 0


def _add_view_parser(sub: Any) -> None:
    v = sub.add_parser("view", help="chapter 16: replay a day, watch it live in a browser "
                                    "(127.0.0.1), with a read-only JSON API")
    v.add_argument("file", type=Path, nargs="?",
                   help="any feed replay reads (ITCH, gzip, PCAP, CSV); or --feed")
    v.add_argument("--feed", type=int, metavar="PORT",
                   help="attach to a live feed instead: chapter 13's receiver on this UDP "
                        "port (twinmatch feed send ... --port PORT); the page moves once "
                        "a second")
    v.add_argument("--request-port", type=int, default=0,
                   help="--feed: the sender's re-request port (0: no recovery)")
    v.add_argument("--idle-ms", type=float, default=2000.0,
                   help="--feed: the feed is over after this long without a datagram")
    v.add_argument("--max-seconds", type=float, default=3600.0, help="--feed: at most")
    v.add_argument("--speed", type=float, default=1000.0,
                   help="times the feed's own clock (default 1000; 0: as fast as it goes)")
    v.add_argument("--symbols", default=None, help="comma-separated symbols (default: all)")
    v.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    v.add_argument("--mode", choices=["book", "match"], default="book")
    v.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free)")
    v.set_defaults(func=view_cmd)


# The commands that write files by the rule of twinmatch/atomic.py: SIGTERM stops them
# as Ctrl-C does, so that what they made is removed.
WRITERS: Final = ("demo", "gen", "replay", "compare", "tables", "lobster")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # numpy's BLAS starts a pool of threads that spin for a while, waiting for work no
    # command here gives them (nothing uses BLAS): on two cores they take time from the
    # threads that work (tables: the builder, the writer). Set before numpy is imported
    # (the commands import it lazily); a value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    if args.command not in WRITERS:
        return func(args)
    from twinmatch.atomic import Interrupted, handle_signals

    try:
        with handle_signals() if threading_main() else contextlib.nullcontext():
            return func(args)
    except Interrupted as exc:  # the command's cleanup has run: its parts are removed
        print(f"twinmatch {args.command}: interrupted by {exc}; the files it had not "
              f"committed are removed", file=sys.stderr)
        return 128 + exc.signum


def threading_main() -> bool:
    """Signal handlers can be set in the main thread only (a test may call main elsewhere)."""
    import threading

    return threading.current_thread() is threading.main_thread()
