"""What both order-file twins (naive/orders.py, optimized/orders.py) name the same way.

The fields of a CSV order row and of a LOBSTER message row (an error names the bad field
by these words), and the kinds of LOBSTER row ``lobster_to_ops`` skips and counts, in the
order both twins report them. (Reading the file in pieces of whole lines:
:mod:`contract.order_files`.)
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSV_FIELDS", "LOBSTER_FIELDS", "SKIP_KINDS"]

CSV_FIELDS: Final = ("order_id", "price", "quantity", "side")
LOBSTER_FIELDS: Final = ("time", "type", "order_id", "size", "price", "direction")
SKIP_KINDS: Final = ("hidden_execution", "cross_trade", "halt", "other")
