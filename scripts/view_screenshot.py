"""A screenshot of `twinmatch view` for chapter 16, taken in headless Chromium.

    python scripts/view_screenshot.py [--out chapters/generated/view-screenshot.png]

Generates a small day, replays it with the view (optimized twin, paced), opens the page
in headless Chromium (selenium + Debian's chromium-driver, as scripts/browser_check.py
does), waits (bounded) until the ladder and the tape have rows, writes this machine's
label into the page's footer, and saves the PNG (temporary name, fsync, rename). The
functions here also serve tests/test_view_browser.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from twinmatch.atomic import write_file  # noqa: E402

OUT = ROOT / "chapters" / "generated" / "view-screenshot.png"
WAIT_S = 30.0


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"tm_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def driver() -> Any:
    """Headless Chromium, as the book's check starts it (window 1280 x 1000)."""
    return _script("browser_check").make_driver()


def page_state(drv: Any) -> dict[str, Any]:
    """What the page shows now: ladder and tape rows (text), the message count, frames."""
    state: dict[str, Any] = drv.execute_script(
        "const rows = (id) => [...document.querySelectorAll(`#${id} tbody tr`)]"
        "  .map((r) => r.textContent);"
        "return {ladder: rows('ladder'), tape: rows('tape'), active: rows('active'),"
        "  touch: document.querySelectorAll('#ladder tr.touch').length,"
        "  messages: document.getElementById('messages').textContent,"
        "  clock: document.getElementById('clock').textContent,"
        "  symbol: document.getElementById('ladder-symbol').textContent,"
        "  state: document.getElementById('state').textContent,"
        "  frames: window.viewFrames, latencies: window.viewLatencies.slice()};")
    return state


def wait_for(drv: Any, ready: Any, timeout: float = WAIT_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        state = page_state(drv)
        if ready(state):
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not get there in {timeout} s: {state}")
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    from twinmatch.gen import write_market_day
    from twinmatch.view import LiveReplay
    from twinmatch.view_web import BackgroundServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    machine = _script("machine")
    label = machine.label(machine.collect())
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        write_market_day(Path(tmp), 200_000, symbols=100, seed=1)
        os.chdir(tmp)  # so that the page names the file as a reader would: day.itch
        live = LiveReplay(Path("day.itch"), "optimized", speed=3000.0)
        with BackgroundServer(live) as served:
            drv = driver()
            try:
                drv.get(f"http://127.0.0.1:{served.port}/?symbol=ACH")
                wait_for(drv, lambda s: len(s["ladder"]) >= 12 and len(s["tape"]) >= 15
                         and s["clock"] >= "10:30")
                drv.execute_script(  # under the header, where the screenshot shows it
                    "const f = document.createElement('p');"
                    "f.style = 'margin:0;color:#666;font-size:12px';"
                    "f.textContent = arguments[0];"
                    "document.querySelector('header').after(f);",
                    f"twinmatch view of a generated day (200,000 messages, 100 symbols, seed "
                    f"1), optimized twin, --speed 3000; screenshot by "
                    f"scripts/view_screenshot.py on {label}")
                png = drv.get_screenshot_as_png()
            finally:
                drv.quit()
                os.chdir(here)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_file(args.out, png)
    print(f"view_screenshot.py: {args.out} ({len(png):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
