"""Start-up pays no build; an edit to native/ still takes effect (optimized/_build.py).

The promise: `import optimized` and `twinmatch --help` spawn no process when the
extension is up to date (a staleness check of native/'s modification times is all they
do), `twinmatch --help` imports neither numpy nor a native module, and a source saved
after the last build is rebuilt by the next import (or, with TWINMATCH_NO_REBUILD=1,
reported as a warning). Counted with an audit hook, not timed. The rebuild test changes
no source: it only marks one file as just saved (its modification time), as an editor
would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import optimized._native
from optimized import _build
from tests.conftest import ROOT

# Run in a fresh interpreter: counts every process the snippet's imports start.
_COUNT_SPAWNS = """
import json, sys
spawned = []
def hook(event, args):
    if event in ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                 "os.fork", "os.forkpty"):
        spawned.append(event)
sys.addaudithook(hook)
{body}
heavy = sorted(m for m in sys.modules if m == "numpy" or m.endswith("._native"))
print(json.dumps({{"spawned": spawned, "heavy": heavy}}))
"""


def _run(body: str, **env: str) -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", _COUNT_SPAWNS.format(body=body)], capture_output=True,
        text=True, cwd=ROOT, timeout=840, env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    out["stderr"] = [result.stderr]
    return out


def _editable() -> None:
    if _build._editable_finder() is None:
        pytest.skip("not an editable install (pip install --no-build-isolation -e .)")


def _fresh() -> None:
    if _build.stale_source() is not None:
        _build.rebuild()


@pytest.mark.timeout(900)
def test_import_spawns_no_build() -> None:
    _editable()
    _fresh()
    seen = _run("import optimized, optimized.book, optimized.itch, optimized.market, "
                "optimized.pcap, optimized.orders, optimized.pipeline, optimized.histogram")
    assert seen["spawned"] == [], seen
    assert "optimized._native" in seen["heavy"]


@pytest.mark.timeout(900)
def test_help_imports_no_numpy_and_spawns_nothing() -> None:
    _fresh()
    seen = _run("from twinmatch.cli import main\n"
                "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
                "try:\n    main(['gen', 'flow', '--help'])\nexcept SystemExit:\n    pass")
    assert seen == {"spawned": [], "heavy": [], "stderr": [""]}, seen


def test_import_cost_is_close_to_numpys() -> None:
    """A generous bound (the promise is numpy plus a few tens of milliseconds; this only
    catches a build check or a compile creeping back in, which costs far more)."""
    _fresh()

    def best(code: str) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)
            times.append(time.perf_counter() - start)
        return min(times)

    numpy_s = best("import numpy")
    optimized_s = best("import numpy, optimized.book, optimized.itch, optimized.market")
    assert optimized_s < numpy_s + 1.0, (optimized_s, numpy_s)


def test_staleness_check_sees_a_saved_source(tmp_path: Path) -> None:
    native = tmp_path / "native"
    native.mkdir()
    (native / "a.hpp").write_text("")
    os.utime(native / "a.hpp", ns=(1, 10**18))
    (native / "b.cpp").write_text("")
    os.utime(native / "b.cpp", ns=(1, 2 * 10**18))
    (native / "notes.md").write_text("")  # not a build input
    os.utime(native / "notes.md", ns=(1, 3 * 10**18))
    assert _build.newest_source(native) == (2 * 10**18, "b.cpp")


def test_staleness_check_sees_the_harness_folder(tmp_path: Path) -> None:
    """native/harness/ (the simulator behind `twinmatch gen`) is built into the same
    extension, so a saved file there is a stale build too."""
    native = tmp_path / "native"
    (native / "harness").mkdir(parents=True)
    (native / "a.hpp").write_text("")
    os.utime(native / "a.hpp", ns=(1, 10**18))
    (native / "harness" / "gen.hpp").write_text("")
    os.utime(native / "harness" / "gen.hpp", ns=(1, 2 * 10**18))
    assert _build.newest_source(native) == (2 * 10**18, "harness/gen.hpp")
    assert (ROOT / "native" / "harness" / "gen.hpp").is_file()


@pytest.mark.timeout(900)
def test_saved_source_warns_without_rebuild_and_rebuilds_on_import() -> None:
    _editable()
    _fresh()
    built = Path(optimized._native.__file__)
    source = ROOT / "native" / "module.cpp"  # the smallest translation unit
    os.utime(source)  # "saved just now": newer than the extension built from it
    try:
        warned = _run("import warnings\nwarnings.simplefilter('always')\nimport optimized",
                      TWINMATCH_NO_REBUILD="1")
        assert warned["spawned"] == []
        assert "native/module.cpp changed after the extension was built" in warned["stderr"][0]
        assert "make build" in warned["stderr"][0]

        before = built.stat().st_mtime_ns
        rebuilt = _run("import optimized._native")
        assert rebuilt["spawned"], "a stale extension was not rebuilt on import"
        assert "rebuilding" in rebuilt["stderr"][0]
        assert built.stat().st_mtime_ns > before
        assert _build.stale_source() is None
        again = _run("import optimized._native")
        assert again["spawned"] == [], "a fresh extension was rebuilt again"
    finally:
        _fresh()


@pytest.mark.timeout(900)
def test_source_from_the_future_does_not_rebuild_every_time() -> None:
    """A source stamped in the future (clock skew, an unpacked archive) is rebuilt once."""
    _editable()
    _fresh()
    source = ROOT / "native" / "module.cpp"
    saved = source.stat()
    future = time.time_ns() + 3600 * 10**9
    os.utime(source, ns=(future, future))
    try:
        assert _build.stale_source() == "module.cpp"
        _build.rebuild()
        assert _build.stale_source() is None
    finally:
        os.utime(source, ns=(saved.st_atime_ns, saved.st_mtime_ns))
        built = _build.extension_path()
        if built is not None:
            os.utime(built)  # back from the future, so that later edits are seen again
        _fresh()
