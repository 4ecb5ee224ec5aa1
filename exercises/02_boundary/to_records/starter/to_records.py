"""Python objects in, numpy records out, and back (starter: correct, and slow).

Both functions cross between Python and numpy once per field of every record: each
``ops[i]["qty"] = q`` makes a temporary record view and converts one Python int, and each
``int(f["price"])`` makes a numpy scalar and then an int. Profile it
(``python -m cProfile -s tottime``) or just count: 50,000 records, 5 fields each.
"""

from __future__ import annotations

import numpy as np

from contract.dtypes import FILL_DTYPE, OPS_DTYPE

# A row: (order_id, op, side, price, qty), as a CSV reader or a test might produce them.
Row = tuple[int, int, int, int, int]
FillTuple = tuple[int, int, int, int, int]


def ops_from_rows(rows: list[Row]) -> np.ndarray:
    """An OPS_DTYPE array with one record per row (new_order_id 0)."""
    # TODO: cross once per column, not once per field: make one 2-D uint64 array of all
    # the rows, then assign each of its columns to a field of the records.
    ops = np.zeros(len(rows), dtype=OPS_DTYPE)
    for i, (order_id, op, side, price, qty) in enumerate(rows):
        rec = ops[i]
        rec["order_id"] = order_id
        rec["op"] = op
        rec["side"] = side
        rec["price"] = price
        rec["qty"] = qty
    return ops


def fills_to_tuples(fills: np.ndarray) -> list[FillTuple]:
    """(resting_id, aggressor_id, price, qty, aggressor_side) per FILL_DTYPE record, as
    Python ints."""
    assert fills.dtype == FILL_DTYPE
    # TODO: let numpy build the tuples: select the five fields at once, then one call
    # turns every record into a tuple of Python ints.
    return [(int(f["resting_id"]), int(f["aggressor_id"]), int(f["price"]), int(f["qty"]),
             int(f["aggressor_side"])) for f in fills]
