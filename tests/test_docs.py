"""The book's sources: every snippet resolves, twin tabs are labelled exactly, figures.py works.

pymdownx.snippets with check_paths fails the build on a missing file or section (checked
in pymdownx 10+), but not on a section whose end marker is missing (it then includes to
the end of the file) or an empty section; older versions render a missing section as
nothing. So this test checks every reference itself.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
FIXTURE = ROOT / "tests" / "data" / "bench-fixture.json"
NAIVE, OPTIMIZED = "Naive (Python)", "Optimized (C++)"

SNIPPET = re.compile(r"""^[ \t]*(?P<escape>;*)-+8<-+[ \t]+(?P<q>["'])(?P<ref>.+?)(?P=q)\s*$""")
SECTION = re.compile(r"^(?P<path>.+?):(?P<section>[a-z][-_0-9a-z]*)$", re.IGNORECASE)
MARKER = re.compile(r"(?<!;)-+8<-+[ \t]+\[[ \t]*(?P<type>start|end)[ \t]*:[ \t]*"
                    r"(?P<name>[a-z][-_0-9a-z]*)[ \t]*\]", re.IGNORECASE)
TAB = re.compile(r'^[ \t]*===\+?[ \t]+"(?P<label>[^"]*)"')


def pages() -> list[Path]:
    return sorted(p for p in CHAPTERS.rglob("*.md") if "generated" not in p.parts)


def references() -> list[tuple[str, int, str]]:
    refs = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            m = SNIPPET.match(line)
            if m and not m.group("escape"):
                refs.append((f"{page.relative_to(ROOT)}:{number}", number, m.group("ref")))
    return refs


def section_lines(text: str, name: str) -> list[str] | None:
    """The lines of section ``name`` or None if its start or end marker is missing."""
    inside, body, seen_end = False, [], False
    for line in text.splitlines():
        m = MARKER.search(line)
        if m and m.group("name").lower() == name.lower():
            if m.group("type").lower() == "start":
                inside = True
                continue
            if inside:
                seen_end = True
                break
        elif inside and not m:
            body.append(line)
    return body if inside and seen_end else None


REFS = references()


@pytest.mark.parametrize("where, line, ref", REFS, ids=[r[0] for r in REFS])
def test_snippet_reference_resolves(where: str, line: int, ref: str) -> None:
    m = SECTION.match(ref)
    path, section = (m.group("path"), m.group("section")) if m else (ref, None)
    file = ROOT / path
    hint = " (run scripts/figures.py)" if "generated" in Path(path).parts else ""
    assert file.is_file(), f"{where}: {path} does not exist{hint}"
    if section is not None:
        body = section_lines(file.read_text(encoding="utf-8"), section)
        assert body is not None, (f"{where}: {path} has no section {section!r} with both "
                                  f"'[start:{section}]' and '[end:{section}]' markers{hint}")
        assert any(s.strip() for s in body), f"{where}: section {section!r} of {path} is empty"


def test_twin_tabs_are_labelled_exactly() -> None:
    wrong = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            m = TAB.match(line)
            if not m:
                continue
            label = m.group("label")
            first = label.split()[0].lower() if label.split() else ""
            if first in ("naive", "optimized") and label not in (NAIVE, OPTIMIZED):
                wrong.append(f"{page.relative_to(ROOT)}:{number}: {label!r}")
    assert not wrong, f"twin tabs must be labelled {NAIVE!r} / {OPTIMIZED!r}: {wrong}"


# ---------------------------------------------------------------------------- figures.py


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"tm_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _figures() -> ModuleType:
    return load_script("figures")


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    return _figures()


def _chapter(tmp: Path, body: str) -> Path:
    chapters = tmp / "chapters"
    chapters.mkdir()
    (chapters / "01-x.md").write_text(body, encoding="utf-8")
    return chapters


PAGE = """
--8<-- "chapters/generated/book-table.md"
--8<-- "chapters/generated/absent-table.md"
--8<-- "chapters/generated/numbers.md:book-add-limit-uniform-optimized-speedup"
--8<-- "chapters/generated/numbers.md:absent-thing-speedup"
![plot](generated/book-ops.svg)
![plot](generated/absent-ops.svg)
"""


def test_figures_from_fixture(figures: ModuleType, tmp_path: Path) -> None:
    chapters = _chapter(tmp_path, PAGE)
    out = tmp_path / "generated"
    missing = figures.generate(FIXTURE, out, chapters)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["absent-ops.svg", "absent-table.md", "book-ops.svg", "book-table.md",
                     "numbers.md", "sweep-depth.svg", "sweep-ops.svg", "sweep-table.md",
                     "targets-table.md"]
    assert missing == ["table of group 'absent'", "number 'absent-thing-speedup'",
                       "figure 'absent-ops.svg'"]
    table = (out / "book-table.md").read_text(encoding="utf-8")
    assert 'class="tm-bench" data-group="book"' in table
    assert "<th>Naive (Python)</th><th>std::map (C++)</th><th>Optimized (C++)</th>" in table
    assert "<strong>40×</strong>" in table and "<strong>8.0×</strong>" in table
    assert "50.0 ns/op · 20.0 M ops/s" in table
    assert "FIXTURE CPU" in table and "commit 0000000000" in table
    assert "No measurements yet for group <code>absent</code>" in (
        out / "absent-table.md").read_text(encoding="utf-8")
    numbers = (out / "numbers.md").read_text(encoding="utf-8")
    lines = {name: figures_section(numbers, name) for name in (
        "book-add-limit-uniform-optimized-speedup", "book-cancel-realistic-naive-median",
        "sweep-depth-10-optimized-per-op", "absent-thing-speedup", "machine")}
    assert lines["book-add-limit-uniform-optimized-speedup"] == "40×"
    assert lines["book-cancel-realistic-naive-median"] == "15.0 ms"
    assert lines["sweep-depth-10-optimized-per-op"] == "24.0 ns"
    assert lines["absent-thing-speedup"] == "(not measured yet)"
    assert lines["machine"].startswith("FIXTURE CPU")
    svg = (out / "book-ops.svg").read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<?xml") and "<script" not in svg and "http" not in \
        svg.replace("http://www.w3.org", "").replace("http://purl.org", "").replace(
            "http://creativecommons.org", "").replace("https://matplotlib.org", "")


