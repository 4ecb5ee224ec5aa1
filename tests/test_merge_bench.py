"""scripts/merge_bench.py: a partial run laid over the reference keeps provenance."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

from tests.conftest import ROOT


def _load(name: str) -> ModuleType:
    """A script by path, as tests/test_docs.py loads figures.py (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location(f"tm_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


merge_bench = _load("merge_bench")
figures = _load("figures")


def _run(commit: str, date: str, rows: list[tuple[str, str]]) -> dict[str, Any]:
    return {"commit_info": {"id": commit}, "datetime": date,
            "machine_info": {"cpu": {"brand_raw": f"CPU of {commit[:1]}"}},
            "benchmarks": [{"group": g, "name": n, "fullname": n, "extra_info": {},
                            "stats": {"median": 1.0, "rounds": 1}} for g, n in rows]}


def test_new_rows_replace_old_and_the_rest_is_stamped() -> None:
    ref = _run("aaaaaaaaaaaa", "2026-12-01T00:00", [("engine", "t1"), ("itch", "t2")])
    new = _run("bbbbbbbbbbbb", "2026-12-02T00:00", [("engine", "t1"), ("simd", "t3")])
    out = merge_bench.merge(new, ref)
    names = [(b["group"], b["name"]) for b in out["benchmarks"]]
    assert names == [("engine", "t1"), ("simd", "t3"), ("itch", "t2")]
    assert out["commit_info"]["id"] == "bbbbbbbbbbbb"
    assert out["merged_from"] == [{"commit": "aaaaaaaaaa", "date": "2026-12-01",
                                   "cpu": "CPU of a", "groups": ["itch"]}]
    # a second merge keeps the first stamp of rows it does not replace
    newer = _run("cccccccccccc", "2026-12-03T00:00", [("simd", "t3")])
    again = merge_bench.merge(newer, out)
    assert {(m["commit"], tuple(m["groups"])) for m in again["merged_from"]} == {
        ("aaaaaaaaaa", ("itch",)), ("bbbbbbbbbb", ("engine",))}
    label = figures.run_label(again)
    assert "commit cccccccccc" in label
    assert "rows of groups itch from the run of commit aaaaaaaaaa (2026-12-01, CPU of a)" in label
    # each older run names its own machine: rows merged from two machines say so
    assert "(2026-12-02, CPU of b)" in label


def test_a_group_the_new_run_measured_is_the_new_runs_alone() -> None:
    """With whole_groups, a row of a re-measured group that the new run lacks (an AVX-512
    row measured on a machine that had it) is dropped: one table's rows come from one
    run. The "paired" group's records are the targets' own comparisons and are replaced
    one by one."""
    ref = _run("aaaaaaaaaaaa", "2026-12-01T00:00",
               [("simd", "filter[avx2]"), ("simd", "filter[avx512]"), ("paired", "p1"),
                ("paired", "p2")])
    new = _run("bbbbbbbbbbbb", "2026-12-02T00:00", [("simd", "filter[avx2]"), ("paired", "p1")])
    # by default a row the new run lacks stays (an opt-in day's), labelled as older
    kept = merge_bench.merge(new, ref)
    assert ("simd", "filter[avx512]") in [(b["group"], b["name"]) for b in kept["benchmarks"]]
    out = merge_bench.merge(new, ref, whole_groups=True)
    names = [(b["group"], b["name"]) for b in out["benchmarks"]]
    assert names == [("simd", "filter[avx2]"), ("paired", "p1"), ("paired", "p2")]
    assert out["merged_from"] == [{"commit": "aaaaaaaaaa", "date": "2026-12-01",
                                   "cpu": "CPU of a", "groups": ["paired"]}]


def test_a_table_names_the_run_of_its_own_rows() -> None:
    """figures.group_label: a group measured in one run names that run alone (not every
    run the reference holds); a group whose rows come from two runs names both."""
    ref = _run("aaaaaaaaaaaa", "2026-12-01T00:00", [("engine", "t1"), ("itch", "t2"),
                                                    ("itch", "t3")])
    new = _run("bbbbbbbbbbbb", "2026-12-02T00:00", [("simd", "t4"), ("itch", "t3")])
    out = merge_bench.merge(new, ref)
    engine = figures.group_label(out, "engine")
    assert engine == "the run of commit aaaaaaaaaa (2026-12-01, CPU of a)"
    simd = figures.group_label(out, "simd")
    assert "commit bbbbbbbbbb" in simd and "aaaaaaaaaa" not in simd
    itch = figures.group_label(out, "itch")
    assert itch.startswith("rows from more than one run") and "aaaaaaaaaa" in itch \
        and "bbbbbbbbbb" in itch
