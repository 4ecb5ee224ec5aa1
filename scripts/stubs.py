"""Regenerate (``--write``) or verify (``--check``) optimized/_native.pyi with nanobind's stubgen.

The stub is what mypy sees of the native module, so it is committed; ``--check``
regenerates it into a temporary directory and fails with a diff if the committed
one is stale (a C++ signature changed without ``make stubs``).
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "optimized" / "_native.pyi"
MODULE = "optimized._native"


# Module-level string constants whose value depends on the build (COMPILER = "GNU 12.2.0",
# BUILD_TYPE): the stub keeps only their type, so it is the same on every machine.
# What stubgen cannot see: element types of module attributes. (The C++ exercises are
# their own extension, exercises/native/, with no committed stub.)
_FIXUPS = (
    ("ITCH_LENGTHS: list = ...", "ITCH_LENGTHS: list[int] = ..."),
    ("def itch_scan(buffer: object) -> tuple:",
     "def itch_scan(buffer: object) -> tuple[typing.Any, ...]:"),
    ('"""twinmatch optimized twins (C++20)"""\n',
     '"""twinmatch optimized twins (C++20)"""\n\nimport typing\n'),
    # BookFull's attributes: stubgen sees only their class-level default, None.
    ("    index: None = None\n", "    index: int | None\n"),
    ("    fills: None = None\n", "    fills: numpy.typing.NDArray[numpy.void] | None\n"),
    ("    rejects: None = None\n", "    rejects: numpy.typing.NDArray[numpy.void] | None\n"),
)
_BUILD_CONSTANT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): str = .*$", re.MULTILINE)


def generate(out: Path) -> str:
    """Run stubgen on the built module; write and return the (machine-neutral) stub."""
    subprocess.run(
        [sys.executable, "-m", "nanobind.stubgen", "-m", MODULE, "-o", str(out), "-q"],
        check=True,
        cwd=ROOT,
    )
    text = _BUILD_CONSTANT.sub(r"\1: str", out.read_text())
    for old, new in _FIXUPS:
        text = text.replace(old, new)
    out.write_text(text)
    # stubgen writes long one-line signatures; ruff (with the project's settings) sorts
    # the imports and wraps them, so the committed stub passes `make lint` as it is.
    config = ["--config", str(ROOT / "pyproject.toml")]
    ruff = [sys.executable, "-m", "ruff"]
    subprocess.run(
        [*ruff, "check", "--fix", "-q", *config, str(out)], check=False, cwd=ROOT,
        capture_output=True,
    )
    subprocess.run([*ruff, "format", "-q", *config, str(out)], check=True, cwd=ROOT)
    return out.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the committed stub")
    mode.add_argument("--check", action="store_true", help="fail if the committed stub is stale")
    args = parser.parse_args(argv)
    if args.write:
        generate(STUB)
        print(f"wrote {STUB.relative_to(ROOT)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp) / "_native.pyi")
    current = STUB.read_text() if STUB.exists() else ""
    if fresh == current:
        print(f"{STUB.relative_to(ROOT)} is up to date")
        return 0
    diff = difflib.unified_diff(
        current.splitlines(keepends=True),
        fresh.splitlines(keepends=True),
        fromfile="committed",
        tofile="regenerated",
    )
    sys.stdout.writelines(diff)
    print(f"\n{STUB.relative_to(ROOT)} is stale: run `make stubs`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