def figures_section(text: str, name: str) -> str:
    body = section_lines(text, name)
    assert body is not None, f"numbers.md has no section {name}"
    return "\n".join(body).strip()


def test_figures_output_is_deterministic(figures: ModuleType, tmp_path: Path) -> None:
    chapters = _chapter(tmp_path, PAGE)
    first, second = tmp_path / "a", tmp_path / "b"
    figures.generate(FIXTURE, first, chapters)
    figures.generate(FIXTURE, second, chapters)
    for path in sorted(first.iterdir()):
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name


def test_figures_without_any_run(figures: ModuleType, tmp_path: Path) -> None:
    chapters = _chapter(tmp_path, PAGE)
    out = tmp_path / "generated"
    missing = figures.generate(tmp_path / "no-such.json", out, chapters)
    assert len(missing) == 6
    with pytest.raises(SystemExit):
        figures.generate(tmp_path / "no-such.json", out, chapters, strict=True)


def test_figures_reads_pytest_benchmark_machine_info(figures: ModuleType) -> None:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    del data["machine_info"]["twinmatch"]
    label = figures.run_label(data)
    assert "FIXTURE CPU" in label and "CPython 3.11.0" in label and "2000-01-01" in label


def test_fixture_is_never_the_reference() -> None:
    reference = CHAPTERS / "generated" / "bench-reference.json"
    if reference.exists():
        assert "FIXTURE" not in reference.read_text(encoding="utf-8")


