"""The machine label: what produced a measurement (CPU, cores, compiler, Python, flags, date).

Every number in the book carries this label. The benchmarks record it in the
pytest-benchmark JSON (``machine_info["twinmatch"]``) through this hook in
``tests/bench/conftest.py``::

    def pytest_benchmark_update_machine_info(config, machine_info):
        machine_info["twinmatch"] = machine.collect()

and ``scripts/figures.py`` prints it under every table and plot.

Run it alone to see this machine's label: ``python scripts/machine.py [--json]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name from /proc/cpuinfo, or platform's guess elsewhere."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def native_build() -> dict[str, str]:
    """Compiler and build type recorded in optimized._native, if it imports."""
    try:
        native = importlib.import_module("optimized._native")
    except Exception as exc:  # any failure means "not built": say so and go on
        return {"compiler": "unknown (optimized._native not importable)",
                "build": f"unavailable: {type(exc).__name__}"}
    info = {"compiler": str(getattr(native, "COMPILER", "unknown"))}
    build = [str(getattr(native, name)) for name in ("BUILD_TYPE", "BUILD_FLAGS")
             if hasattr(native, name)]
    info["build"] = " ".join(build) if build else "unknown"
    return info


def collect(now: dt.datetime | None = None) -> dict[str, Any]:
    """All the facts of the label, as a JSON-ready dict."""
    when = now or dt.datetime.now(dt.UTC)
    native = native_build()
    return {
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "compiler": native["compiler"],
        "build": native["build"],
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
        "date": when.strftime("%Y-%m-%d"),
    }


def label(info: dict[str, Any]) -> str:
    """One line for a caption: 'Xeon ..., 2 cores; GNU 12.2.0 Release; CPython 3.11.2; ...'."""
    parts = [
        f"{info.get('cpu', 'unknown CPU')}, {info.get('cores', '?')} cores",
        f"{info.get('compiler', 'unknown compiler')} {info.get('build', '')}".strip(),
        str(info.get("python", "unknown Python")),
        str(info.get("os", "")),
        str(info.get("date", "")),
    ]
    return "; ".join(p for p in parts if p)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    info = collect()
    print(json.dumps(info, indent=2) if args.json else label(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
