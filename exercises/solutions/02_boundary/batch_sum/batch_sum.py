"""Exercise 02_boundary/batch_sum, reference solution."""

from __future__ import annotations

import numpy as np

from contract.dtypes import OP_LIMIT


def total_qty(ops: np.ndarray) -> int:
    """The sum of ``qty`` over every record of an OPS_DTYPE array, as a Python int."""
    # ops["qty"] is a view of one field (no copy); summing it in uint64 cannot overflow
    # for any array that fits in memory, and int() turns numpy's scalar into Python's.
    return int(ops["qty"].sum(dtype=np.uint64))


def buy_limit_qty(ops: np.ndarray) -> int:
    """The sum of ``qty`` over the buy-side limit orders (op == OP_LIMIT, side == 0)."""
    # A boolean mask selects the records in one pass; & combines masks element-wise.
    mask = (ops["op"] == OP_LIMIT) & (ops["side"] == 0)
    return int(ops["qty"][mask].sum(dtype=np.uint64))
