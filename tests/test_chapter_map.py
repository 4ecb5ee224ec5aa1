"""The book's chapter list (chapters/index.md), mkdocs.yml's nav and README.md's map agree
with the chapter files: one numbering, every written chapter linked."""

from __future__ import annotations

import re

import markdown  # type: ignore[import-untyped]

from tests.conftest import ROOT

CHAPTER_FILE = re.compile(r"^(\d\d)-[a-z0-9-]+\.md$")


def _written() -> dict[int, tuple[str, str]]:
    """Chapter number -> (file name, title from its heading, without the number)."""
    out = {}
    for path in sorted((ROOT / "chapters").iterdir()):
        m = CHAPTER_FILE.match(path.name)
        if m:
            heading = path.read_text(encoding="utf-8").splitlines()[0]
            title = re.sub(r"^#\s+\d+\.\s+", "", heading)
            out[int(m.group(1))] = (path.name, title)
    return out


def test_index_numbers_run_on_and_link_every_written_chapter() -> None:
    text = (ROOT / "chapters" / "index.md").read_text(encoding="utf-8")
    items = re.findall(r"^(\d+)\. (.*)$", text, flags=re.MULTILINE)
    numbers = [int(n) for n, _ in items]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    written = _written()
    for number, rest in items:
        link = re.match(r"\[([^\]]+)\]\(([^)]+)\)", rest)
        if int(number) in written:
            name, title = written[int(number)]
            assert link and link.group(2) == name, f"chapter {number} is not linked to {name}"
            assert title.startswith(link.group(1)), (title, link.group(1))
        else:
            assert link is None, f"chapter {number} links a file that does not exist"


def test_part_two_keeps_its_numbers_when_rendered() -> None:
    """Python-Markdown restarts every ordered list at 1 unless sane_lists is on."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+- sane_lists\s*$", config, flags=re.MULTILINE)
    html = markdown.markdown((ROOT / "chapters" / "index.md").read_text(encoding="utf-8"),
                             extensions=["sane_lists"])
    first = min(n for n, _ in _written_parts())
    assert f'<ol start="{first}">' in html


def _written_parts() -> list[tuple[int, str]]:
    text = (ROOT / "chapters" / "index.md").read_text(encoding="utf-8")
    part2 = text[text.index("**Part II"):]
    return [(int(n), rest) for n, rest in re.findall(r"^(\d+)\. (.*)$", part2, re.MULTILINE)]


def test_nav_and_readme_map_list_every_written_chapter() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+)\. ([^|]+?) \|", readme, flags=re.MULTILINE))
    for number, (name, title) in _written().items():
        assert re.search(rf"- {number}\. [^:]+: {re.escape(name)}$", nav, re.MULTILINE), name
        assert str(number) in rows, f"README.md's map has no row for chapter {number}"
        assert title.startswith(rows[str(number)]), (title, rows[str(number)])
    assert set(map(int, rows)) == set(_written()), "README's map lists a chapter not written"