def test_snippets_fit_the_page() -> None:
    """Every listing is at most 40 lines and 88 columns. The snippets that were larger when
    this check arrived are listed in tests/data/snippet-debt.json with their size then:
    they may shrink, never grow, and one that fits must leave the list (it only shrinks)."""
    snippets = load_script("snippets")
    debt = json.loads((ROOT / "tests" / "data" / "snippet-debt.json").read_text("utf-8"))
    problems = []
    found = {s.key: s for s in snippets.snippets()}
    for key, s in found.items():
        if not s.oversize:
            if key in debt:
                problems.append(f"{key} now fits ({s.lines} lines, {s.columns} columns): "
                                "remove it from tests/data/snippet-debt.json")
            continue
        if key not in debt:
            problems.append(f"{key}: {s.lines} lines, {s.columns} columns (limit "
                            f"{snippets.MAX_LINES} x {snippets.MAX_COLUMNS}): split it")
            continue
        lines, columns = debt[key]
        if s.lines > max(lines, snippets.MAX_LINES) or s.columns > max(columns,
                                                                        snippets.MAX_COLUMNS):
            problems.append(f"{key} grew to {s.lines} lines, {s.columns} columns "
                            f"(recorded {lines} x {columns})")
    problems += [f"{key}: listed in snippet-debt.json but no page includes it"
                 for key in debt if key not in found]
    assert not problems, "\n".join(problems)


def test_paired_records_keep_cpu_time_and_targets_judge_it() -> None:
    """A paired record keeps each side's CPU time beside its wall time (threads and waited
    children included); a target with a CPU bound fails when the wall-clock lead is only a
    second core's, and when the run kept no CPU figures."""
    from tests.bench.paired import Side, summarize

    fast, slow = Side("two-threads", lambda _: None), Side("one-thread", lambda _: None)
    # Twice as fast by the wall clock, but the same CPU seconds (two cores busy).
    record = summarize("tables-day-vs-itchbook", fast, slow, [1.0] * 11, [2.0] * 11, 1,
                       [2.0] * 11, [2.0] * 11)
    assert record["median"] == 2.0 and record["cpu_median"] == 1.0
    targets = load_script("targets")
    run = {"benchmarks": [{"extra_info": {"paired": record}}]}
    [result] = [r for r in targets.evaluate(run) if r["key"] == "tables-day-vs-itchbook"]
    assert result["status"] == "pass" and result["cpu_ratio"] == 1.0  # bound 1.5 wall, 1.0 CPU
    record = summarize("tables-day-vs-itchbook", fast, slow, [1.0] * 11, [2.0] * 11, 1,
                       [3.0] * 11, [2.0] * 11)
    run = {"benchmarks": [{"extra_info": {"paired": record}}]}
    [result] = [r for r in targets.evaluate(run) if r["key"] == "tables-day-vs-itchbook"]
    assert result["status"] == "FAIL"  # faster by the wall clock, but more CPU
    assert "CPU time 0.67x" in targets.describe(result)[0]
    del record["cpu_median"]
    [result] = [r for r in targets.evaluate(run) if r["key"] == "tables-day-vs-itchbook"]
    assert result["status"] == "FAIL"
    assert "CPU time not measured" in targets.describe(result)[0]


def test_simd_sizes_verdict_follows_the_paired_data() -> None:
    """Chapter 9's sentence on the two input sizes is generated from the paired records: it
    names what holds the record loop back from its share of a read, and a ratio whose IQR
    straddles 1.0 as no measurable effect."""
    figures = load_script("figures")

    def rec(key: str, q1: float, median: float, q3: float) -> dict[str, object]:
        return {"key": key, "q1": q1, "median": median, "q3": q3}

    records = []
    for size, share in (("l2", 0.35), ("dram", 0.9)):
        records += [rec(f"simd-{size}-soa-vs-aos", 0.9, 1.05, 1.2),
                    rec(f"simd-{size}-read-soa-vs-aos", 4.0, 4.3, 4.5),
                    rec(f"simd-{size}-aos-vs-read", share - .01, share, share + .01),
                    rec(f"simd-{size}-vs-aos", 2.0, 2.2, 2.4),
                    rec(f"simd-{size}-vs-read", 0.4, 0.45, 0.5)]
    text = figures.simd_sizes_verdict(records)
    l2, dram = text.split("At the DRAM-sized input")
    assert "instructions, not its bytes, hold it back" in l2
    assert "bytes, not its instructions, hold it back" in dram
    assert "do not make the scalar loop measurably faster" in l2
    assert figures.simd_sizes_verdict(records[:-1]) is None  # one record missing: unmeasured


