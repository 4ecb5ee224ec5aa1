# twinmatch: every target is self-contained on a fresh machine (creates .venv, installs, builds).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.twinmatch-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Where the editable build keeps CMake's files (scikit-build-core's build-dir).
export PYTHONDONTWRITEBYTECODE := 1
# mkdocs-material prints a banner about its successor on every build.
export NO_MKDOCS_2_WARNING := 1

.PHONY: all install build exercises-native demo test test-fast lint typecheck stubs stubs-check pytest exercises-check \
        docs docs-check browser-check book bench bench-run bench-day bench-check check fuzz sanitize sanitize-threads \
        system-deps bench-deps clean

all: demo

$(PY):
	$(PYTHON) -m venv $(VENV)

# The editable install does not rebuild on import; `make build` (below) and the
# staleness check in optimized/_build.py do, which needs the build tools in the venv
# itself (hence --no-build-isolation).
$(STAMP): pyproject.toml native/CMakeLists.txt | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4,<3" ninja
	$(PY) -m pip install -q --no-build-isolation -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Rebuild optimized._native from native/ (incremental: only what changed). Every target
# that uses the extension runs this first, so no command pays a build check at start-up.
# It also compiles the Python packages' bytecode: with PYTHONDONTWRITEBYTECODE (exported
# above) nothing writes it at import, and every command would compile its modules again at
# start-up (of every module it imports); a stale .pyc is never used (Python checks the
# source's time stamp), so an edited module only costs its own compile.
build: $(STAMP)
	$(PY) -c "from optimized._build import main; raise SystemExit(main())"
	$(PY) -m compileall -q twinmatch naive optimized contract >/dev/null

# The C++ exercises' own extension (exercises/native/), from the starters; not part of
# optimized._native, so a starter that does not compile never breaks the product.
exercises-native: $(STAMP)
	$(PY) scripts/exercises.py build

# Debian packages the browser check needs (headless Chromium and its WebDriver), and
# curl, which README.md's examples use (tests/test_readme.py runs them).
system-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null \
	  && command -v curl >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver \
	    curl >/dev/null; }
	@# liburing: chapter 15's io_uring receive path (the build leaves it out without it)
	@test -f /usr/include/liburing.h || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq liburing-dev >/dev/null; }

# The benchmarks' Debian package: valgrind, whose cachegrind counts instructions and cache
# misses beside the times (tests/bench/valgrind.py; those rows skip without it).
bench-deps:
	@command -v valgrind >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq valgrind >/dev/null; }

demo: build
	$(PY) -m twinmatch demo

lint: $(STAMP)
	$(VENV)/bin/ruff check contract naive optimized peers twinmatch tests scripts exercises

typecheck: $(STAMP)
	$(VENV)/bin/mypy

stubs: build
	$(PY) scripts/stubs.py --write

stubs-check: build
	$(PY) scripts/stubs.py --check

# The behavioural suites (benchmarks skipped), then every benchmark once at a small
# size as a check that it still runs and still agrees with the naive twin.
pytest: build
	$(VENV)/bin/pytest -q -p no:cacheprovider
	TWINMATCH_BENCH_SCALE=small $(VENV)/bin/pytest -q -p no:cacheprovider tests/bench \
	  --benchmark-only --benchmark-disable-gc --benchmark-columns=median

exercises-check: build
	$(PY) scripts/exercises.py verify

docs: build
	$(PY) scripts/figures.py
	$(PY) scripts/asm.py
	$(VENV)/bin/mkdocs build --strict -q

browser-check: docs system-deps
	$(PY) scripts/browser_check.py site

# The full suite: both twins, exercises' checkers, stubs, ruff, mypy, docs build, browser check.
# The exercises' checkers run inside pytest (tests/test_exercises.py calls the same
# verify_one per exercise as `make exercises-check`), so they are not run a second time.
test: lint typecheck stubs-check pytest docs browser-check
	@echo "make test: all green"

# One exercise, as a learner runs it: make check EX=01_order_book/fifo
check: build
	$(PY) scripts/exercises.py check $(EX)

# The comparisons: pytest-benchmark JSON in out/bench.json, then the speed targets from
# that one run (exit 1 if one is missed). Every ratio target is a paired measurement
# (tests/bench/paired.py): median of per-pair ratios, printed with its IQR. The benchmark
# peers (itch-book) come from the `bench` extra.
BENCH_STAMP := $(VENV)/.twinmatch-bench-installed
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q --no-build-isolation -e ".[dev,bench]"
	touch $@

bench-run: $(BENCH_STAMP) bench-deps build
	mkdir -p out
	$(VENV)/bin/pytest tests/bench -p no:cacheprovider --benchmark-only \
	  --benchmark-json=out/bench.json --benchmark-columns=median,ops,rounds -q $(BENCH_ARGS)

bench: bench-run
	$(PY) scripts/targets.py out/bench.json

# A full-size day (270M messages, a real NASDAQ day's size; about 8 GB in out/bench-day,
# deleted afterwards) generated and replayed in book mode in a fresh process: wall time and
# peak RSS into out/bench-day.json, then its target (peak RSS under 2 GB). Not in make test.
# Minutes, not seconds: the target's row reports how long generation and replay took.
bench-day: $(BENCH_STAMP) bench-deps build
	mkdir -p out/bench-day
	TWINMATCH_BENCH_DAY=1 TWINMATCH_BENCH_DAY_DIR=out/bench-day $(VENV)/bin/pytest \
	  tests/bench/test_bench_engine.py -k full_day -p no:cacheprovider --benchmark-only \
	  --benchmark-json=out/bench-day.json --benchmark-columns=median,rounds -q
	$(PY) scripts/targets.py out/bench-day.json --only engine-full-day-rss

