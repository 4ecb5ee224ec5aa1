"""The command line: ``twinmatch demo | gen | ...`` (also ``python -m twinmatch``)."""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from twinmatch.flow import cached_order_flow

Runner = Callable[[Any, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _fills_key(fills: np.ndarray) -> bytes:
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
    return 0 if identical else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="twinmatch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="replay a generated stream through every twin")
    p.add_argument("--ops", type=int, default=1_000_000, help="number of operations")
    p.add_argument("--seed", type=int, default=2026)
    p.set_defaults(func=demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)
