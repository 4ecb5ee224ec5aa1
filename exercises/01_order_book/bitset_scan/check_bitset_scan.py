"""Checker for 01_order_book/bitset_scan: highest_set() against Python, under sanitizers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

HERE = Path(__file__).resolve().parent


def expected(words: list[int]) -> int:
    for w in reversed(range(len(words))):
        if words[w]:
            return w * 64 + words[w].bit_length() - 1
    return -1


def cases() -> list[list[int]]:
    rng = random.Random(2)
    edge = [[], [0], [1], [1 << 63], [0, 0, 0], [0, 1, 0], [5, 0], [0, 0, 1 << 63],
            [2**64 - 1, 0], [1, 1 << 17, 0, 0]]
    rand = [[rng.getrandbits(64) if rng.random() < 0.2 else 0 for _ in range(rng.randint(1, 40))]
            for _ in range(300)]
    return edge + rand


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bitset_scan") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def run(harness: Path, all_cases: list[list[int]]) -> list[int]:
    text = f"{len(all_cases)}\n" + "".join(
        f"{len(ws)} {' '.join(map(str, ws))}\n" for ws in all_cases)
    return [int(line) for line in run_program(harness, text).split()]


def test_edge_cases(harness: Path) -> None:
    edge = cases()[:10]
    got = run(harness, edge)
    for words, answer in zip(edge, got, strict=True):
        assert answer == expected(words), f"highest_set({words}) returned {answer}"


def test_random_bitsets(harness: Path) -> None:
    all_cases = cases()
    got = run(harness, all_cases)
    wrong = [(ws, a) for ws, a in zip(all_cases, got, strict=True) if a != expected(ws)]
    assert not wrong, f"{len(wrong)} wrong answers, e.g. words={wrong[0][0]} -> {wrong[0][1]}"
