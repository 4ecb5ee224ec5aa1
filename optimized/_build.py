"""Keep the editable install's extension in step with native/, without a build on import.

The editable install (``pip install --no-build-isolation -e .``) does not rebuild the
C++ on import: that would cost a ``cmake --build`` on every start of every command.
Instead:

* ``make build`` (``python -m optimized._build``) rebuilds and re-installs the extension;
  every Makefile target that uses it runs that first;
* ``import optimized`` makes a staleness check that costs two directory listings and a
  ``stat`` per file of native/ and native/harness/ (no subprocess): if a source there was
  saved after the extension was built, it rebuilds once, saying so on stderr, so an edit
  to native/ still takes effect on the next run. With ``TWINMATCH_NO_REBUILD=1`` it only
  warns.

Outside a source checkout (a wheel install, no native/ beside the package) nothing is
checked. The check trusts modification times: a source stamped in the future is rebuilt
once, and an edit is then seen only after that time (``make build`` always rebuilds).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

NATIVE = Path(__file__).resolve().parent.parent / "native"
EXTENSION = "optimized._native"
# What the extension is built from: sources, headers and the build script.
_SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".txt")
_HARNESS = "harness"  # native/harness/: the harness's C++ (twinmatch gen), same extension
NO_REBUILD = "TWINMATCH_NO_REBUILD"


class StaleExtensionWarning(UserWarning):
    """The extension is older than a file in native/ and was not rebuilt."""


def newest_source(native: Path = NATIVE) -> tuple[int, str]:
    """(modification time in ns, name) of the most recently saved file in ``native`` or
    its harness/ folder (the harness's C++, built into the same extension); the name is
    relative to ``native`` (``book.hpp``, ``harness/gen.hpp``)."""
    newest, name = 0, ""
    for folder, prefix in ((native, ""), (native / _HARNESS, f"{_HARNESS}/")):
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(_SOURCE_SUFFIXES) and entry.is_file():
                    mtime = entry.stat().st_mtime_ns
                    if mtime > newest:
                        newest, name = mtime, prefix + entry.name
    return newest, name


def extension_path() -> Path | None:
    """Where the built extension is (found, not loaded), or None."""
    import importlib.util

    spec = importlib.util.find_spec(EXTENSION)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin)


def stale_source() -> str | None:
    """The name of a file in native/ newer than the built extension, or None if fresh."""
    if not NATIVE.is_dir():
        return None
    built = extension_path()
    if built is None or not built.is_file():
        return None
    newest, name = newest_source()
    return name if newest > built.stat().st_mtime_ns else None


def _editable_finder() -> Any:
    """scikit-build-core's import finder for this editable install (it knows the build
    directory and how to re-install), or None."""
    for finder in sys.meta_path:
        if EXTENSION in getattr(finder, "known_wheel_files", {}) and hasattr(finder, "rebuild"):
            return finder
    return None


def rebuild() -> None:
    """``cmake --build`` + ``cmake --install`` in the editable install's build directory,
    then mark the extension as built now (a change that recompiles nothing, such as a new
    header no source includes yet, would otherwise look stale forever)."""
    import subprocess

    finder = _editable_finder()
    if finder is None or not getattr(finder, "path", None):
        raise RuntimeError("optimized: not an editable install with a build directory; "
                           "reinstall with `make install` (pip install --no-build-isolation -e .)")
    try:
        finder.rebuild()
    except subprocess.CalledProcessError as exc:
        raise ImportError("optimized: rebuilding the extension from native/ failed (the "
                          "compiler's messages are above); fix the source, or restore it "
                          "with `git checkout native/`") from exc
    built = extension_path()
    if built is not None and built.is_file():
        # Now, or the newest source's time if that is in the future (a clock skew, an
        # unpacked archive): else every import would rebuild again.
        import time

        stamp = max(time.time_ns(), newest_source()[0] if NATIVE.is_dir() else 0)
        os.utime(built, ns=(stamp, stamp))


def ensure_fresh() -> None:
    """The check ``import optimized`` makes: rebuild (or warn) if native/ changed."""
    name = stale_source()
    if name is None:
        return
    if os.environ.get(NO_REBUILD) or _editable_finder() is None:
        warnings.warn(f"optimized: native/{name} changed after the extension was built; "
                      f"this run uses the old build (run `make build`)",
                      StaleExtensionWarning, stacklevel=3)
        return
    print(f"optimized: native/{name} changed since the last build; rebuilding "
          "(as `make build` does) ...", file=sys.stderr, flush=True)
    rebuild()


def main() -> int:
    """``make build``: rebuild whatever changed (a no-op that takes a moment when fresh)."""
    rebuild()
    print(f"optimized: {extension_path()} is up to date with native/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
