"""Every exercise's checker fails on its starter and passes on its reference solution."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tm_exercises_script",
                                                  ROOT / "scripts" / "exercises.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _load_script()
EXERCISES = SCRIPT.load()


def test_catalogue_is_not_empty_and_ids_unique() -> None:
    ids = [ex.id for ex in EXERCISES]
    assert ids, "exercises/exercises.toml lists no exercise"
    assert len(ids) == len(set(ids)), f"duplicate ids in exercises.toml: {ids}"


def test_at_least_three_exercises_per_chapter() -> None:
    """Chapters 1-7 each have three exercises or more (issue 17)."""
    chapters = sorted(p.stem for p in (ROOT / "chapters").glob("0[1-7]-*.md"))
    assert len(chapters) == 7, chapters
    counts = {c: sum(ex.chapter == c for ex in EXERCISES) for c in chapters}
    assert all(n >= 3 for n in counts.values()), counts


def test_baselines_are_the_shipped_starters() -> None:
    """A speed lab measures the learner's code against baseline/, a copy of the starter
    as shipped: the two must not drift apart (run on a clean checkout)."""
    with_baseline = [ex for ex in EXERCISES if (ex.folder / "baseline").is_dir()]
    assert len(with_baseline) >= 5
    for ex in with_baseline:
        names = sorted(p.name for p in (ex.folder / "baseline").iterdir())
        assert names == sorted(ex.starter), ex.id
        for name in names:
            assert (ex.folder / "baseline" / name).read_bytes() == \
                (ex.starter_dir / name).read_bytes(), f"{ex.id}: baseline/{name} != starter"


@pytest.mark.parametrize("ex", EXERCISES, ids=[ex.id for ex in EXERCISES])
def test_checker_fails_starter_passes_solution(ex: object) -> None:
    found = SCRIPT.verify_one(ex)
    assert not found, "\n".join(found)


# Run in a fresh interpreter (the module is loaded once per process): builds the C++
# exercises' own extension from the starters or the solutions and calls it.
_USE_EXTENSION = """
import sys
sys.path.insert(0, "exercises")
import numpy as np
from exercise_support import load_native
from contract.dtypes import OPS_DTYPE
ex = load_native(solution={solution})
bit = ex.highest_set(np.array([0, 1 << 5], dtype=np.uint64))
assert isinstance(bit, int) and isinstance(ex.RECORD_SIZE, int)
if ex.RECORD_SIZE == OPS_DTYPE.itemsize:
    assert isinstance(ex.sum_buy_limit_qty(np.zeros(4, dtype=OPS_DTYPE)), int)
try:
    ex.sum_buy_limit_qty(np.zeros(4, dtype=np.uint64))
except TypeError as exc:
    assert "OPS_DTYPE" in str(exc), exc
else:
    raise AssertionError("a uint64 array was taken for OPS_DTYPE records")
print(bit, ex.RECORD_SIZE, ex.WIRE_REPLACE_SIZE)
import struct
straddling, start = ex.node_pool_straddles(64)
levels = ex.Levels(100, 128)
levels.add(150, 5); levels.add(200, 7); levels.remove(200, 7)
assert (levels.best(), levels.at(150)) == (150, 5)
try:
    levels.remove(150, 6)
except ValueError:
    pass
else:
    raise AssertionError("removing more than rests was not refused")
add = struct.pack(">H", 36) + b"A" + bytes(19) + struct.pack(">I", 42) + bytes(12)
assert ex.frame_scan(add + b"\\x00") == (1, 1, 42, 0, 38)
inserted, probes = ex.ref_table_probes(np.arange(1, 1001, dtype=np.uint64) << np.uint64(12), 4096)
received, in_order, intact = ex.publish_ring_stress(10000, 8)
assert received == 10000
accepted, popped, fill_in_order = ex.fill_ring_fill(8, 20)
print(ex.NODE_SIZE, straddling, start, inserted, probes < 3000, accepted, popped, fill_in_order,
      ex.order_pool_reuses())
