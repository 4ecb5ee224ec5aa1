"""Chapter 9: the filter and the aggregate agree in every form (naive/columns.py,
optimized/columns.py): the record loop (the specification), numpy columns, C++ over the
array of structs, C++ scalar over the struct of arrays, and each SIMD kernel this CPU
runs, tested against the scalar loop on every tail length and start alignment."""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import naive.columns
import optimized.columns
from contract.columns import VWAP_DTYPE, ColumnsLike, notional, stock_field, stock_key, vwap_price
from contract.dtypes import EVENT_DTYPE, MAX_PRICE, MAX_QTY, records

ROOT = Path(__file__).resolve().parent.parent
LEVELS = optimized.columns.LEVELS[: optimized.columns.LEVELS.index(
    optimized.columns.cpu_level()) + 1]

Filter = Callable[[np.ndarray, bytes | str, int], np.ndarray]
Aggregate = Callable[[np.ndarray], np.ndarray]

# Checked statically by mypy: both twins have the same functions and a ColumnsLike.
_filters: tuple[Filter, Filter] = (naive.columns.adds_above, optimized.columns.adds_above)
_aggregates: tuple[Aggregate, Aggregate] = (naive.columns.vwap, optimized.columns.vwap)
_makers: tuple[Callable[[np.ndarray], ColumnsLike], ...] = (
    naive.columns.to_columns, optimized.columns.to_columns)


def _soa(level: str) -> Filter:
    return lambda ev, s, p: optimized.columns.Columns(ev).adds_above(s, p, simd=level)


FILTERS: dict[str, Filter] = {
    "naive": naive.columns.adds_above,
    "numpy": lambda ev, s, p: naive.columns.Columns(ev).adds_above(s, p),
    "aos": optimized.columns.adds_above,
    **{f"soa-{level}": _soa(level) for level in LEVELS},
}
AGGREGATES: dict[str, Aggregate] = {
    "naive": naive.columns.vwap,
    "numpy": lambda ev: naive.columns.Columns(ev).vwap(),
    "aos": optimized.columns.vwap,
    "soa": lambda ev: optimized.columns.Columns(ev).vwap(),
}


def event(kind: str, ref: int = 0, new_ref: int = 0, shares: int = 0, price: int = 0,
          locate: int = 1, stock: bytes = b"") -> tuple[Any, ...]:
    """One EVENT_DTYPE row as a tuple, fields in dtype order."""
    return (0, ref, new_ref, 0, shares, price, locate, ord(kind), ord("B"), 0, stock)


def events(rows: list[tuple[Any, ...]]) -> np.ndarray:
    return records(rows, EVENT_DTYPE)


@pytest.fixture(scope="module")
def day() -> np.ndarray:
    import optimized.itch
    from twinmatch.gen import market_day_bytes
    raw, _ = market_day_bytes(20_000, 20, seed=3)
    ev, _ = optimized.itch.decode(raw)
    return ev


# ----------------------------------------------------------------------- the filter


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_matches_the_spec_on_a_generated_day(name: str, day: np.ndarray) -> None:
    adds = day[np.isin(day["type"], [ord("A"), ord("F")])]
    stocks = sorted(set(adds["stock"].tolist()))[:4]
    assert stocks
    for stock in stocks:
        prices = adds["price"][adds["stock"] == stock]
        for p in (0, int(np.median(prices)), int(prices.max()), MAX_PRICE):
            want = naive.columns.adds_above(day, stock, p)
            got = FILTERS[name](day, stock, p)
            assert got.dtype == np.int64 and np.array_equal(got, want), (stock, p)
    assert len(naive.columns.adds_above(day, stocks[0], 0)) > 0


