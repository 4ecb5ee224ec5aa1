"""Run the book's exercises: check a learner's work, or verify every checker.

    python scripts/exercises.py list
    python scripts/exercises.py check 02_boundary/batch_sum     # PASS, or FAIL + a hint
    python scripts/exercises.py check 02_boundary/batch_sum --solution
    python scripts/exercises.py hint 02_boundary/batch_sum
    python scripts/exercises.py verify [ID ...]   # every checker fails its starter,
                                                  # passes its solution
    python scripts/exercises.py build [--solution]   # the C++ exercises' own extension

Exercises are listed in exercises/exercises.toml (see exercises/README.md). A checker
is a pytest file that tests the code in the folder named by TWINMATCH_EXERCISE_DIR,
which is the learner's starter/ folder by default; ``verify`` points it at the starter
and at the reference solution in turn, and never changes either.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
SOLUTIONS = EXERCISES / "solutions"
CATALOGUE = EXERCISES / "exercises.toml"
ENV = "TWINMATCH_EXERCISE_DIR"
KINDS = ("python", "cpp")
CHECK_TIMEOUT = 600.0
ID_RE = re.compile(r"^(?P<chapter>\d\d_[a-z0-9_]+)/(?P<name>[a-z0-9_]+)$")


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    chapter: str
    kind: str
    starter: tuple[str, ...]
    solution: tuple[str, ...]
    checker: str
    hint: str

    @property
    def folder(self) -> Path:
        return EXERCISES / self.id

    @property
    def starter_dir(self) -> Path:
        return self.folder / "starter"

    @property
    def solution_dir(self) -> Path:
        return SOLUTIONS / self.id

    @property
    def checker_path(self) -> Path:
        return self.folder / self.checker


@dataclass(frozen=True)
class Outcome:
    returncode: int
    output: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0

    @property
    def failed_tests(self) -> bool:
        """pytest ran and some test failed (exit 1), as opposed to a broken checker."""
        return self.returncode == 1


def load(catalogue: Path = CATALOGUE) -> list[Exercise]:
    data = tomllib.loads(catalogue.read_text(encoding="utf-8"))
    out = []
    for raw in data.get("exercise", []):
        out.append(Exercise(
            id=str(raw["id"]), title=str(raw["title"]), chapter=str(raw["chapter"]),
            kind=str(raw["kind"]), starter=tuple(raw["starter"]),
            solution=tuple(raw["solution"]), checker=str(raw["checker"]),
            hint=" ".join(str(raw.get("hint", "")).split()),
        ))
    return out


def find(exercises: list[Exercise], wanted: str) -> Exercise:
    wanted = wanted.strip().strip("/").removeprefix("exercises/")
    for ex in exercises:
        if ex.id == wanted:
            return ex
    known = "\n  ".join(ex.id for ex in exercises)
    raise SystemExit(f"no exercise {wanted!r}; the exercises are:\n  {known}")


def problems(ex: Exercise) -> list[str]:
    """What is wrong with an exercise's files or metadata (empty when all is well)."""
    found = []
    m = ID_RE.match(ex.id)
    if not m:
        found.append(f"id {ex.id!r} is not 'NN_slug/name'")
    elif m.group("chapter") != ex.chapter.replace("-", "_"):
        found.append(f"id {ex.id!r} does not match chapter {ex.chapter!r}")
    if ex.kind not in KINDS:
        found.append(f"kind {ex.kind!r} is not one of {KINDS}")
    if not ex.checker_path.is_file():
        found.append(f"checker {ex.checker_path.relative_to(ROOT)} is missing")
    if sorted(ex.starter) != sorted(ex.solution):
        found.append("starter and solution must list the same file names (mirrored folders)")
    if not ex.hint:
        found.append("no hint")
    for name in ex.starter:
        path = ex.starter_dir / name
        if not path.is_file():
            found.append(f"starter file {path.relative_to(ROOT)} is missing")
        elif "TODO" not in path.read_text(encoding="utf-8"):
            found.append(f"starter file {path.relative_to(ROOT)} has no TODO")
    for name in ex.solution:
        if not (ex.solution_dir / name).is_file():
            found.append(f"solution file {(ex.solution_dir / name).relative_to(ROOT)} is missing")
    return found


def run_checker(ex: Exercise, impl: Path, verbose: bool = False) -> Outcome:
    """Run the exercise's checker against the code in ``impl``; never edits anything."""
    env = dict(os.environ)
    env[ENV] = str(impl)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(EXERCISES), str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    cmd = [sys.executable, "-m", "pytest", str(ex.checker_path.relative_to(ROOT)),
           "-p", "no:cacheprovider", "--tb=short", "-q" if not verbose else "-v",
           "--timeout", str(int(CHECK_TIMEOUT) - 30)]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return Outcome(124, f"the checker did not finish within {CHECK_TIMEOUT:.0f} s")
    return Outcome(proc.returncode, proc.stdout + proc.stderr)


