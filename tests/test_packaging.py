"""The editable install rebuilds the C++ on import (pyproject: ``editable.rebuild``).

This is what makes a reader's edit to native/ take effect on the next run, with no
install step in between. The test changes no source: it only marks one file as just
saved (its modification time), as an editor would, and checks that the next import in a
fresh interpreter rebuilt and re-installed the extension.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import optimized._native
from tests.conftest import ROOT


@pytest.mark.timeout(900)
def test_editable_install_rebuilds_on_import() -> None:
    if "_editable_skbc_twinmatch" not in sys.modules:
        pytest.skip("not an editable install (pip install --no-build-isolation -e .)")
    built = Path(optimized._native.__file__)
    before = built.stat().st_mtime_ns
    source = ROOT / "native" / "module.cpp"  # the smallest translation unit
    os.utime(source)  # "saved just now": newer than the object file built from it
    result = subprocess.run(
        [sys.executable, "-c", "import optimized._native as n; print(n.__file__)"],
        capture_output=True, text=True, cwd=ROOT, timeout=840,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert Path(result.stdout.strip()) == built
    assert built.stat().st_mtime_ns > before, "the import did not rebuild the extension"
