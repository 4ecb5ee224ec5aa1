// Python bindings of the many-books market (optimized/market.py is their documented face).
//
// run() reads the decoders' EVENT_DTYPE array in place (passed as its raw bytes), applies
// it in C++ with the GIL released, and returns the fills as a FILL_DTYPE array.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "market.hpp"
#include "read_buffer.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;

namespace {

using InBuf = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Top = std::optional<std::pair<std::uint32_t, std::uint64_t>>;

// A market plus its reusable fills vector and a busy flag: run() releases the GIL, and
// another Python thread must not touch the market meanwhile.
struct BoundMarket {
    Market market;
    std::vector<FillRecord> fills;
    bool busy = false;

    BoundMarket(Mode mode, std::uint64_t window) : market(mode, window) {
        fills.reserve(1 << 16);
    }
    Market& idle() {
        if (busy) throw std::runtime_error("market is busy: run() is running in another thread");
        return market;
    }
};

Mode to_mode(const std::string& mode) {
    if (mode == "book") return Mode::Book;
    if (mode == "match") return Mode::Match;
    throw nb::value_error(("mode must be 'book' or 'match', got '" + mode + "'").c_str());
}

// A locate from Python: optimized/market.py has checked it (the same check and message
// as the naive twin); this is the last line of defence.
std::uint16_t to_locate(std::int64_t locate) {
    if (locate < 0 || locate > 0xFFFF)
        throw nb::value_error(("locate must be 0..65535, got " + std::to_string(locate)).c_str());
    return static_cast<std::uint16_t>(locate);
}

nb::str text(const std::string& s) {  // show_bytes() output is ASCII: always valid UTF-8
    return nb::str(s.data(), s.size());
}

// The fills as a new numpy FILL_DTYPE array (a copy: the vector is reused next run).
nb::object fills_array(const std::vector<FillRecord>& v) {
    nb::object dtypes = nb::module_::import_("contract.dtypes");
    nb::object np = nb::module_::import_("numpy");
    nb::object a = np.attr("empty")(v.size(), "dtype"_a = dtypes.attr("FILL_DTYPE"));
    if (!v.empty()) {
        Py_buffer view;
        if (PyObject_GetBuffer(a.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0)
            throw nb::python_error();
        std::memcpy(view.buf, v.data(), v.size() * sizeof(FillRecord));
        PyBuffer_Release(&view);
    }
    return a;
}

Top top_of(Market& m, std::uint16_t locate, Side side) {
    std::uint64_t q;
    std::uint32_t p = m.best(locate, side, q);
    if (p == 0) return std::nullopt;
    return std::make_pair(p, q);
}

}  // namespace

void register_market(nb::module_& m) {
    m.def(
        "_cap_pool_reservation",
        [](std::size_t bytes) { g_pool_reservation_cap.store(bytes, std::memory_order_relaxed); },
        "bytes"_a,
        "Test only: a Market made from now reserves at most `bytes` of address space for its\n"
        "order pool at first (0: no cap), as if a bigger reservation had been refused.");
    m.attr("MARKET_ANOMALY_KINDS") = kAnomalyKinds;
    m.def(
        "show_bytes",
        [](nb::bytes raw) { return text(show_bytes(raw.c_str(), raw.size())); }, "raw"_a,
        "Feed bytes as text: 0x20..0x7e as themselves, any other byte as \\xNN.");
    nb::class_<BoundMarket>(m, "Market", "One book per stock locate (native/market.hpp).")
        .def(
            "__init__",
            [](BoundMarket* self, const std::string& mode, std::uint64_t window_levels) {
                Mode md = to_mode(mode);
                try {
                    new (self) BoundMarket(md, window_levels);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            },
            "mode"_a = "book", "window_levels"_a = Market::kDefaultWindow)
        .def_prop_ro("mode", [](BoundMarket& b) {
            return std::string(b.market.mode() == Mode::Book ? "book" : "match");
        })
        .def(
            "run_bytes",
            [](BoundMarket& b, InBuf events) {
                if (events.shape(0) % sizeof(ItchEvent) != 0)
                    throw nb::value_error("events: byte length is not a multiple of 56");
                const auto* ev = reinterpret_cast<const ItchEvent*>(events.data());
                std::size_t n = events.shape(0) / sizeof(ItchEvent);
                if (n >= 0xFFFF'FFFFull) throw nb::value_error("events: at most 2^32-2 per run");
                Market& mk = b.idle();
                b.fills.clear();
                b.busy = true;
                try {
                    nb::gil_scoped_release nogil;
                    mk.run(ev, n, b.fills);
                } catch (const std::bad_alloc&) {
                    b.busy = false;
                    std::string msg = "out of memory at event " + std::to_string(mk.applied()) +
                                      ": the events before it are applied, it and later ones "
                                      "are not (their fills are lost with this error)";
                    PyErr_SetString(PyExc_MemoryError, msg.c_str());
                    throw nb::python_error();
                } catch (...) {
                    b.busy = false;
                    throw;
                }
                b.busy = false;
                return fills_array(b.fills);
            },
            "events"_a,
            nb::sig("def run_bytes(self, events: numpy.typing.NDArray[numpy.uint8]) "
                    "-> numpy.typing.NDArray[numpy.void]"),
            "Apply EVENT_DTYPE records (as raw bytes); returns FILL_DTYPE fills.")
        .def(
            "run_itch",
            [](BoundMarket& b, nb::handle buffer) {
                ReadBuffer in(buffer);  // held (memory pinned) while the GIL is released
                // Every record is at least kMinEventRecord bytes, so event indices fit.
                if (in.size() / itch::kMinEventRecord >= 0xFFFF'FFFFull)
                    throw nb::value_error("buffer: at most 2^32-2 events per run");
                Market& mk = b.idle();
                b.fills.clear();
                std::vector<std::uint64_t> counts(256, 0);
                itch::ScanResult r;
                b.busy = true;
                try {
                    nb::gil_scoped_release nogil;
                    r = mk.run_itch(in.data(), in.size(), counts.data(), b.fills);
                } catch (const std::bad_alloc&) {
                    b.busy = false;
                    std::string msg = "out of memory at event " + std::to_string(mk.applied()) +
                                      ": the events before it are applied, it and later ones "
                                      "are not (their fills are lost with this error)";
                    PyErr_SetString(PyExc_MemoryError, msg.c_str());
                    throw nb::python_error();
                } catch (...) {
                    b.busy = false;
                    throw;
                }
                b.busy = false;
                return nb::make_tuple(fills_array(b.fills), counts, r.consumed, r.events,
                                      static_cast<int>(r.error), static_cast<int>(r.error_type),
                                      static_cast<int>(r.error_length));
            },
            "buffer"_a,
            nb::sig("def run_itch(self, buffer: object) -> tuple["
                    "numpy.typing.NDArray[numpy.void], list[int], int, int, int, int, int]"),
            "Decode framed ITCH records, applying each at once (no events array).\n\n"
            "Returns (fills, counts by type byte, consumed, events, error code, type, "
            "length).")
        .def(
            "raw_counts",
            [](BoundMarket& b) {
                const MarketCounts& c = b.idle().counts();
                std::vector<std::uint64_t> events(c.events.begin(), c.events.end());
                std::vector<std::uint64_t> anomalies(c.anomalies.begin(), c.anomalies.end());
                std::vector<std::uint64_t> rejects(c.rejects.begin(), c.rejects.end());
                return std::make_tuple(events, anomalies, rejects, c.fills, c.volume);
            },
            "(events by type byte, anomalies by kind, rejects by reason, fills, volume)")
        .def("__len__", [](BoundMarket& b) { return b.idle().live_orders(); },
             "Live (resting) orders across all books.")
        .def_prop_ro("books", [](BoundMarket& b) { return b.idle().books(); },
                     "Books created so far (one per locate with an order).")
        .def(
            "activity",
            [](BoundMarket& b) {
                std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
                const Market& mk = b.idle();
                for (std::uint32_t i = 0; i < mk.locates_touched(); ++i)
                    if (std::uint64_t n = mk.activity(static_cast<std::uint16_t>(i)))
                        out.emplace_back(i, n);
                return out;
            },
            "(locate, book messages) for every locate that had one, by locate.")
        .def(
            "stock",
            [](BoundMarket& b, std::int64_t locate) {
                return text(b.idle().stock(to_locate(locate)));
            },
            "locate"_a, "The symbol a stock directory (R) message gave the locate, or ''.")
        .def(
            "trading_state",
            [](BoundMarket& b, std::int64_t locate) {
                std::uint16_t t = b.idle().trading_state(to_locate(locate));
                if (t == 0) return text("");
                char c = static_cast<char>(t & 0xFF);
                return text(show_bytes(&c, 1));
            },
            "locate"_a, "The trading state byte of the locate's last H message, or ''.")
        .def(
            "trading_states",
            [](BoundMarket& b) {
                Market& mk = b.idle();
                std::array<std::uint64_t, 256> by{};
                for (std::size_t loc = 0; loc < mk.locates_touched(); ++loc) {
                    std::uint16_t t = mk.trading_state(static_cast<std::uint16_t>(loc));
                    if (t != 0) ++by[t & 0xFF];
                }
                std::map<std::string, std::uint64_t> d;  // show_bytes keys sort as the naive's
                for (int c = 0; c < 256; ++c) {
                    if (by[c] == 0) continue;
                    char ch = static_cast<char>(c);
                    d[show_bytes(&ch, 1)] = by[c];
                }
                return d;
            },
            "How many locates are in each trading state (by their last H message).")
        .def(
            "book_states",
            [](BoundMarket& b) {
                BookStates s = b.idle().book_states();
                std::vector<std::pair<std::string, std::uint64_t>> d;  // in the naive's order
                const char* names[3] = {"", "locked", "crossed"};
                for (int k = 1; k < 3; ++k) {
                    std::string n = names[k];
                    d.emplace_back(n, s.episodes[k]);
                    d.emplace_back(n + "_ns", s.ns[k]);
                    d.emplace_back(n + "_now", s.now[k]);
                }
                return d;
            },
            "Locked / crossed books: episodes, time in ITCH ns, books in the state now.")
        .def(
            "set_growth_budget",
            [](BoundMarket& b, std::int64_t steps) { b.idle().set_growth_budget(steps); },
            "steps"_a, "Test hook: the growth step after `steps` more raises MemoryError "
                       "(negative: no limit).")
        .def(
            "top",
            [](BoundMarket& b, std::int64_t locate) {
                std::uint16_t loc = to_locate(locate);
                Market& mk = b.idle();
                return std::make_pair(top_of(mk, loc, Side::Buy), top_of(mk, loc, Side::Sell));
            },
            "locate"_a, "((bid, qty) | None, (ask, qty) | None) of one locate's book.")
        .def(
            "depth",
            [](BoundMarket& b, std::int64_t locate, std::int64_t side, std::int64_t levels) {
                std::uint16_t loc = to_locate(locate);
                if (side != 0 && side != 1) throw nb::value_error("side must be 0 or 1");
                std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint32_t>> rows;
                b.idle().depth(loc, Side(side), levels, [&](const DepthRow& r) {
                    rows.emplace_back(r.price, r.qty, r.count);
                });
                return rows;
            },
            "locate"_a, "side"_a, "levels"_a,
            "Up to `levels` levels of one side as (price, qty, orders), best first.")
        .def(
            "order",
            [](BoundMarket& b, std::uint64_t ref)
                -> std::optional<std::tuple<std::uint32_t, int, std::uint32_t, std::uint32_t>> {
                std::uint16_t loc;
                Side s;
                std::uint32_t p, q;
                if (!b.idle().order(ref, loc, s, p, q)) return std::nullopt;
                return std::make_tuple(std::uint32_t(loc), static_cast<int>(s), p, q);
            },
            "order_ref"_a, "(locate, side, price, shares) of a live order, or None.")
        .def(
            "set_lookahead", [](BoundMarket& b, bool on) { b.idle().set_lookahead(on); }, "on"_a,
            "Benchmark hook: prefetch for the messages ahead (by default only while the\n"
            "working set outgrows half the last-level cache) or never.")
        .def(
            "set_lookahead_stages",
            [](BoundMarket& b, unsigned stages) { b.idle().set_lookahead_stages(stages); },
            "stages"_a, "Benchmark hook: run the first `stages` of the three look-ahead stages.")
        .def(
            "lookahead_stages", [](BoundMarket& b) { return b.idle().stages_now(); },
            "The look-ahead stages the next call will run (0..3).")
        .def(
            "set_match_batch",
            [](BoundMarket& b, std::size_t events) { b.idle().set_match_batch(events); },
            "events"_a,
            "Match mode: batches of at least `events` events may take the batch engine (0: never).")
        .def("match_batch", [](BoundMarket& b) { return b.idle().match_batch(); },
             "The smallest batch the batch engine takes (0: off).")
        .def("batch_runs", [](BoundMarket& b) { return b.idle().batch_runs(); },
             "How many run() calls the batch engine took (tests, the ablation).")
        .def(
            "window_stats",
            [](BoundMarket& b) {
                WindowStats w = b.idle().window_stats();
                std::map<std::string, std::uint64_t> d{
                    {"windows", w.windows}, {"levels", w.levels}, {"largest", w.largest},
                    {"far_levels", w.far_levels}, {"moves", w.moves},
                    {"pool_chunks", w.pool_chunks}, {"pool_reserved", w.pool_reserved},
                    {"window_cap", b.market.window_cap()}};
                return d;
            },
            "How the price windows are sized now.\n\nSides with a window, their levels, the "
            "largest,\nlevels in the far maps, window moves so far, order-pool chunks of 65,536 "
            "nodes\nmade usable, the address space the pool reserved (bytes), the cap.")
        .def(
            "books_csv", [](BoundMarket& b) { return text(b.idle().books_csv()); },
            "Every resting order as the books CSV (DESIGN.md), header included.");
}
