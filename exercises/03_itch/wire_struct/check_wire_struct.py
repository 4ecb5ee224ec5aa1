"""Checker for 03_itch/wire_struct: loaders and the 'U' struct against naive.itch, under ASan."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

import naive.itch as itch

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wire_struct") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def ask(harness: Path, lines: list[str]) -> list[str]:
    return run_program(harness, "".join(line + "\n" for line in lines)).splitlines()


def replace(rng: random.Random) -> itch.OrderReplace:
    return itch.OrderReplace(
        rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(48), rng.getrandbits(64),
        rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32))


def test_struct_size(harness: Path) -> None:
    got = ask(harness, ["size"])
    assert got == ["size 35"], f"sizeof(WireReplace) must be the spec's 35 bytes; {got}"


@pytest.mark.parametrize("width, op", [(2, "be16"), (4, "be32"), (6, "be48"), (8, "be64")])
def test_loaders(harness: Path, width: int, op: str) -> None:
    rng = random.Random(width)
    values = [0, 1, 2 ** (8 * width) - 1, 0x01 << (8 * width - 8)]
    values += [rng.getrandbits(8 * width) for _ in range(200)]
    got = ask(harness, [f"{op} {v.to_bytes(width, 'big').hex()}" for v in values])
    for v, answer in zip(values, got, strict=True):
        raw = v.to_bytes(width, "big").hex()
        assert answer == str(v), f"{op}({raw}) returned {answer}; the big-endian value is {v}"


def test_decode_replace(harness: Path) -> None:
    rng = random.Random(3)
    records = [replace(rng) for _ in range(300)]
    records.append(itch.OrderReplace(2**16 - 1, 2**16 - 1, 2**48 - 1, 2**64 - 1, 2**64 - 1,
                                     2**32 - 1, 2**32 - 1))
    got = ask(harness, [f"replace {itch.encode(r).hex()}" for r in records])
    for rec, answer in zip(records, got, strict=True):
        want = "ok " + " ".join(str(v) for v in itch.parse_message(itch.encode(rec)))
        assert answer == want, (
            f"message {itch.encode(rec).hex()}:\n yours      {answer}\n naive.itch {want}\n"
            f" (locate tracking timestamp order_ref new_order_ref shares price)")


def test_refuses_wrong_size_or_type(harness: Path) -> None:
    raw = itch.encode(replace(random.Random(4)))
    cases = [raw[:cut] for cut in (0, 1, 11, 30, 34)] + [raw + b"\x00", b"C" + raw[1:]]
    got = ask(harness, [f"replace {c.hex()}" for c in cases])
    for case, answer in zip(cases, got, strict=True):
        assert answer == "no", (
            f"decode_replace on {len(case)} bytes starting {case[:1]!r} must return false "
            f"(only exactly 35 bytes of type 'U' decode); it returned {answer}")