def test_filter_rule_by_hand() -> None:
    ev = events([
        event("A", 1, price=100, stock=b"AAPL    "),   # 0: at P, not above
        event("A", 2, price=101, stock=b"AAPL    "),   # 1: yes
        event("F", 3, price=MAX_PRICE, stock=b"AAPL    "),  # 2: yes (F is an add too)
        event("A", 4, price=500, stock=b"MSFT    "),   # 3: another stock
        event("U", 1, 5, price=900),                   # 4: not an add (no stock either)
        event("P", 6, price=900, stock=b"AAPL    "),   # 5: a trade, not an add
        event("A", 7, price=0, stock=b"AAPL    "),     # 6: price 0 is never above anything
        event("A", 8, price=200, stock=b"AAPLX   "),   # 7: another stock, sharing a prefix
    ])
    for name, f in FILTERS.items():
        assert f(ev, "AAPL", 100).tolist() == [1, 2], name
        assert f(ev, b"AAPL    ", 0).tolist() == [0, 1, 2], name
        assert f(ev, "AAPL", MAX_PRICE).tolist() == [], name
        assert f(ev, "AAPL", MAX_PRICE - 1).tolist() == [2], name
        assert f(ev, "ZZZZ", 0).tolist() == [], name           # unknown symbol
        assert f(ev, "AAPLX", 199).tolist() == [7], name


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_of_nothing(name: str) -> None:
    out = FILTERS[name](np.zeros(0, EVENT_DTYPE), "AAPL", 0)
    assert out.dtype == np.int64 and len(out) == 0


@pytest.mark.parametrize("name", sorted(FILTERS))
@pytest.mark.parametrize(("stock", "price", "error"), [
    ("AAPL", -1, ValueError), ("AAPL", MAX_PRICE + 1, ValueError),
    ("AAPL", True, TypeError), ("AAPL", 1.5, TypeError),
    ("TOOLONGXX", 0, ValueError), ("É", 0, UnicodeEncodeError),
])
def test_filter_refuses_bad_arguments(name: str, stock: str, price: object,
                                      error: type[Exception]) -> None:
    with pytest.raises(error):
        FILTERS[name](np.zeros(3, EVENT_DTYPE), stock, price)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["naive", "aos"])
def test_filter_refuses_other_dtypes(name: str) -> None:
    with pytest.raises(TypeError, match="EVENT_DTYPE"):
        FILTERS[name](np.zeros(3, np.uint8), "AAPL", 0)
    with pytest.raises(TypeError, match="EVENT_DTYPE"):
        AGGREGATES[name](np.zeros(3, np.uint8))


def test_stock_keys() -> None:
    assert stock_field("AAPL") == b"AAPL    "
    assert stock_key(b"A") == int.from_bytes(b"A       ", "little")


# -------------------------------------------------- SIMD against scalar, every tail


@pytest.mark.parametrize("level", LEVELS[1:] or ["scalar"])
def test_simd_equals_scalar_on_every_start_and_length(level: str) -> None:
    rng = np.random.default_rng(9)
    n = 120
    ev = np.zeros(n, EVENT_DTYPE)
    ev["type"] = rng.choice(np.frombuffer(b"AFEUD", np.uint8), n)
    ev["stock"] = rng.choice([b"AAPL    ", b"MSFT    "], n)
    ev["price"] = rng.choice([0, 1, 99, 100, 101, 2**31 - 1, 2**31, 2**31 + 1,
                              MAX_PRICE - 1, MAX_PRICE], n)
    cols = optimized.columns.Columns(ev)
    spec = naive.columns.adds_above(ev, "AAPL", 100)
    for p in (100, 2**31):   # around the sign bit AVX2's signed compare has to dodge
        spec = naive.columns.adds_above(ev, "AAPL", p)
        for start in range(0, 40):
            for stop in range(start, min(n, start + 70) + 1):
                want = spec[(spec >= start) & (spec < stop)]
                got = cols.adds_above("AAPL", p, simd=level, start=start, stop=stop)
                assert np.array_equal(got, want), (level, p, start, stop)


def test_cpu_level_and_refusals() -> None:
    assert optimized.columns.cpu_level() in optimized.columns.LEVELS
    cols = optimized.columns.Columns(np.zeros(4, EVENT_DTYPE))
    with pytest.raises(ValueError, match="simd"):
        cols.adds_above("AAPL", 0, simd="sse9")
    with pytest.raises(ValueError, match="rows"):
        cols.adds_above("AAPL", 0, start=3, stop=2)
    with pytest.raises(ValueError, match="rows"):
        cols.adds_above("AAPL", 0, stop=5)
    with pytest.raises(ValueError, match="rows"):
        cols.adds_above("AAPL", 0, start=-1)
    unsupported = optimized.columns.LEVELS[len(LEVELS):]
    for level in unsupported:
        with pytest.raises(ValueError, match="cannot run"):
            cols.adds_above("AAPL", 0, simd=level)


