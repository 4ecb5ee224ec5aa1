"""The readable twins: pure Python, one module per component."""

from __future__ import annotations
