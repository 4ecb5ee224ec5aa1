"""The size of every code snippet the book includes, against the page's limits.

    python scripts/snippets.py              # the distribution and the worst snippets
    python scripts/snippets.py --write-debt # record today's oversize snippets (a ratchet)

A listing on the page is at most MAX_LINES lines and MAX_COLUMNS columns: longer, and a
reader cannot hold it; wider, and it scrolls sideways in the content column.
tests/test_docs.py fails on any snippet over either limit unless it is listed in
tests/data/snippet-debt.json, and then only if it grew past the size recorded there; a
listed snippet that now fits must leave the list. So the list can only shrink.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
DEBT = ROOT / "tests" / "data" / "snippet-debt.json"
MAX_LINES = 40
MAX_COLUMNS = 88

INCLUDE = re.compile(r"""^[ \t]*-+8<-+[ \t]+["'](?P<path>[^"':]+)"""
                     r""":(?P<section>[-_0-9a-zA-Z]+)["']""")
MARKER = re.compile(r"-+8<-+[ \t]+\[[ \t]*(?P<type>start|end)[ \t]*:[ \t]*"
                    r"(?P<name>[-_0-9a-zA-Z]+)[ \t]*\]")


@dataclass(frozen=True)
class Snippet:
    key: str      # path:section
    lines: int
    columns: int

    @property
    def oversize(self) -> bool:
        return self.lines > MAX_LINES or self.columns > MAX_COLUMNS


def body(text: str, name: str) -> list[str]:
    """The lines of a section as the page shows them (nested markers left out)."""
    inside, out = False, []
    for line in text.splitlines():
        m = MARKER.search(line)
        if m and m.group("name") == name:
            if m.group("type") == "start":
                inside = True
                continue
            break
        if inside and not m:
            out.append(line)
    return out


def snippets(root: Path = ROOT) -> list[Snippet]:
    """Every source snippet a page includes (generated tables and numbers are not code)."""
    seen: dict[str, Snippet] = {}
    for page in sorted((root / "chapters").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            m = INCLUDE.match(line)
            if m is None or m.group("path").startswith("chapters/"):
                continue
            source = root / m.group("path")
            if not source.is_file():
                continue
            key = f"{m.group('path')}:{m.group('section')}"
            lines = body(source.read_text(encoding="utf-8"), m.group("section"))
            seen[key] = Snippet(key, len(lines), max((len(x) for x in lines), default=0))
    return sorted(seen.values(), key=lambda s: s.key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-debt", action="store_true",
                        help=f"record today's oversize snippets in {DEBT.relative_to(ROOT)}")
    args = parser.parse_args()
    found = snippets()
    sizes = [s.lines for s in found]
    over = [s for s in found if s.oversize]
    print(f"{len(found)} snippets: median {statistics.median(sizes):.0f} lines, "
          f"largest {max(sizes)}; over {MAX_LINES} lines: "
          f"{sum(s.lines > MAX_LINES for s in found)}; over {MAX_COLUMNS} columns: "
          f"{sum(s.columns > MAX_COLUMNS for s in found)}")
    for s in sorted(over, key=lambda s: -s.lines)[:15]:
        print(f"  {s.lines:4d} lines {s.columns:4d} cols  {s.key}")
    if args.write_debt:
        DEBT.write_text(json.dumps({s.key: [s.lines, s.columns] for s in over}, indent=1)
                        + "\n", encoding="utf-8")
        print(f"wrote {DEBT.relative_to(ROOT)}: {len(over)} snippets over a limit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
