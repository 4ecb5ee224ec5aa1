// Python bindings of the many-books market (optimized/market.py is their documented face).
//
// run() reads the decoders' EVENT_DTYPE array in place (passed as its raw bytes), applies
// it in C++ with the GIL released, and returns the fills as a FILL_DTYPE array.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "market.hpp"

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

    BoundMarket(Mode mode, std::uint64_t window, std::uint32_t orders)
        : market(mode, window, orders) {
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

std::uint16_t to_locate(std::int64_t locate) {
    if (locate < 0 || locate > 0xFFFF) throw nb::value_error("locate must be 0..65535");
    return static_cast<std::uint16_t>(locate);
}

// The fills as a new numpy FILL_DTYPE array (a copy: the vector is reused next run).
nb::object fills_array(const std::vector<FillRecord>& v) {
    nb::object dtypes = nb::module_::import_("twinmatch.dtypes");
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
    Book* b = m.book(locate);
    if (b == nullptr) return std::nullopt;
    std::uint64_t q;
    std::uint32_t p = b->best(side, q);
    if (p == 0) return std::nullopt;
    return std::make_pair(p, q);
}

}  // namespace

void register_market(nb::module_& m) {
    m.attr("MARKET_ANOMALY_KINDS") = kAnomalyKinds;
    nb::class_<BoundMarket>(m, "Market", "One book per stock locate (native/market.hpp).")
        .def(
            "__init__",
            [](BoundMarket* self, const std::string& mode, std::uint64_t window_levels,
               std::uint32_t initial_orders) {
                Mode md = to_mode(mode);
                try {
                    new (self) BoundMarket(md, window_levels, initial_orders);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            },
            "mode"_a = "book", "window_levels"_a = Market::kDefaultWindow,
            "initial_orders"_a = Market::kDefaultOrders)
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
                const auto& a = b.idle().activity();
                for (std::size_t i = 0; i < a.size(); ++i)
                    if (a[i]) out.emplace_back(static_cast<std::uint32_t>(i), a[i]);
                return out;
            },
            "(locate, book messages) for every locate that had one, by locate.")
        .def(
            "stock",
            [](BoundMarket& b, std::int64_t locate) {
                std::string s(b.idle().stock(to_locate(locate)), 8);
                s.erase(s.find_last_not_of(' ') + 1);
                return s;
            },
            "locate"_a, "The symbol a stock directory (R) message gave the locate, or ''.")
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
                Book* bk = b.idle().book(loc);
                if (bk != nullptr)
                    bk->depth(Side(side), levels, [&](const DepthRow& r) {
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
                Market& mk = b.idle();
                std::uint32_t loc = mk.ref_locate(ref);
                if (loc == RefMap::kAbsent) return std::nullopt;
                Side s;
                std::uint32_t p, q;
                if (!mk.book(static_cast<std::uint16_t>(loc))->order(ref, s, p, q))
                    return std::nullopt;
                return std::make_tuple(loc, static_cast<int>(s), p, q);
            },
            "order_ref"_a, "(locate, side, price, shares) of a live order, or None.")
        .def(
            "books_csv", [](BoundMarket& b) { return b.idle().books_csv(); },
            "Every resting order as the books CSV (DESIGN.md), header included.");
}
