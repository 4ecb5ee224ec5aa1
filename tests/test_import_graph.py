"""The import graph's arrows point one way (DESIGN.md, "Three roles, three homes").

* ``contract`` (what both twins share) imports only the standard library and numpy;
* the twins (``naive``, ``optimized``) import ``contract`` and their own package, never the
  harness (``twinmatch``), a peer (``peers``) or the other twin;
* the harness and the peers may import anything.

Checked two ways: each module is imported in a fresh interpreter with every package it may
not use blocked (``sys.modules[name] = None`` makes any import of it fail), and every
``import`` statement in the source, including those inside functions that run only later,
is read with ``ast``.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

FIRST_PARTY = ("contract", "naive", "optimized", "peers", "twinmatch", "tests", "scripts",
               "exercises")
# Which first-party packages each package may import (itself included).
ALLOWED = {
    "contract": {"contract"},
    "naive": {"naive", "contract"},
    "optimized": {"optimized", "contract"},
}


def _modules(package: str) -> list[str]:
    names = [package]
    for info in pkgutil.iter_modules([str(ROOT / package)]):
        names.append(f"{package}.{info.name}")
    return sorted(names)


_IMPORT_BLOCKED = """
import json, sys
blocked = {blocked!r}
for name in blocked:
    sys.modules[name] = None  # any import of it, or of a submodule, raises ImportError
import importlib
importlib.import_module({module!r})
loaded = sorted({{m.split(".")[0] for m, v in sys.modules.items() if v is not None}})
print(json.dumps(loaded))
"""


def _import_blocked(module: str, blocked: list[str]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_BLOCKED.format(module=module, blocked=blocked)],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
    )
    assert result.returncode == 0, f"{module} needs one of {blocked}:\n{result.stderr}"
    loaded: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("module", [m for p in ALLOWED for m in _modules(p)])
def test_each_module_imports_with_what_it_may_not_use_blocked(module: str) -> None:
    package = module.split(".")[0]
    blocked = sorted(set(FIRST_PARTY) - ALLOWED[package])
    loaded = _import_blocked(module, blocked)
    first_party = {m for m in loaded if m in FIRST_PARTY}
    assert first_party <= ALLOWED[package], (module, first_party)


def _imported_packages(path: Path) -> set[str]:
    """The top-level package of every import statement in a file (relative imports: the
    file's own package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(path.parent.name if node.level else (node.module or "").split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_import_statement_crosses_an_arrow(package: str) -> None:
    """Also the imports inside functions, which an import of the module never runs."""
    wrong = {}
    for path in sorted((ROOT / package).glob("*.py")) + sorted((ROOT / package).glob("*.pyi")):
        bad = (_imported_packages(path) & set(FIRST_PARTY)) - ALLOWED[package]
        if bad:
            wrong[path.name] = sorted(bad)
    assert not wrong, f"{package}/ imports what it may not: {wrong}"


def test_importlib_names_do_not_reach_the_harness() -> None:
    """Twins that pick a module by name (importlib.import_module("naive.itch")) name only
    their own package."""
    for package in ("naive", "optimized"):
        for path in sorted((ROOT / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                        and node.args and isinstance(node.args[0], ast.Constant)):
                    name = str(node.args[0].value).split(".")[0]
                    assert name in ALLOWED[package], (path.name, node.args[0].value)


def test_the_blocking_works() -> None:
    """The check can fail: the harness, blocked, cannot be imported."""
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_BLOCKED.format(module="twinmatch.replay",
                                                      blocked=["twinmatch"])],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
    )
    assert result.returncode != 0
    assert "ModuleNotFoundError: No module named 'twinmatch.replay'" in result.stderr
