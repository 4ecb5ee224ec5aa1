"""Checker for 02_boundary/op_record: C++ reads numpy OPS_DTYPE bytes, compared with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from exercise_support import compile_cpp, impl_dir, run_program

from contract.dtypes import MAX_ID, MAX_QTY, OP_LIMIT, OPS_DTYPE

HERE = Path(__file__).resolve().parent
FIELDS = ("order_id", "new_order_id", "price", "qty", "op", "side")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("op_record") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def make_ops(n: int, seed: int = 5) -> np.ndarray:
    """Random records, with random bytes in the padding too (no field may read them)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, n * OPS_DTYPE.itemsize, dtype=np.uint8)
    ops = raw.view(OPS_DTYPE).copy()
    ops["order_id"] = rng.integers(0, MAX_ID, n, dtype=np.uint64, endpoint=True)
    ops["new_order_id"] = rng.integers(0, MAX_ID, n, dtype=np.uint64, endpoint=True)
    ops["price"] = rng.integers(1, 2**32, n, dtype=np.uint64)
    ops["qty"] = rng.integers(1, MAX_QTY, n, dtype=np.uint64, endpoint=True)
    ops["op"] = rng.integers(0, 6, n)
    ops["side"] = rng.integers(0, 2, n)
    return ops


def run(harness: Path, tmp_path: Path, ops: np.ndarray) -> list[str]:
    path = tmp_path / "ops.bin"
    path.write_bytes(ops.tobytes())
    return run_program(harness, f"{path}\n").splitlines()


def numpy_sum(ops: np.ndarray) -> int:
    chosen = (ops["op"] == OP_LIMIT) & (ops["side"] == 0)
    return int(ops["qty"][chosen].sum(dtype=np.uint64))


def test_layout_matches_the_dtype(harness: Path, tmp_path: Path) -> None:
    got = run(harness, tmp_path, make_ops(1))[0].split()
    fields = OPS_DTYPE.fields
    assert fields is not None
    want = [str(OPS_DTYPE.itemsize)] + [str(fields[f][1]) for f in FIELDS]
    assert got[1:] == want, (
        "sizeof and offsets of (" + ", ".join(FIELDS) + f"): yours {' '.join(got[1:])}, "
        f"OPS_DTYPE's {' '.join(want)}")


def test_records_read_back_field_by_field(harness: Path, tmp_path: Path) -> None:
    ops = make_ops(500)
    lines = run(harness, tmp_path, ops)
    assert lines[1] == f"records {len(ops)}", (
        f"{len(ops)} records of {OPS_DTYPE.itemsize} bytes; your OpRecord saw: {lines[1]}")
    for i, line in enumerate(lines[2:2 + len(ops)]):
        want = " ".join(str(int(ops[f][i])) for f in FIELDS)
        assert line == want, (
            f"record {i}: C++ read ({line.replace(' ', ', ')}), numpy holds "
            f"({want.replace(' ', ', ')}) as ({', '.join(FIELDS)})")


@pytest.mark.parametrize("n", [0, 1, 7, 2000])
def test_sum_buy_limit_qty(harness: Path, tmp_path: Path, n: int) -> None:
    ops = make_ops(n, seed=n)
    got = run(harness, tmp_path, ops)[-1]
    assert got == f"sum {numpy_sum(ops)}", (
        f"{n} records: numpy's sum of qty over buy limit orders is {numpy_sum(ops)}, yours {got}")


def test_sum_wider_than_32_bits(harness: Path, tmp_path: Path) -> None:
    ops = make_ops(3)
    ops["op"] = OP_LIMIT
    ops["side"] = 0
    ops["qty"] = MAX_QTY
    got = run(harness, tmp_path, ops)[-1]
    assert got == f"sum {3 * MAX_QTY}", f"three quantities of 2**32 - 1: expected {3 * MAX_QTY}"