def test_scaling_model_and_verdicts_follow_the_data() -> None:
    """Chapter 10's model table and sentences come from the run: the slower stage names the
    limit, a ratio below 1 is worded as a slowdown with its IQR inverted too."""
    figures = load_script("figures")

    def run(writer: float, worker: float, routed_2v1: tuple[float, float, float]) -> Any:
        q1, median, q3 = routed_2v1
        return {"benchmarks": [
            {"group": "scaling", "name": "test_scaling_model[optimized]", "params": {},
             "stats": {"median": 1.0}, "extra_info": {"ops": 1, "scaling_model": {
                 "writer_s_per_msg": writer, "worker_s_per_msg": worker,
                 "events_per_msg": 1.0,
                 "busiest_share": {"1": 1.0, "2": 0.5, "4": 0.3, "8": 0.2}}}},
            {"group": "scaling", "name": "test_paired_scaling[scaling-routed-2v1]",
             "stats": {"median": 1.0}, "extra_info": {"paired": {
                 "key": "scaling-routed-2v1", "q1": q1, "median": median, "q3": q3}}}]}

    slow_writer = figures.scaling_numbers(run(60e-9, 50e-9, (0.8, 0.9, 0.95)))
    assert "predicts no gain" in slow_writer["scaling-model-verdict"]
    assert slow_writer["scaling-routed-2v1-verdict"] == (
        "slower with two workers: one worker is 1.1× (IQR 1.1×–1.2×)")
    slow_worker = figures.scaling_numbers(run(10e-9, 40e-9, (0.9, 1.02, 1.1)))
    assert "until 8 workers" in slow_worker["scaling-model-verdict"]
    assert slow_worker["scaling-routed-2v1-verdict"].startswith("no measurable effect")
    table = figures.scaling_model_html(run(10e-9, 40e-9, (1, 1, 1)), "test machine")
    assert "(busiest worker)" in table and "(writer)" in table


def test_layout_tails_need_samples_and_predictions_follow_the_data() -> None:
    """Chapter 8: a percentile with fewer than ten operations beyond it is not shown, and
    each prediction's verdict is computed from the run's counts and latencies."""
    figures = load_script("figures")
    lat = {"p50_ns": 100.0, "p99_ns": 200.0, "p999_ns": 900.0}
    recs: dict[tuple[str, str], dict[str, Any]] = {}
    for workload in ("uniform", "realistic"):
        for i, layout in enumerate(("map", "treap", "vector", "window", "bitmap3", "capped")):
            d1 = (10.0 + i if layout in ("map", "treap", "vector") else 3.0)
            d1 = d1 / 4 if workload == "realistic" else d1
            tail = 900.0 if (layout, workload) in (("capped", "uniform"),
                                                   ("vector", "uniform")) else 300.0
            recs[(workload, layout)] = {"ops": 938, "valgrind": {"D1": d1},
                                        "latency": {**lat, "p999_ns": tail}}
    table = figures.layouts_table_html("uniform", recs, "test machine")
    assert "<td>100</td><td>—</td><td>—</td>" in table  # 938 ops: only the median
    text = figures.layouts_predictions(recs)
    assert text.count("**held**") == 4
    recs[("uniform", "capped")]["latency"]["p999_ns"] = 200.0
    assert "**did not hold**" in figures.layouts_predictions(recs)
    del recs[("uniform", "map")]["valgrind"]
    assert figures.layouts_predictions(recs) is None
