// Python bindings of the table builder (optimized/tables.py is their documented face).
//
// feed() reads the caller's buffer in place with the GIL released; take() hands each
// column's bytes to numpy without copying (the vector moves into the array's owner), and
// optimized/tables.py gives each array its dtype from contract/tables.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "read_buffer.hpp"
#include "tables.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;
using tables::TableBuilder;

namespace {

struct BoundTables {
    TableBuilder builder;
    bool busy = false;
    BoundTables(const std::array<bool, tables::kTables>& on,
                std::vector<std::array<char, 8>> symbols, std::uint32_t depth,
                std::uint32_t lobster)
        : builder(on, std::move(symbols), depth, lobster) {}
    TableBuilder& idle() {
        if (busy) throw std::runtime_error("table builder is busy in another thread");
        return builder;
    }
};

using Bytes = nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>;

// A column's bytes as a numpy uint8 array that owns them (handed over, not copied): the
// capsule frees the block when numpy lets go of the array.
Bytes to_numpy(tables::Column::Owned block) {
    nb::capsule owner(block.data, [](void* p) noexcept { std::free(p); });
    std::size_t shape[1] = {block.size};
    return Bytes(block.data, 1, shape, owner);
}

}  // namespace

void register_tables(nb::module_& m) {
    nb::class_<BoundTables>(m, "TableBuilder", "Research tables from ITCH (native/tables.hpp).")
        .def(
            "__init__",
            [](BoundTables* self, std::array<bool, tables::kTables> on,
               std::vector<nb::bytes> symbols, std::uint32_t depth, std::uint32_t lobster) {
                std::vector<std::array<char, 8>> names;
                for (const nb::bytes& s : symbols) {
                    if (s.size() != 8) throw nb::value_error("a symbol must be 8 bytes");
                    std::array<char, 8> a{};
                    std::memcpy(a.data(), s.c_str(), 8);
                    names.push_back(a);
                }
                if (depth < 1 || depth > 1000) throw nb::value_error("depth must be 1..1000");
                if (lobster > 1000) throw nb::value_error("lobster must be 0..1000");
                new (self) BoundTables(on, std::move(names), depth, lobster);
            },
            "on"_a, "symbols"_a, "depth"_a, "lobster"_a = 0)
        .def(
            "feed",
            [](BoundTables& b, nb::handle buffer) {
                ReadBuffer in(buffer);  // held (memory pinned) while the GIL is released
                TableBuilder& t = b.idle();
                tables::FeedResult r;
                b.busy = true;
                try {
                    nb::gil_scoped_release nogil;
                    r = t.feed(in.data(), in.size());
                } catch (...) {
                    b.busy = false;
                    throw;
                }
                b.busy = false;
                return std::make_tuple(r.consumed, static_cast<int>(r.error),
                                       static_cast<int>(r.error_type),
                                       static_cast<int>(r.error_length));
            },
            "buffer"_a,
            "Read whole framed records; returns (consumed, error code, type, length).")
        .def(
            "take",
            [](BoundTables& b) {
                TableBuilder& t = b.idle();
                nb::list out;
                for (int k = 0; k < tables::kAllTables; ++k) {
                    tables::Table& tab = t.table(k);
                    nb::list cols;
                    for (tables::Column& c : tab.cols) {
                        cols.append(nb::make_tuple(c.name, to_numpy(c.take())));
                    }
                    out.append(cols);
                }
                return out;
            },
            nb::sig("def take(self) -> list[list[tuple[str, "
                    "numpy.typing.NDArray[numpy.uint8]]]]"),
            "Every table's columns since the last take(): [[(name, uint8 bytes), ...], ...].")
        .def(
            "set_lookahead_stages",
            [](BoundTables& b, unsigned stages) { b.idle().set_lookahead_stages(stages); },
            "stages"_a, "Test hook: run the first `stages` of the three look-ahead stages.")
        .def(
            "set_lookahead", [](BoundTables& b, bool on) { b.idle().set_lookahead(on); }, "on"_a,
            "Benchmark hook: look ahead by the working set (the default) or never.")
        .def_prop_ro("messages", [](BoundTables& b) { return b.idle().messages(); })
        .def(
            "counters",
            [](BoundTables& b) {
                const Market& mk = b.idle().market();
                const MarketCounts& c = mk.counts();
                std::vector<std::uint64_t> anomalies(c.anomalies.begin(), c.anomalies.end());
                BookStates s = mk.book_states();
                return std::make_tuple(anomalies, s.episodes[1], s.episodes[2],
                                       static_cast<std::uint64_t>(mk.live_orders()));
            },
            "(anomalies by kind, locked episodes, crossed episodes, live orders)");
}
