"""``twinmatch replay`` over many files (chapter 10): sequential, worker processes and a
dask.distributed LocalCluster all merge into the same report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinmatch import cli
from twinmatch.gen import write_itch_flow, write_market_day
from twinmatch.multi_replay import TIMING_KEYS, merge_reports, replay_many, replay_one

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("days")
    paths = []
    for seed in (1, 2, 3):
        write_market_day(d, 3_000, 12, seed, ("itch",), name=f"day{seed}")
        paths.append(d / f"day{seed}.itch")
    return paths


def test_merged_report_is_the_sum_of_the_files(days: list[Path]) -> None:
    seq = replay_many(days)
    reports = [replay_one(str(p)) for p in days]
    assert seq["total"]["messages"] == sum(r["messages"] for r in reports)
    assert seq["total"]["fills"] == sum(r["fills"] for r in reports)
    assert [f["file"] for f in seq["files"]] == [str(p) for p in days]
    assert not any(k in f for f in seq["files"] for k in TIMING_KEYS)
    assert merge_reports(reports) == {"files": seq["files"], "total": seq["total"]}


def test_worker_processes_equal_sequential(days: list[Path]) -> None:
    seq = replay_many(days, mode="book")
    par = replay_many(days, mode="book", workers=2)
    assert par["executor"] == "2 worker processes"
    assert (par["files"], par["total"]) == (seq["files"], seq["total"])


def test_dask_local_cluster_equals_sequential(days: list[Path]) -> None:
    pytest.importorskip("distributed")
    seq = replay_many(days)
    dist = replay_many(days, workers=2, cluster="local", local_processes=False)
    assert dist["executor"].startswith("dask.distributed")
    assert (dist["files"], dist["total"]) == (seq["files"], seq["total"])


def test_cli_many_files(days: list[Path], tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    flow = tmp_path / "flow.itch"
    write_itch_flow(flow, 2_000, symbols=8, seed=5)
    files = [str(p) for p in days[:2]] + [str(flow)]
    assert cli.main(["replay", *files, "--mode", "match", "--json"]) == 0
    seq = json.loads(capsys.readouterr().out)
    assert cli.main(["replay", *files, "--mode", "match", "--workers", "2", "--json"]) == 0
    par = json.loads(capsys.readouterr().out)
    assert (par["files"], par["total"]) == (seq["files"], seq["total"])
    assert par["total"]["fills"] > 0
    assert cli.main(["replay", *files]) == 0
    assert "total:" in capsys.readouterr().out


def test_cli_many_files_bad_arguments(days: list[Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in days[:2]]
    assert cli.main(["replay", *files, "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    assert cli.main(["replay", *files, "--books", str(tmp_path / "b.csv")]) == 2
    assert cli.main(["replay", files[0], str(tmp_path / "missing.itch")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "cut.itch"
    bad.write_bytes(days[0].read_bytes()[:1001])
    assert cli.main(["replay", files[0], str(bad), "--workers", "2"]) == 1
    assert "ITCH" in capsys.readouterr().err
