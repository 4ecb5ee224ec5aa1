"""The optimized twins: C++20 behind nanobind (the extension ``optimized._native``).

Each module here mirrors one in ``naive/`` and only re-exports the native classes,
with their documentation; nothing of it runs on a hot path.

In a source checkout, importing the package first checks that the built extension is
not older than native/ (a ``stat`` per file, no build; see ``optimized/_build.py``).
"""

from __future__ import annotations

from optimized import _build

_build.ensure_fresh()

__all__: list[str] = []
