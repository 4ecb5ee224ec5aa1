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
"""


@pytest.mark.timeout(900)
@pytest.mark.parametrize("solution", [False, True], ids=["starters", "solutions"])
def test_exercise_extension_builds_and_runs(solution: bool) -> None:
    """The C++ exercises are their own extension (exercises/native/), built on demand."""
    result = subprocess.run([sys.executable, "-c", _USE_EXTENSION.format(solution=solution)],
                            capture_output=True, text=True, cwd=ROOT, timeout=880)
    assert result.returncode == 0, result.stdout + result.stderr
    if solution:  # the reference answers
        assert result.stdout.split() == ["69", "32", "35"]


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
    assert "compilation failed" in outcome.output
    assert "op_record.hpp" in outcome.output and "error" in outcome.output

    sys.path.insert(0, str(ROOT / "exercises"))
    try:
        exercise_support = importlib.import_module("exercise_support")
    finally:
        sys.path.remove(str(ROOT / "exercises"))
    with pytest.raises(exercise_support.NativeBuildError, match=r"op_record\.hpp:\d+"):
        exercise_support.build_native({ex.id: broken})