# Chapter 14 on the issue's 20M-message, 4,000-symbol day: twinmatch tables against
# itch-book's itch2parquet, paired (11 pairs; several minutes). Not in make bench-run.
.PHONY: bench-tables-day
bench-tables-day: $(BENCH_STAMP) build
	mkdir -p out
	TWINMATCH_BENCH_TABLES_DAY=1 $(VENV)/bin/pytest tests/bench/test_bench_tables.py \
	  -k "(paired_tables_convert and day20m) or builder_lookahead" -p no:cacheprovider --benchmark-only \
	  --benchmark-json=out/bench-tables-day.json --benchmark-columns=median,rounds -q
	$(PY) scripts/targets.py out/bench-tables-day.json --only tables-day20m-vs-itchbook,tables-builder-lookahead

# The book with fresh numbers from this machine (a missed target is reported in the
# book, not fatal here).
book: bench-run system-deps
	$(PY) scripts/targets.py out/bench.json --no-fail
	$(PY) scripts/figures.py --bench out/bench.json
	$(PY) scripts/asm.py
	$(PY) scripts/view_screenshot.py
	$(VENV)/bin/mkdocs build --strict
	@echo "book built: open site/index.html (or: $(VENV)/bin/mkdocs serve)"

# The suite against the native module built with AddressSanitizer + UBSan, in a second
# venv (.venv-asan) that shares .venv's packages but has its own editable build.
ASAN_VENV := .venv-asan
ASAN_PRELOAD = $(shell gcc -print-file-name=libasan.so) $(shell gcc -print-file-name=libstdc++.so)
SANITIZE_TESTS ?= tests/test_book.py tests/test_book_golden.py tests/test_book_differential.py \
  tests/test_book_differential_native.py tests/test_native_book_internals.py tests/test_itch.py \
  tests/test_pcap.py tests/test_orders.py tests/test_gen.py tests/fuzz \
  tests/test_histogram.py tests/test_pipeline.py tests/test_ring.py tests/test_market.py \
  tests/test_load_native.py tests/test_entry.py tests/test_journal.py tests/test_market_batch.py

$(ASAN_VENV)/.installed: $(STAMP) native/CMakeLists.txt
	$(PYTHON) -m venv $(ASAN_VENV)
	$(ASAN_VENV)/bin/python -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'twinmatch_base.pth').write_text('$(abspath $(VENV))/lib/python' + sysconfig.get_python_version() + '/site-packages\\n')"
	$(ASAN_VENV)/bin/python -m pip install -q --no-build-isolation --no-deps -e . \
	  -Cbuild-dir=build/asan -Ccmake.define.TWINMATCH_SANITIZE=ON -Ccmake.build-type=Debug
	touch $@

sanitize: $(ASAN_VENV)/.installed sanitize-threads
	$(ASAN_VENV)/bin/python -c "from optimized._build import main; raise SystemExit(main())"
	LD_PRELOAD="$(ASAN_PRELOAD)" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TWINMATCH_SANITIZED=1 \
	  $(ASAN_VENV)/bin/python -m pytest -q -p no:cacheprovider -x $(SANITIZE_TESTS)

# ThreadSanitizer over the SPSC ring (native/ring.hpp: tests/native/ring_stress.cpp, 2M
# items through a 64-slot ring) and over the whole pipeline (native/pipeline.hpp:
# tests/native/pipeline_stress.cpp, a generated order-flow feed through every placement,
# both policies, a stop and failed thread starts, with tiny rings) and over the broadcast
# ring and both sharding designs (native/shard.hpp: tests/native/shard_stress.cpp, rings
# of 2 slots, 1..4 readers / workers, counts and results checked). Each run is bounded.
TSAN_CXX := g++ -std=c++20 -O1 -g -fsanitize=thread -I native
sanitize-threads:
	mkdir -p build/tsan
	$(TSAN_CXX) tests/native/ring_stress.cpp -o build/tsan/ring_stress
	$(TSAN_CXX) tests/native/pipeline_stress.cpp -o build/tsan/pipeline_stress
	TSAN_OPTIONS=halt_on_error=1 timeout 300 build/tsan/ring_stress 2000000 64
	TSAN_OPTIONS=halt_on_error=1 timeout 600 build/tsan/pipeline_stress 20000
	$(TSAN_CXX) tests/native/shard_stress.cpp -o build/tsan/shard_stress
	TSAN_OPTIONS=halt_on_error=1 timeout 300 build/tsan/shard_stress 10000 3000

# Longer coverage-guided fuzzing of both twins' decoders (atheris), 2 minutes per target;
# then the differential replay of mutated feeds (tests/test_hostile.py), many examples.
FUZZ_SECONDS ?= 120
FUZZ_EXAMPLES ?= 3000
fuzz: build
	$(PY) tests/fuzz/fuzz_itch.py -max_total_time=$(FUZZ_SECONDS)
	$(PY) tests/fuzz/fuzz_pcap.py -max_total_time=$(FUZZ_SECONDS)
	TWINMATCH_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(VENV)/bin/pytest -q -p no:cacheprovider \
	  --timeout=3600 tests/test_hostile.py -k mutated

clean:
	rm -rf build site out .pytest_cache .mypy_cache .ruff_cache .hypothesis $(ASAN_VENV)