# ----------------------------------------------------------------- the columns


@pytest.mark.parametrize("twin", [naive.columns, optimized.columns])
def test_columns_hold_each_field(twin: object, day: np.ndarray) -> None:
    cols = twin.to_columns(day)  # type: ignore[attr-defined]
    assert len(cols) == len(day)
    for name in EVENT_DTYPE.names or ():
        got = cols.column(name)
        if name == "stock":
            assert got.dtype == np.dtype("<u8")
            assert got.tobytes() == np.ascontiguousarray(day["stock"]).tobytes()
        else:
            assert got.dtype == day.dtype[name] and np.array_equal(got, day[name]), name
    with pytest.raises(KeyError):
        cols.column("nope")


def test_native_columns_are_a_copy_that_outlives_its_source(day: np.ndarray) -> None:
    ev = day.copy()
    cols = optimized.columns.Columns(ev)
    view = cols.column("price")
    want = view.copy()
    ev["price"] = 0
    del cols
    assert np.array_equal(view, want)            # the view keeps the columns alive
    assert not view.flags.writeable


# -------------------------------------------------------------- the aggregate


def test_vwap_rule_by_hand() -> None:
    big = MAX_QTY
    ev = events([
        event("E", 1, shares=5, locate=7),               # before its add: unpriced
        event("A", 1, price=100, shares=50, locate=7),
        event("E", 1, shares=10, locate=7),              # 10 @ 100
        event("C", 1, shares=10, price=999, locate=7),   # C prints at its own price: left out
        event("U", 1, 2, price=120, shares=40, locate=7),
        event("E", 2, shares=20, locate=7),              # 20 @ 120 (the replace's price)
        event("D", 2, locate=7),
        event("E", 2, shares=1, locate=7),               # after a delete: still 120 (a join)
        event("E", 3, shares=4, locate=9),               # never added: unpriced
        event("F", 4, price=MAX_PRICE, locate=9),
        event("E", 4, shares=big, locate=9),             # a product near 2**64
        event("E", 4, shares=big, locate=9),             # and a sum past it
        event("A", 1, price=200, locate=7),              # a reused ref: the latest wins
        event("E", 1, shares=3, locate=7),               # 3 @ 200
    ])
    for name, agg in AGGREGATES.items():
        rows = agg(ev)
        assert rows.dtype == VWAP_DTYPE, name
        got = {int(r["locate"]): (int(r["executions"]), int(r["unpriced"]), int(r["shares"]),
                                  notional(r)) for r in rows}
        assert got == {
            7: (5, 1, 34, 10 * 100 + 20 * 120 + 1 * 120 + 3 * 200),
            9: (3, 1, 2 * big, 2 * big * MAX_PRICE),
        }, name
        assert [int(r["locate"]) for r in rows] == [7, 9]
        assert vwap_price(rows[1]) == MAX_PRICE
    assert notional(AGGREGATES["aos"](ev)[1]) > 2**64


@pytest.mark.parametrize("name", sorted(AGGREGATES))
def test_vwap_of_nothing(name: str) -> None:
    out = AGGREGATES[name](np.zeros(0, EVENT_DTYPE))
    assert out.dtype == VWAP_DTYPE and len(out) == 0
    no_executions = events([event("A", 1, price=5), event("C", 1, shares=1, price=5)])
    assert len(AGGREGATES[name](no_executions)) == 0
    only_unpriced = AGGREGATES[name](events([event("E", 1, shares=9, locate=65535)]))
    assert only_unpriced.tolist() == [(65535, 1, 1, 0, 0, 0)]
    assert vwap_price(only_unpriced[0]) is None


@pytest.mark.parametrize("name", sorted(AGGREGATES))
def test_vwap_matches_the_spec_on_a_generated_day(name: str, day: np.ndarray) -> None:
    want = naive.columns.vwap(day)
    assert len(want) > 0 and want["shares"].sum() > 0
    assert AGGREGATES[name](day).tobytes() == want.tobytes()


# ------------------------------------------------------------- differential


