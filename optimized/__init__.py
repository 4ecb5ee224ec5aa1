"""The optimized twins: C++20 behind nanobind (the extension ``optimized._native``).

Each module here mirrors one in ``naive/`` and only re-exports the native classes,
with their documentation; nothing of it runs on a hot path.
"""

from __future__ import annotations

__all__: list[str] = []
