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
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ENV = "TWINMATCH_EXERCISE_DIR"
_EXERCISES_DIR = Path(__file__).resolve().parent
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
        which = _exercise_of([*sources, *include_dirs])
        raise AssertionError(f"compilation failed{f' (exercise {which})' if which else ''}:"
                             f"\n$ {shlex.join(cmd)}\n{proc.stderr}")
    return out


def _exercise_of(paths: Sequence[Path]) -> str:
    """The id ("NN_slug/name") of the exercise whose folder holds the first of ``paths``
    that is inside exercises/ ("" if none is)."""
    for path in paths:
        try:
            parts = Path(path).resolve().relative_to(_EXERCISES_DIR).parts
        except ValueError:
            continue
        if parts and parts[0] == "solutions":
            parts = parts[1:]
        if len(parts) >= 2:
            return f"{parts[0]}/{parts[1]}"
    return ""


# Where a sanitizer's report starts: AddressSanitizer/ThreadSanitizer/LeakSanitizer open
# with "==PID==ERROR:" or "WARNING: ThreadSanitizer", UBSan with "file:line:col: runtime
# error:".
_SANITIZER_START = re.compile(r"^(==\d+==ERROR: |WARNING: ThreadSanitizer|.*: runtime error: )",
                              re.MULTILINE)


def report_head(stderr: str, limit: int = 4000) -> str:
    """What a failed harness printed, as a learner needs it: a sanitizer report from its
    first line (the error and the first frame, which name your line), not its tail (the
    allocation stacks and the summary); anything else, its last ``limit`` characters."""
    m = _SANITIZER_START.search(stderr)
    if m is not None:
        head = stderr[m.start():m.start() + limit]
        return head + ("\n[... the rest of the report cut ...]" if len(stderr) - m.start() > limit
                       else "")
    return stderr[-limit:]


def run_program(exe: Path, stdin: str, timeout: float = 60.0) -> str:
    """Run a compiled harness; its stdout, or a failure showing what it printed."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")
    proc = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{exe.name} exited with {proc.returncode}:\n"
                             f"{report_head(proc.stderr)}")
    return proc.stdout


def best_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` calls, in seconds (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


# ---- performance labs: paired ratios, counted instructions, other builds ----------------

# The same program without sanitizers (for valgrind, and for timing), and under
# ThreadSanitizer (as `make sanitize-threads` builds the product's ring stress test).
PLAIN_CXXFLAGS = ("-std=c++20", "-O2", "-g", "-Wall", "-Wextra")
TSAN_CXXFLAGS = ("-std=c++20", "-O1", "-g", "-Wall", "-Wextra", "-fsanitize=thread")
MIN_PAIRS = 11


@dataclass(frozen=True)
class Paired:
    """A paired measurement: per-pair ratios (slow time / fast time), their median and
    quartiles."""

    ratios: tuple[float, ...]
    median: float
    q1: float
    q3: float

    def __str__(self) -> str:
        return (f"{self.median:.2f}x (median of {len(self.ratios)} pairs, "
                f"IQR {self.q1:.2f}-{self.q3:.2f})")


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    s = sorted(values)

    def at(q: float) -> float:
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return at(0.25), at(0.5), at(0.75)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    own = fn()
    wall = time.perf_counter() - start
    return own if isinstance(own, float) else wall


def paired_ratio(fast: Callable[[], object], slow: Callable[[], object],
                 pairs: int = MIN_PAIRS, warmup: int = 1) -> Paired:
    """How many times faster ``fast`` is than ``slow``, by the book's paired protocol
    (tests/bench/paired.py): a warm-up of each, then ``pairs`` (>= 11) interleaved pairs,
    fast then slow, each timed on its own; the median of the per-pair ratios. A noisy
    neighbour slows both halves of a pair together, and one hiccup spoils one pair, not
    the median. A side that returns a float has timed itself (seconds, e.g. a loop timed
    inside a C++ harness): that time is used instead of the call's wall time."""
    if pairs < MIN_PAIRS:
        raise ValueError(f"a paired ratio needs at least {MIN_PAIRS} pairs, got {pairs}")
    for _ in range(warmup):
        fast()
        slow()
    ratios = []
    for _ in range(pairs):
        fast_s = _timed(fast)
        slow_s = _timed(slow)
        ratios.append(slow_s / max(fast_s, 1e-9))
    q1, median, q3 = _quartiles(ratios)
    return Paired(tuple(ratios), median, q1, q3)


def baseline_dir(checker_file: str) -> Path:
    """The pristine copy of the starter (``baseline/`` beside the checker) that a speed
    lab measures the learner's code against; tests/test_exercises.py keeps it equal to
    the starter as shipped."""
    return Path(checker_file).resolve().parent / "baseline"


