"""Helpers every exercise checker uses: find the code under test, load it, build C++.

A checker never imports the learner's file by a fixed path. It asks ``impl_dir()``,
which is the exercise's ``starter/`` folder (the learner's copy) unless the variable
TWINMATCH_EXERCISE_DIR names another folder; ``scripts/exercises.py verify`` sets it to
``exercises/solutions/<id>/`` to prove the same checker passes on the reference solution.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

ENV = "TWINMATCH_EXERCISE_DIR"
CXXFLAGS = ("-std=c++20", "-O2", "-g", "-Wall", "-Wextra",
            # Out-of-bounds reads and undefined behaviour stop the program with a report,
            # instead of passing by luck.
            "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer")
_counter = itertools.count()


def impl_dir(checker_file: str) -> Path:
    """The folder holding the code under test (the starter unless told otherwise)."""
    chosen = os.environ.get(ENV)
    path = Path(chosen) if chosen else Path(checker_file).resolve().parent / "starter"
    if not path.is_dir():
        raise FileNotFoundError(f"{ENV}: no folder {path}")
    return path.resolve()


def load_module(checker_file: str, filename: str) -> ModuleType:
    """Import ``filename`` (e.g. "batch_sum.py") from impl_dir() under a fresh name."""
    path = impl_dir(checker_file) / filename
    name = f"_exercise_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_cpp(sources: Sequence[Path], include_dirs: Sequence[Path], out: Path,
                flags: Sequence[str] = CXXFLAGS) -> Path:
    """Build one program with $CXX (default g++); the compiler's messages on failure."""
    cmd = [os.environ.get("CXX", "g++"), *flags,
           *(f"-I{d}" for d in include_dirs), *map(str, sources), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"compilation failed:\n$ {shlex.join(cmd)}\n{proc.stderr}")
    return out


def run_program(exe: Path, stdin: str, timeout: float = 60.0) -> str:
    """Run a compiled harness; its stdout, or a failure showing what it printed."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")
    proc = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{exe.name} exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc.stdout


def best_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` calls, in seconds (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
