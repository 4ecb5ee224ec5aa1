"""Checker for 13_live_feed/rerequest_reply: the reply's bytes, its limit, the refusals."""

from __future__ import annotations

import struct
from types import ModuleType

import pytest
from exercise_support import load_module

SESSION = b"TWINMATCH1"
HISTORY = [bytes([65 + i % 26]) * (10 + i % 30) for i in range(500)]


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "rerequest.py")


def req(seq: int, count: int, session: bytes = SESSION) -> bytes:
    return session + struct.pack(">QH", seq, count)


def blocks(msgs: list[bytes]) -> bytes:
    return b"".join(struct.pack(">H", len(m)) + m for m in msgs)


def test_a_small_request_is_answered_whole(mod: ModuleType) -> None:
    out = mod.reply(HISTORY, SESSION, req(5, 3))
    assert out == SESSION + struct.pack(">QH", 5, 3) + blocks(HISTORY[4:7])


def test_a_big_request_gets_what_fits(mod: ModuleType) -> None:
    out = mod.reply(HISTORY, SESSION, req(1, 400))
    seq, count = struct.unpack_from(">QH", out, 10)
    assert seq == 1 and 1 <= count < 400 and len(out) <= 1400
    assert out[20:] == blocks(HISTORY[:count])
    assert 20 + len(blocks(HISTORY[: count + 1])) > 1400  # one more would not fit


def test_the_end_of_the_history(mod: ModuleType) -> None:
    out = mod.reply(HISTORY, SESSION, req(499, 10))
    assert struct.unpack_from(">QH", out, 10) == (499, 2)


def test_one_message_even_past_the_limit(mod: ModuleType) -> None:
    out = mod.reply([b"x" * 2000], SESSION, req(1, 1))
    assert struct.unpack_from(">QH", out, 10) == (1, 1)


@pytest.mark.parametrize("bad", [req(0, 1), req(501, 1), req(1, 0), req(1, 0xFFFF),
                                 req(1, 1, b"OTHERSESS1"), req(1, 1)[:19], req(1, 1) + b"x"])
def test_bad_requests_are_refused(mod: ModuleType, bad: bytes) -> None:
    assert mod.reply(HISTORY, SESSION, bad) is None