def verify_one(ex: Exercise) -> list[str]:
    """The checker must fail on the starter and pass on the solution."""
    found = problems(ex)
    if found:
        return found
    starter = run_checker(ex, ex.starter_dir)
    if not starter.failed_tests:
        what = "passes" if starter.passed else f"errors out (pytest exit {starter.returncode})"
        found.append(f"the checker {what} on the starter; it must fail with failing tests\n"
                     + _tail(starter.output))
    solution = run_checker(ex, ex.solution_dir)
    if not solution.passed:
        found.append(f"the checker fails on the reference solution (pytest exit "
                     f"{solution.returncode})\n" + _tail(solution.output))
    return found


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines()[-lines:])


def cmd_list(exercises: list[Exercise]) -> int:
    for ex in exercises:
        print(f"{ex.id:34} {ex.kind:6} {ex.title}")
    return 0


def cmd_check(exercises: list[Exercise], wanted: str | None, solution: bool,
              verbose: bool) -> int:
    if not wanted:
        print("usage: make check EX=<exercise>   (for example EX=02_boundary/batch_sum)\n")
        cmd_list(exercises)
        return 2
    ex = find(exercises, wanted)
    impl = ex.solution_dir if solution else Path(os.environ.get(ENV, ex.starter_dir))
    print(f"checking {ex.id} ({ex.title}) in {_rel(impl)} ...", flush=True)
    outcome = run_checker(ex, impl, verbose)
    if outcome.passed:
        if verbose:
            print(outcome.output)
        print(f"PASS {ex.id}")
        return 0
    print(outcome.output.rstrip())
    print(f"\nFAIL {ex.id}")
    print(f"Hint: {ex.hint}")
    return 1


def cmd_verify(exercises: list[Exercise], wanted: list[str]) -> int:
    chosen = [find(exercises, w) for w in wanted] if wanted else exercises
    if not chosen:
        print("exercises.py verify: no exercises in exercises/exercises.toml", file=sys.stderr)
        return 1
    ids = [ex.id for ex in exercises]
    bad = 0
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        print(f"FAIL {dup}: listed more than once in exercises.toml")
        bad += 1
    for ex in chosen:
        found = verify_one(ex)
        if found:
            bad += 1
            print(f"FAIL {ex.id}:\n  " + "\n  ".join(found))
        else:
            print(f"ok   {ex.id}: checker fails on the starter, passes on the solution")
    print(f"exercises verify: {len(chosen) - bad} passed, {bad} failed")
    return 1 if bad else 0


def cmd_build(solution: bool) -> int:
    """Compile the C++ exercises' headers into their own extension (exercises/native/)."""
    import importlib

    if str(EXERCISES) not in sys.path:
        sys.path.insert(0, str(EXERCISES))
    exercise_support = importlib.import_module("exercise_support")

    try:
        path = exercise_support.build_native(solution=solution)
    except exercise_support.NativeBuildError as exc:
        print(exc)
        print("\nFAIL: the C++ exercises' extension did not build (optimized is not "
              "affected: it is a separate module)")
        return 1
    print(f"built {_rel(path)} from the {'solutions' if solution else 'starters'}; in Python:\n"
          "    import sys; sys.path.insert(0, 'exercises')\n"
          "    from exercise_support import load_native\n"
          f"    ex = load_native({'solution=True' if solution else ''})")
    return 0


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the exercises")
    check = sub.add_parser("check", help="check one exercise: PASS, or FAIL and a hint")
    check.add_argument("exercise", nargs="?", default="")
    check.add_argument("--solution", action="store_true", help="check the reference solution")
    check.add_argument("-v", "--verbose", action="store_true")
    hint = sub.add_parser("hint", help="print an exercise's hint")
    hint.add_argument("exercise")
    verify = sub.add_parser("verify", help="each checker fails its starter, passes its solution")
    verify.add_argument("exercise", nargs="*")
    build = sub.add_parser("build", help="build the C++ exercises' extension (exercises/native/)")
    build.add_argument("--solution", action="store_true", help="from the reference solutions")
    args = parser.parse_args(argv)
    if args.command == "build":
        return cmd_build(args.solution)
    exercises = load()
    if args.command == "list":
        return cmd_list(exercises)
    if args.command == "check":
        return cmd_check(exercises, args.exercise, args.solution, args.verbose)
    if args.command == "hint":
        print(find(exercises, args.exercise).hint)
        return 0
    return cmd_verify(exercises, args.exercise)


if __name__ == "__main__":
    raise SystemExit(main())
