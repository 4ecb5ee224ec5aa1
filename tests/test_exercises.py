"""Every exercise's checker fails on its starter and passes on its reference solution."""

from __future__ import annotations

import importlib.util
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


def test_extension_compiles_the_cpp_starters() -> None:
    """optimized._native.exercises wraps the C++ starters' headers (whatever they hold)."""
    import importlib

    import numpy as np

    from twinmatch.dtypes import OPS_DTYPE

    # Looked up at run time: the committed stub of _native need not list the submodule.
    exercises = importlib.import_module("optimized._native").exercises

    assert isinstance(exercises.highest_set(np.zeros(3, dtype=np.uint64)), int)
    assert isinstance(exercises.RECORD_SIZE, int)
    if exercises.RECORD_SIZE == OPS_DTYPE.itemsize:
        assert isinstance(exercises.sum_buy_limit_qty(np.zeros(4, dtype=OPS_DTYPE)), int)
    with pytest.raises(TypeError, match="OPS_DTYPE"):
        exercises.sum_buy_limit_qty(np.zeros(4, dtype=np.uint64))
