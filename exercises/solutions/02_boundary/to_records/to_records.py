"""Python objects in, numpy records out, and back (reference solution)."""

from __future__ import annotations

import numpy as np

from contract.dtypes import FILL_DTYPE, OPS_DTYPE

Row = tuple[int, int, int, int, int]
FillTuple = tuple[int, int, int, int, int]
FILL_FIELDS = ["resting_id", "aggressor_id", "price", "qty", "aggressor_side"]


def ops_from_rows(rows: list[Row]) -> np.ndarray:
    """An OPS_DTYPE array with one record per row (new_order_id 0)."""
    # One conversion of all the Python ints (uint64 holds every field, order ids too),
    # then one copy per column: five crossings, whatever the number of rows.
    table = np.array(rows, dtype=np.uint64).reshape(-1, 5)
    ops = np.zeros(len(table), dtype=OPS_DTYPE)
    for column, name in enumerate(("order_id", "op", "side", "price", "qty")):
        ops[name] = table[:, column]
    return ops


def fills_to_tuples(fills: np.ndarray) -> list[FillTuple]:
    """(resting_id, aggressor_id, price, qty, aggressor_side) per FILL_DTYPE record, as
    Python ints."""
    assert fills.dtype == FILL_DTYPE
    # A multi-field index is a view of those fields; tolist() makes each record a tuple
    # of Python ints in one pass in C.
    out: list[FillTuple] = fills[FILL_FIELDS].tolist()
    return out
