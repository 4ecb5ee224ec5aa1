"""Put the committed reference run where pytest-benchmark looks for saved runs.

    python scripts/bench_reference.py [--storage out/bench-storage]

``pytest --benchmark-compare=0001`` loads a saved run from
``<storage>/<machine id>/0001_*.json`` (the machine id is pytest-benchmark's own:
system, Python implementation and version, word size, e.g. ``Linux-CPython-3.11-64bit``).
The reference run (chapters/generated/bench-reference.json) is a plain pytest-benchmark
JSON with one more key, ``merged_from`` (scripts/merge_bench.py), which pytest-benchmark
ignores; so a copy under this machine's id is all it takes. The storage must be under the
directory pytest runs in: pytest-benchmark 5.x fails with a traceback while warning that
the machines differ when the storage lies outside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinmatch.atomic import write_file  # noqa: E402

REFERENCE = ROOT / "chapters" / "generated" / "bench-reference.json"


def main(argv: list[str] | None = None) -> int:
    from pytest_benchmark.utils import get_machine_id

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", type=Path, default=ROOT / "out" / "bench-storage")
    args = parser.parse_args(argv)
    target = args.storage / str(get_machine_id()) / "0001_reference.json"  # type: ignore[no-untyped-call]
    target.parent.mkdir(parents=True, exist_ok=True)
    write_file(target, REFERENCE.read_bytes())
    print(f"{target}: the reference run, compared with --benchmark-storage={args.storage} "
          f"--benchmark-compare=0001")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
