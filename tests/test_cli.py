"""`twinmatch demo` end to end, small: both parts run and report identical results."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinmatch.cli import main


def test_demo_reports_identical_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["demo", "--ops", "3000", "--feed-messages", "4000", "--feed-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "fills identical: yes" in out
    assert "counts, top of book and rejects identical: yes" in out
    assert "to the simulator's books CSV: yes" in out
    assert (tmp_path / "demo-day.itch").exists()


@pytest.mark.parametrize("bad", [["--ops", "-1"], ["--feed-messages", "5"],
                                 ["--feed-messages", "-3"]])
def test_demo_refuses_bad_sizes(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", *bad]) == 2
    assert "--feed-messages 0 (skip part 2) or at least" in capsys.readouterr().out