_KINDS = st.sampled_from("AFEUDCXP")
_ROW = st.tuples(
    _KINDS,
    st.integers(0, 6),                      # order_ref: few, so refs collide and repeat
    st.integers(0, 6),                      # new_order_ref
    st.sampled_from([0, 1, 7, MAX_QTY]),    # shares
    st.sampled_from([0, 1, 99, 100, 101, 2**31, MAX_PRICE - 1, MAX_PRICE]),
    st.sampled_from([0, 1, 2, 65535]),      # locate
    st.sampled_from([b"", b"AAPL    ", b"MSFT    ", b"AAPL\0\0\0\0", b"\xff" * 8]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_ROW, max_size=60),
       stock=st.sampled_from(["AAPL", "MSFT", "ZZ", b"AAPL\0", b"\xff" * 8]),
       price=st.sampled_from([0, 1, 100, 2**31 - 1, 2**31, MAX_PRICE - 1, MAX_PRICE]))
def test_every_form_agrees_on_random_streams(
        rows: list[tuple[str, int, int, int, int, int, bytes]], stock: bytes | str,
        price: int) -> None:
    ev = events([event(k, r, nr, sh, p, loc, s) for k, r, nr, sh, p, loc, s in rows])
    want = naive.columns.adds_above(ev, stock, price)
    for name, f in FILTERS.items():
        assert np.array_equal(f(ev, stock, price), want), name
    spec = naive.columns.vwap(ev).tobytes()
    for name, agg in AGGREGATES.items():
        assert agg(ev).tobytes() == spec, name


# ------------------------------------------------------- the machine code claims


@pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("nm") is None,
                    reason="binutils (objdump, nm) not installed")
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="the chapter's claims are about x86-64 instructions")
def test_the_listings_show_what_chapter_9_says(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The scalar loops stay scalar (the compiler did not vectorise them behind our back),
    and the kernels compare whole vectors: 256-bit in AVX2, mask registers in AVX-512."""
    spec = importlib.util.spec_from_file_location("tm_asm_columns", ROOT / "scripts" / "asm.py")
    assert spec is not None and spec.loader is not None
    asm = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = asm
    spec.loader.exec_module(asm)
    mine = tuple(x for x in asm.LISTINGS if x.name.startswith("columns-filter-"))
    monkeypatch.setattr(asm, "LISTINGS", mine)
    assert len(mine) == 4 and asm.generate(tmp_path) == []

    def code(name: str) -> str:
        text = (tmp_path / f"columns-filter-{name}.md").read_text(encoding="utf-8")
        return text.split("```nasm\n")[1].split("```")[0]

    for name in ("aos", "soa"):
        assert not re.search(r"\b[xyz]mm\d", code(name)), name
    assert re.search(r"vpcmpeqq ymm", code("avx2")) and "vpcmpgtd" in code("avx2")
    avx512 = code("avx512")
    assert re.search(r"vpcmp(nle)?ud k", avx512) and re.search(r"vpcmpeqq k\d,zmm", avx512)


def test_the_layout_table_renders_and_says_what_is_missing() -> None:
    """scripts/figures.py's chapter 9 table, from a made-up run (values are not measurements)."""
    spec = importlib.util.spec_from_file_location("tm_figures_columns",
                                                  ROOT / "scripts" / "figures.py")
    assert spec is not None and spec.loader is not None
    figures = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = figures
    spec.loader.exec_module(figures)
    assert figures.columns_layout_html({"benchmarks": []}, "here") is None

    def bench(impl: str, bytes_per_row: int) -> dict[str, object]:
        return {"group": "simd", "name": f"test_columns_filter[{impl}]",
                "params": {"impl": impl}, "stats": {"median": 1e-3},
                "extra_info": {"ops": 1000, "bytes_per_row": bytes_per_row}}

    paired = {"group": "simd", "name": "test_paired_columns[simd-vs-aos]",
              "extra_info": {"paired": {"key": "simd-vs-aos", "valgrind_loops": {
                  "cpp-aos": {"Ir": 30.0, "D1": 0.9, "LL": 0.1}}}}}
    text = figures.columns_layout_html(
        {"benchmarks": [bench("cpp-soa", 13), bench("cpp-aos", 56), paired]}, "here")
    assert text is not None
    aos, soa = text.index("C++ scalar, records"), text.index("C++ scalar, columns")
    assert aos < soa                       # the book's order, not the run's
    assert "56.0 MB/s" in text and "30.00" in text and "Measured on: here" in text