def load_baseline(checker_file: str, filename: str) -> ModuleType:
    """Import the shipped starter's ``filename`` from baseline/ under a fresh name."""
    path = baseline_dir(checker_file) / filename
    name = f"_baseline_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def instructions(exe: Path, stdin: str, function: str | None = None,
                 timeout: float = 300.0) -> int:
    """Instructions the program executes (only inside ``function`` and what it calls, when
    given: a name the harness keeps out of line, e.g. an ``extern "C"`` noinline one),
    counted by valgrind's callgrind: the same number on a busy machine as on an idle one."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise RuntimeError("valgrind is not installed (make bench-deps installs it)")
    out = exe.with_name(exe.name + f".callgrind.{next(_counter)}")
    cmd = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}",
           *([f"--toggle-collect={function}"] if function else []), str(exe)]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{exe.name} under valgrind exited with {proc.returncode}:\n"
                             f"{proc.stderr[-4000:]}")
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise AssertionError(f"no summary line in {out}")


def run_tsan(exe: Path, stdin: str, timeout: float = 120.0) -> tuple[int, str, str]:
    """Run a ThreadSanitizer build: (exit code, stdout, stderr). TSan prints
    "WARNING: ThreadSanitizer: data race" and exits 66 when it saw one."""
    env = dict(os.environ, TSAN_OPTIONS="exitcode=66 report_signal_unsafe=0")
    cmd = [str(exe)]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
    setarch = shutil.which("setarch")
    if "unexpected memory mapping" in proc.stderr and setarch:
        # Kernels with more address-space randomisation than this TSan expects refuse to
        # start it; without randomisation (setarch -R) it runs.
        proc = subprocess.run([setarch, os.uname().machine, "-R", *cmd], input=stdin,
                              capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
    return proc.returncode, proc.stdout, proc.stderr


# ---- the C++ exercises as a Python extension (exercises/native/) ------------------------

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
NATIVE_SOURCE = EXERCISES / "native"
# The C++ exercises whose header the extension binds (exercises/native/exercises_bind.cpp).
CPP_EXERCISES = ("01_order_book/bitset_scan", "01_order_book/node_align",
                 "01_order_book/flat_levels", "01_order_book/free_list",
                 "02_boundary/op_record", "03_itch/wire_struct", "03_itch/frame_scan",
                 "04_wire/udp_header", "05_many_books/ref_hash", "06_pipeline/cached_ring",
                 "06_pipeline/memory_order", "06_pipeline/backpressure")
BUILD_TIMEOUT = 900.0


class NativeBuildError(RuntimeError):
    """The exercises' extension did not compile: the message holds the compiler's errors."""


def native_folders(solution: bool = False) -> dict[str, Path]:
    """Each C++ exercise's header folder: its starter/ (or its reference solution)."""
    return {ex: (EXERCISES / "solutions" / ex) if solution else (EXERCISES / ex / "starter")
            for ex in CPP_EXERCISES}


def build_native(folders: dict[str, Path] | None = None, build_dir: Path | None = None,
                 solution: bool = False) -> Path:
    """Compile the C++ exercises' headers into the `_exercises` extension; its path.

    ``folders`` maps an exercise id to the folder holding its header (default: every
    starter, or every solution). Only what changed is recompiled. A header that does not
    compile raises NativeBuildError with the compiler's messages; optimized._native is a
    separate module and is never affected.
    """
    chosen = dict(native_folders(solution))
    chosen.update(folders or {})
    build_dir = build_dir or ROOT / "build" / "exercises" / ("solution" if solution else "starter")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise NativeBuildError("building the C++ exercises needs CMake (cmake not on PATH)")
    configure = [cmake, "-S", str(NATIVE_SOURCE), "-B", str(build_dir),
                 "-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}",
                 "-DTWINMATCH_EXERCISE_INCLUDES="
                 + ";".join(str(chosen[ex].resolve()) for ex in CPP_EXERCISES)]
    ninja = Path(sys.executable).parent / "ninja"
    ninja_path = str(ninja) if ninja.is_file() else shutil.which("ninja")
    cache = build_dir / "CMakeCache.txt"
    if ninja_path and not cache.exists():
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja_path}"]
    for cmd in (configure, [cmake, "--build", str(build_dir)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                              stdin=subprocess.DEVNULL, check=False)
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            broken = [ex for ex in CPP_EXERCISES if _has_error_in(output, chosen[ex])]
            named = f" (the header of {', '.join(broken)})" if broken else ""
            raise NativeBuildError(
                f"the C++ exercises' extension did not build{named} "
                f"($ {shlex.join(cmd)}):\n" + _compiler_errors(output))
    built = sorted(build_dir.glob("_exercises*.so")) + sorted(build_dir.glob("_exercises*.pyd"))
    if not built:
        raise NativeBuildError(f"no _exercises module in {build_dir} after the build")
    return built[0]


def load_native(folders: dict[str, Path] | None = None, build_dir: Path | None = None,
                solution: bool = False) -> ModuleType:
    """build_native(...), then import the module (once per process: a rebuilt module is
    seen by the next Python, not this one)."""
    if "_exercises" in sys.modules:
        return sys.modules["_exercises"]
    path = build_native(folders, build_dir, solution)
    spec = importlib.util.spec_from_file_location("_exercises", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["_exercises"] = module
    return module


def _has_error_in(output: str, folder: Path) -> bool:
    """Whether the compiler reports an error at a file:line inside ``folder``."""
    where = re.compile(re.escape(str(folder.resolve())) + r"/[^\s:/]+:\d+")
    return any("error" in line and where.search(line) for line in output.splitlines())


def _compiler_errors(output: str, lines: int = 60) -> str:
    """The compiler's error lines first (they name the header and line), then the tail."""
    text = output.rstrip().splitlines()
    errors = [line for line in text if "error" in line.lower()]
    tail = text[-lines:]
    return "\n".join(errors[:20] + (["..."] if errors else []) + tail)
