// Python bindings for native/columns.hpp (optimized/columns.py is the typed face).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "columns.hpp"
#include "records_view.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using twinmatch::ItchEvent;
using twinmatch::RecordsView;
namespace col = twinmatch::columns;

namespace {

using I64Array = nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>;
using U8Array = nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>;

// The first k values of `v` in a numpy array of their own.
I64Array to_numpy(const std::vector<std::int64_t>& v, std::size_t k) {
    auto* owned = new std::vector<std::int64_t>(v.begin(), v.begin() + static_cast<long>(k));
    nb::capsule owner(owned, [](void* p) noexcept {
        delete static_cast<std::vector<std::int64_t>*>(p);
    });
    return I64Array(owned->data(), {k}, owner);
}

// VWAP rows as raw bytes; optimized/columns.py views them as VWAP_DTYPE.
U8Array rows_to_numpy(const std::vector<col::VwapRow>& rows, std::size_t k) {
    auto* owned = new std::vector<col::VwapRow>(rows.begin(), rows.begin() + static_cast<long>(k));
    nb::capsule owner(owned, [](void* p) noexcept {
        delete static_cast<std::vector<col::VwapRow>*>(p);
    });
    return U8Array(reinterpret_cast<std::uint8_t*>(owned->data()),
                   {k * sizeof(col::VwapRow)}, owner);
}

col::Level check_level(int level) {
    if (level < 0 || level > static_cast<int>(col::cpu_level()))
        throw std::invalid_argument("columns: SIMD level " + std::to_string(level) +
                                    " is not supported by this CPU");
    return static_cast<col::Level>(level);
}

// The struct of arrays plus a scratch buffer for the filter's indices, grown once to
// the largest call and reused, so repeated calls do not allocate it again.
struct BoundColumns {
    col::EventColumns c;
    std::vector<std::int64_t> scratch;
    bool busy = false;

    explicit BoundColumns(const ItchEvent* ev, std::size_t n) : c(ev, n) {}
};

struct Busy {
    bool& flag;
    explicit Busy(bool& f) : flag(f) {
        if (flag) throw std::runtime_error("columns: busy in another thread");
        flag = true;
    }
    ~Busy() { flag = false; }
};

BoundColumns* make_columns(nb::handle events) {
    RecordsView v(events, "EVENT_DTYPE", "events");
    const auto* ev = static_cast<const ItchEvent*>(v.data());
    const std::size_t n = v.bytes() / sizeof(ItchEvent);
    nb::gil_scoped_release no_gil;
    return new BoundColumns(ev, n);
}

I64Array columns_adds_above(BoundColumns& b, std::uint64_t key, std::uint32_t above,
                            int level, std::size_t start, std::size_t stop) {
    const col::Level lv = check_level(level);
    if (start > stop || stop > b.c.n) throw std::out_of_range("columns: bad row range");
    Busy busy(b.busy);
    if (b.scratch.size() < stop - start) b.scratch.resize(stop - start);
    std::size_t k;
    {
        nb::gil_scoped_release no_gil;
        k = col::adds_above(b.c, start, stop, key, above, lv, b.scratch.data());
    }
    return to_numpy(b.scratch, k);
}

U8Array columns_vwap(BoundColumns& b) {
    Busy busy(b.busy);
    std::vector<col::VwapRow> rows(65536);
    std::size_t k;
    {
        nb::gil_scoped_release no_gil;
        k = col::vwap_soa(b.c, rows.data());
    }
    return rows_to_numpy(rows, k);
}

// One column's bytes, a view into the object (it stays alive while the view does).
U8Array column_bytes(BoundColumns& b, const std::string& name) {
    auto view = [&](auto& arr) {
        using T = std::remove_reference_t<decltype(arr[0])>;
        return U8Array(reinterpret_cast<std::uint8_t*>(arr.data.get()), {b.c.n * sizeof(T)},
                       nb::handle());
    };
    auto& c = b.c;
    if (name == "timestamp") return view(c.timestamp);
    if (name == "order_ref") return view(c.order_ref);
    if (name == "new_order_ref") return view(c.new_order_ref);
    if (name == "match_number") return view(c.match_number);
    if (name == "shares") return view(c.shares);
    if (name == "price") return view(c.price);
    if (name == "locate") return view(c.locate);
    if (name == "type") return view(c.type);
    if (name == "side") return view(c.side);
    if (name == "printable") return view(c.printable);
    if (name == "stock") return view(c.stock);
    throw nb::key_error(("no column " + name).c_str());
}

I64Array aos_adds_above(nb::handle events, std::uint64_t key, std::uint32_t above) {
    RecordsView v(events, "EVENT_DTYPE", "events");
    const auto* ev = static_cast<const ItchEvent*>(v.data());
    const std::size_t n = v.bytes() / sizeof(ItchEvent);
    // The same reuse as BoundColumns' scratch, per thread (the loop runs without the GIL),
    // so that the AoS and SoA calls pay the same for their output.
    thread_local std::vector<std::int64_t> scratch;
    if (scratch.size() < n) scratch.resize(n);
    std::size_t k;
    {
        nb::gil_scoped_release no_gil;
        k = col::adds_above_aos(ev, n, key, above, scratch.data());
    }
    return to_numpy(scratch, k);
}

U8Array aos_vwap(nb::handle events) {
    RecordsView v(events, "EVENT_DTYPE", "events");
    const auto* ev = static_cast<const ItchEvent*>(v.data());
    const std::size_t n = v.bytes() / sizeof(ItchEvent);
    std::vector<col::VwapRow> rows(65536);
    std::size_t k;
    {
        nb::gil_scoped_release no_gil;
        k = col::vwap_aos(ev, n, rows.data());
    }
    return rows_to_numpy(rows, k);
}

}  // namespace

void register_columns(nb::module_& m) {
    nb::class_<BoundColumns>(m, "Columns",
                             "ITCH events as a struct of arrays (native/columns.hpp).")
        .def(nb::new_(&make_columns), "events"_a)
        .def("__len__", [](const BoundColumns& b) { return b.c.n; })
        .def("adds_above", &columns_adds_above, "key"_a, "above"_a, "level"_a, "start"_a,
             "stop"_a, "Filter rows [start, stop) at SIMD level (0 scalar, 1 AVX2, 2 AVX-512).")
        .def("vwap", &columns_vwap, "The E executions' sums per locate, as VWAP_DTYPE bytes.")
        .def("column_bytes", &column_bytes, "name"_a, nb::rv_policy::reference_internal,
             "One column's bytes (a view; the object stays alive while it lives).");
    m.def("columns_adds_above_aos", &aos_adds_above, "events"_a, "key"_a, "above"_a,
          "The filter over the EVENT_DTYPE records themselves (array of structs).");
    m.def("columns_vwap_aos", &aos_vwap, "events"_a,
          "The aggregate over the EVENT_DTYPE records themselves (array of structs).");
    m.def("columns_cpu_level", [] { return static_cast<int>(col::cpu_level()); },
          "The widest filter kernel this CPU runs: 0 scalar, 1 AVX2, 2 AVX-512.");
}
