"""The committed type stub of optimized._native matches what nanobind's stubgen makes now."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_native_stub_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "stubs.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
