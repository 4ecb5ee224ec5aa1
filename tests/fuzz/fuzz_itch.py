"""Fuzz target: both ITCH twins must agree on any input (events, counts, or the same error).

Run under atheris (coverage-guided, instruments the Python twin and the C++ via libFuzzer):
    .venv/bin/python tests/fuzz/fuzz_itch.py -runs=100000
``check`` is also called directly by tests/fuzz/test_fuzz_itch.py over random and mutated
inputs, so the property is exercised in the normal suite without atheris' runner.
"""

from __future__ import annotations

import io
import sys

import numpy as np

import naive.itch as naive_itch
import optimized.itch as optimized_itch
from contract.itch_errors import ItchError

Outcome = tuple[bytes, dict[str, int], tuple[str, int, str] | None]


def outcome(decode: object, data: bytes) -> Outcome:
    assert callable(decode)
    try:
        events, counts = decode(data)
    except ItchError as exc:
        return exc.events.tobytes(), exc.counts, (exc.reason, exc.offset, str(exc))
    assert isinstance(events, np.ndarray)
    return events.tobytes(), counts, None


def stream_outcome(mod: object, data: bytes, chunk: int) -> object:
    """read_file over the bytes as a stream (as from a pipe): the batches, then any error."""
    batches = []
    try:
        for events, counts in mod.read_file(io.BytesIO(data), chunk):  # type: ignore[attr-defined]
            batches.append((events.tobytes(), counts))
    except ItchError as exc:
        return batches, (exc.reason, exc.offset, str(exc))
    return batches, None


def check(data: bytes) -> None:
    """The property: identical outcomes, and an error only ever names an offset in range;
    read as a stream in small chunks (the first byte picks the size), identical batches."""
    a = outcome(naive_itch.decode, data)
    b = outcome(optimized_itch.decode, data)
    if a != b:
        raise AssertionError(f"twins disagree on {data.hex()}: {a[1:]} vs {b[1:]}")
    if a[2] is not None:
        assert 0 <= a[2][1] < max(1, len(data))
    chunk = 1 + (data[0] if data else 0) % 61
    sa = stream_outcome(naive_itch, data, chunk)
    sb = stream_outcome(optimized_itch, data, chunk)
    if sa != sb:
        raise AssertionError(f"twins' read_file disagree on {data.hex()} (chunk {chunk})")


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