"""


@pytest.mark.timeout(900)
@pytest.mark.parametrize("solution", [False, True], ids=["starters", "solutions"])
def test_exercise_extension_builds_and_runs(solution: bool) -> None:
    """The C++ exercises are their own extension (exercises/native/), built on demand."""
    result = subprocess.run([sys.executable, "-c", _USE_EXTENSION.format(solution=solution)],
                            capture_output=True, text=True, cwd=ROOT, timeout=880)
    assert result.returncode == 0, result.stdout + result.stderr
    if solution:  # the reference answers
        assert result.stdout.split() == ["69", "32", "35",
                                         "32", "0", "0", "1000", "True", "8", "8", "True",
                                         "True"]


def test_product_does_not_compile_the_exercises() -> None:
    cmake = (ROOT / "native" / "CMakeLists.txt").read_text()
    assert "exercises/" not in cmake.replace("exercises/native/", "")
    assert not list((ROOT / "native").glob("exercises*"))


@pytest.mark.timeout(900)
def test_broken_starter_breaks_only_its_exercise(tmp_path: Path) -> None:
    """A syntax error in (a copy of) a C++ starter: `import optimized` still works, the
    checker fails with the compiler's error naming the file, and so does the exercises'
    extension; optimized._native is not involved."""
    ex = next(e for e in EXERCISES if e.id == "02_boundary/op_record")
    broken = tmp_path / "starter"
    shutil.copytree(ex.starter_dir, broken)
    header = broken / "op_record.hpp"
    header.write_text(header.read_text() + "\nthis is not C++ {\n")

    product = subprocess.run(
        [sys.executable, "-c", "import optimized, optimized.book as b; "
         "print(b.Book().add_limit(1, 0, 100, 5))"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "TWINMATCH_EXERCISE_DIR": str(broken)})
    assert product.returncode == 0 and product.stdout.strip() == "[]", product.stderr

    outcome = SCRIPT.run_checker(ex, broken)
    assert outcome.failed_tests, outcome.output  # pytest ran and failed: not a crash
    assert "compilation failed (exercise 02_boundary/op_record)" in outcome.output
    assert "op_record.hpp" in outcome.output and "error" in outcome.output

    sys.path.insert(0, str(ROOT / "exercises"))
    try:
        exercise_support = importlib.import_module("exercise_support")
    finally:
        sys.path.remove(str(ROOT / "exercises"))
    with pytest.raises(exercise_support.NativeBuildError, match=r"op_record\.hpp:\d+") as err:
        exercise_support.build_native({ex.id: broken})
    assert "the header of 02_boundary/op_record" in str(err.value)


def test_a_sanitizer_report_is_shown_from_its_head() -> None:
    """A failed C++ checker shows the sanitizer's first lines (the error and the frame that
    names the learner's line), not the tail of a long report."""
    sys.path.insert(0, str(ROOT / "exercises"))
    try:
        report_head = importlib.import_module("exercise_support").report_head
    finally:
        sys.path.remove(str(ROOT / "exercises"))
    frames = "".join(f"    #{i} 0x{i:x} in helper{i} lib.cpp:{i}\n" for i in range(300))
    asan = ("noise before\n==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address\n"
            "    #0 0x1 in push starter/ring.hpp:17\n" + frames + "SUMMARY: AddressSanitizer\n")
    shown = report_head(asan, 400)
    assert shown.startswith("==4242==ERROR: AddressSanitizer") and "ring.hpp:17" in shown
    assert "SUMMARY" not in shown and shown.endswith("cut ...]")
    ubsan = "ok\nring.hpp:9:5: runtime error: signed integer overflow\n"
    assert report_head(ubsan).startswith("ring.hpp:9:5: runtime error")
    assert report_head("x" * 5000 + "END", 100).endswith("END")  # not a sanitizer: the tail
