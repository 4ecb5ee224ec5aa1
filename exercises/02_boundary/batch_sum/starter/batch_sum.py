"""Exercise 02_boundary/batch_sum: sum a numpy structured array's field without a loop."""

from __future__ import annotations

import numpy as np

from contract.dtypes import OP_LIMIT


def total_qty(ops: np.ndarray) -> int:
    """The sum of ``qty`` over every record of an OPS_DTYPE array, as a Python int."""
    # TODO: this is right, but it visits each record from Python. Do it in one numpy call.
    total = 0
    for i in range(len(ops)):
        total += int(ops[i]["qty"])
    return total


def buy_limit_qty(ops: np.ndarray) -> int:
    """The sum of ``qty`` over the buy-side limit orders (op == OP_LIMIT, side == 0)."""
    # TODO: same answer, without a Python loop: select the records first, then sum.
    total = 0
    for i in range(len(ops)):
        record = ops[i]
        if record["op"] == OP_LIMIT and record["side"] == 0:
            total += int(record["qty"])
    return total
