"""Golden cases: hand-checked operations with expected fills, rejects and depth (data files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract.dtypes import OPS_DTYPE, REASONS
from tests.conftest import BookImpl

GOLDEN = Path(__file__).parent / "data" / "golden"
CASES = sorted(GOLDEN.glob("*.json"))
OPS = {"limit": 0, "market": 1, "cancel": 2, "reduce": 3, "execute": 4, "replace": 5}
SIDES = {"B": 0, "S": 1}


def to_ops(rows: list[list[Any]]) -> np.ndarray:
    ops = np.zeros(len(rows), dtype=OPS_DTYPE)
    for i, row in enumerate(rows):
        kind, order_id = row[0], row[1]
        rec = ops[i]
        rec["op"], rec["order_id"] = OPS[kind], order_id
        if kind == "limit":
            rec["side"], rec["price"], rec["qty"] = SIDES[row[2]], row[3], row[4]
        elif kind == "market":
            rec["side"], rec["qty"] = SIDES[row[2]], row[3]
        elif kind in ("reduce", "execute"):
            rec["qty"] = row[2]
        elif kind == "replace":
            rec["new_order_id"], rec["price"], rec["qty"] = row[2], row[3], row[4]
    return ops


def run_single(book: Any, rows: list[list[Any]]) -> tuple[list[tuple[int, ...]], list[Any]]:
    fills: list[tuple[int, ...]] = []
    rejects: list[Any] = []
    for i, row in enumerate(rows):
        kind, args = row[0], row[1:]
        if kind in ("limit", "market"):
            args = [args[0], SIDES[args[1]], *args[2:]]
        try:
            got = getattr(book, {"limit": "add_limit", "market": "add_market"}.get(kind, kind))(
                *args
            )
        except ValueError as err:
            rejects.append([i, err.reason])  # type: ignore[attr-defined]
            continue
        if kind == "market":
            got = got[0]
        elif kind == "execute":
            got = [got]
        elif kind in ("cancel", "reduce"):
            got = []
        fills.extend(tuple(int(x) for x in f) for f in got)
    return fills, rejects


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_golden(impl: BookImpl, case: Path) -> None:
    spec = json.loads(case.read_text())
    want_fills = [(r, a, p, q, SIDES[s]) for r, a, p, q, s in spec["fills"]]
    want_depth = {s: [tuple(x) for x in v] for s, v in spec["depth"].items()}

    book = impl.new()
    fills, rejects = run_single(book, spec["ops"])
    assert fills == want_fills
    assert rejects == spec["rejects"]
    assert book.depth(0, 100) == want_depth["B"] and book.depth(1, 100) == want_depth["S"]

    book = impl.new()
    fills_arr, rejects_arr = book.apply(to_ops(spec["ops"]))
    got = [(int(f["resting_id"]), int(f["aggressor_id"]), int(f["price"]), int(f["qty"]),
            int(f["aggressor_side"])) for f in fills_arr]
    assert got == want_fills
    assert [[int(r["index"]), REASONS[r["reason"]]] for r in rejects_arr] == spec["rejects"]
    assert book.depth(0, 100) == want_depth["B"] and book.depth(1, 100) == want_depth["S"]
