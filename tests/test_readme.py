"""README.md's examples, run as written: every ``sh`` block of "Every command, one example
each" in one fresh folder, in order (each block may use the files an earlier one wrote),
and the benchmark section's blocks in the repository. A line ending in ``&`` is a server:
started in the background, waited for (bounded) until its ``--port`` is bound, and stopped
with SIGINT (or found finished) at the end of its block, where it must exit with 0. The
ports the README names (471xx) are replaced by free ones, so parallel runs do not collide.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMANDS = "## Every command, one example each"
BENCH = "## Benchmarks: `pytest --benchmark-only`"
README_PORT = re.compile(r"\b471\d\d\b")
START_S = 30.0      # a server must be listening by then
LINE_S = 180.0      # one foreground command, at most
STOP_S = 30.0       # a server must exit by then after SIGINT


def section_blocks(title: str) -> list[str]:
    """The ``sh`` code blocks of one ``## `` section of the README."""
    text = README.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    body = text[start:end if end >= 0 else len(text)]
    return re.findall(r"```sh\n(.*?)```", body, flags=re.S)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Bound by someone, as TCP or as UDP (the feed receiver listens on UDP)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return True
    return False


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def run_block(block: str, cwd: Path, ports: dict[str, str]) -> None:
    env = environment()
    servers: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        for raw in block.splitlines():
            line = README_PORT.sub(lambda m: ports.setdefault(m.group(), str(free_port())),
                                   raw.split("  #")[0].strip())
            if not line:
                continue
            if line.endswith("&"):
                servers.append((line, _start(line.rstrip("&").strip(), cwd, env)))
                continue
            done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                                  timeout=LINE_S)
            assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
            assert done.stdout.strip(), f"{line}: printed nothing"
    finally:
        for line, proc in servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_S)
                pytest.fail(f"{line}: still running {STOP_S} s after SIGINT")
    for line, proc in servers:
        out = proc.stdout.read() if proc.stdout else b""
        assert proc.returncode == 0, (line, proc.returncode, out[-2000:])


def _start(line: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    port = int(re.search(r"--port (\d+)", line).group(1))  # type: ignore[union-attr]
    proc = subprocess.Popen(["bash", "-c", "exec " + line], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_S
    while not port_in_use(port):
        assert proc.poll() is None, (line, proc.stdout.read() if proc.stdout else b"")
        assert time.monotonic() < deadline, f"{line}: not listening after {START_S} s"
        time.sleep(0.05)
    return proc


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


PORTS: dict[str, str] = {}


@pytest.mark.parametrize("index", range(len(section_blocks(COMMANDS))))
def test_every_command_example_runs(index: int, folder: Path) -> None:
    run_block(section_blocks(COMMANDS)[index], folder, PORTS)


@pytest.mark.parametrize("index", range(len(section_blocks(BENCH))))
def test_benchmark_examples_run(index: int) -> None:
    run_block(section_blocks(BENCH)[index], ROOT, PORTS)


def test_the_readme_names_every_command() -> None:
    """Each sub-command of ``twinmatch --help`` has an example in the commands section."""
    from twinmatch.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    examples = "\n".join(section_blocks(COMMANDS))
    missing = [name for name in sub.choices  # type: ignore[union-attr]
               if not re.search(rf"^twinmatch {name}\b", examples, flags=re.M)]
    assert not missing, f"README.md has no example of: {missing}"


def test_the_exit_codes_are_documented_alike() -> None:
    from twinmatch.cli import EXIT_CODES

    readme = README.read_text()
    for status in ("`0` done", "`1` the input is bad", "`2` a bad argument", "`128+N`"):
        assert status in readme
    for status in ("0    done", "1    the input is bad", "2    a bad argument", "128+N"):
        assert status in EXIT_CODES


# ------------------------------------------------- the front door: version, errors

def twinmatch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "twinmatch", *args], capture_output=True,
                          text=True, timeout=LINE_S, cwd=cwd, env=environment())


def test_version() -> None:
    from importlib.metadata import version

    done = twinmatch("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"twinmatch {version('twinmatch')}"


@pytest.mark.parametrize("args", [["replay", "x.itch", "--impl", "fast"],
                                  ["gen", "market", "--out", "d", "--messages", "many"],
                                  ["tables", "x.itch"], ["nosuchcommand"]])
def test_a_bad_argument_is_one_line_naming_it(args: list[str]) -> None:
    done = twinmatch(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and "--help" in lines[0], done.stderr


@pytest.mark.parametrize("command", [["replay"], ["replay", "--impl", "naive"], ["compare"],
                                     ["tables", "{out}"], ["lobster", "{out}", "--symbols",
                                                           "AB", "--date", "2026-01-02"]])
def test_a_bad_feed_is_one_line_naming_file_and_offset(command: list[str],
                                                       tmp_path: Path) -> None:
    from twinmatch.gen import write_market_day

    day = write_market_day(tmp_path, 3000, symbols=5, seed=1).paths[0]
    cut = tmp_path / "cut.itch"
    cut.write_bytes(day.read_bytes()[:-3])
    name, *rest = command
    done = twinmatch(name, str(cut), *[a.format(out=tmp_path / "out") for a in rest])
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"twinmatch {name}: error: {cut}:" in lines[0] and "at byte" in lines[0], lines


def test_feed_send_refuses_a_bad_file_in_one_line(tmp_path: Path) -> None:
    from twinmatch.gen import write_market_day

    day = write_market_day(tmp_path, 3000, symbols=5, seed=1).paths[0]
    cut = tmp_path / "cut.itch"
    cut.write_bytes(day.read_bytes()[:-3])
    for path, status, words in ((cut, 1, "cut short at byte offset"),
                                (tmp_path / "none.itch", 2, "No such file")):
        done = twinmatch("feed", "send", str(path), "--port", str(free_port()))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == status and len(lines) == 1, done.stderr
        assert f"twinmatch feed send: error: {path}: " in lines[0] and words in lines[0]
