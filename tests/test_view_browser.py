"""`twinmatch view` in headless Chromium (the browser the book's check uses): during a
replay the page shows a depth ladder with the touch highlighted and a trade tape, both
change as the replay goes on, the browser console has no error, and switching symbols
from the most-active list redraws the ladder. Skipped, with the reason, where Debian's
chromium and chromium-driver are absent (`make system-deps` installs them)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from twinmatch.gen import write_market_day
from twinmatch.view import LiveReplay
from twinmatch.view_web import BackgroundServer

if not (shutil.which("chromium") or Path("/usr/bin/chromium").exists()) or not (
        shutil.which("chromedriver") or Path("/usr/bin/chromedriver").exists()):
    pytest.skip("needs chromium and chromedriver (make system-deps)", allow_module_level=True)


def _shots() -> Any:
    spec = importlib.util.spec_from_file_location("tm_view_screenshot",
                                                  ROOT / "scripts" / "view_screenshot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_the_page_moves_with_the_replay(impl: str, tmp_path: Path) -> None:
    shots = _shots()
    day = write_market_day(tmp_path, 60_000, symbols=20, seed=2).paths[0]
    with BackgroundServer(LiveReplay(day, impl, speed=4000.0)) as served:
        drv = shots.driver()
        try:
            drv.get(f"http://127.0.0.1:{served.port}/")
            first = shots.wait_for(drv, lambda s: s["ladder"] and s["tape"])
            assert first["touch"] == 2 or len(first["ladder"]) < 2  # best bid, best ask
            later = shots.wait_for(drv, lambda s: s["ladder"] != first["ladder"]
                                   and s["tape"] != first["tape"]
                                   and s["messages"] != first["messages"])
            assert later["frames"] > first["frames"]
            # a symbol chosen from the most-active list: the ladder shows it
            chosen = drv.execute_script(
                "const row = document.querySelector('#active tbody tr:last-child');"
                "row.click(); return row.cells[0].textContent;")
            shots.wait_for(drv, lambda s: s["symbol"] == chosen)
            severe = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
            assert not severe, severe
        finally:
            drv.quit()
