"""scripts/asm.py: machine-code listings from the built extension, or clear placeholders.

The listings back claims the chapters make about machine code, so where the tools are
here the claims are checked too: an ITCH field's byte swap is one instruction, and the
batch loop of the prefetch step has prefetches that the step before it lacks.
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _asm() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tm_asm", ROOT / "scripts" / "asm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def asm() -> ModuleType:
    return _asm()


needs_binutils = pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("nm") is None,
                                    reason="binutils (objdump, nm) not installed")
x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                              reason="the listings' claims are about x86-64 instructions")


def test_without_objdump_every_listing_is_a_placeholder(asm: ModuleType, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asm.shutil, "which", lambda name: None)
    missing = asm.generate(tmp_path)
    names = {p.stem for p in tmp_path.glob("*.md")}
    assert names == {listing.name for listing in asm.LISTINGS} | {"book-steps-code"}
    assert set(missing) == names
    text = (tmp_path / "itch-be64.md").read_text(encoding="utf-8")
    assert "Machine code not available" in text and "objdump and nm not found" in text
    with pytest.raises(SystemExit, match="--strict"):
        asm.generate(tmp_path, strict=True)


@needs_binutils
def test_a_missing_symbol_is_a_placeholder(asm: ModuleType, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    gone = asm.Listing("gone", "twinmatch_no_such_symbol", "nothing")
    monkeypatch.setattr(asm, "LISTINGS", (gone,))
    assert asm.generate(tmp_path) == ["gone"]
    assert "twinmatch_no_such_symbol is not in" in (tmp_path / "gone.md").read_text("utf-8")


@needs_binutils
@x86_only
def test_listings_back_the_chapters_claims(asm: ModuleType, tmp_path: Path) -> None:
    assert asm.generate(tmp_path) == []
    be64 = (tmp_path / "itch-be64.md").read_text(encoding="utf-8")
    code = be64.split("```nasm\n")[1].split("```")[0].splitlines()
    swaps = [line for line in code if "bswap" in line or "movbe" in line]
    assert len(swaps) == 1, be64  # chapter 3: the swap is one instruction
    assert "GNU" in be64 or "Clang" in be64  # the compiler is named
    assert "-O3" in be64  # and the flags
    table = (tmp_path / "book-steps-code.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ") and ". " in line]
    prefetches = [int(row.split("|")[-2]) for row in rows]
    assert prefetches[-1] > 0 and prefetches[-2] == 0  # only the prefetch step has them
    loop = (tmp_path / "book-apply-loop.md").read_text(encoding="utf-8")
    assert "prefetch" in loop
    vbmi = (tmp_path / "itch-scan-vbmi.md").read_text(encoding="utf-8")
    if "Machine code not available" not in vbmi:  # chapter 3: one permute per event
        assert "vpermb" in vbmi.split("```nasm\n")[1].split("```")[0]
    for name in ("ring-push", "ring-pop"):  # chapter 6: acquire/release are plain movs
        text = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        ring = [line.split(None, 1)[1] for line in text.split("```nasm\n")[1]
                .split("```")[0].splitlines()]
        assert not [i for i in ring if i.startswith(("mfence", "lock")) or
                    (i.startswith("xchg") and "PTR" in i)], text


def test_counts(asm: ModuleType) -> None:
    code = [("+0x0", "cmp eax,0x1"), ("+0x3", "je +0x9"), ("+0x5", "cmovne eax,edx"),
            ("+0x8", "jmp +0x0"), ("+0x9", "prefetcht0 BYTE PTR [rdi]"), ("+0xc", "ret")]
    assert asm.counts(code) == {"instructions": 6, "conditional branches": 1,
                                "conditional moves": 1, "prefetches": 1}


def test_window_centres_long_listings(asm: ModuleType) -> None:
    code = [(f"+{i:#x}", "nop") for i in range(200)]
    code[100] = ("+0x64", "prefetcht0 BYTE PTR [rax]")
    start, stop = asm.window(code, "prefetch")
    assert start <= 100 < stop and stop - start == asm.MAX_LINES
    assert asm.window(code[:10], "prefetch") == (0, 10)
