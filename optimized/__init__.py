"""The optimized twins: thin Python faces over the C++ extension optimized._native."""

from __future__ import annotations
