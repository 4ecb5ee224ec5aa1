"""The naive twins: readable pure Python, the specification of every component."""

from __future__ import annotations
