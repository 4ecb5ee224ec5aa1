// Python bindings of the order-file parsers (optimized/orders.py is their documented face).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>

#include "orders.hpp"

namespace nb = nanobind;
namespace to = twinmatch::orders;

namespace {

using InBuf = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
// The output records, preallocated by Python as a numpy structured array and passed as
// its raw bytes (arr.view(np.uint8)), so C++ writes the records in place.
using OutBuf = nb::ndarray<std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// (records written, problem code, line, field index, fields on that line, header checked)
using ParseResult =
    std::tuple<std::size_t, int, std::uint64_t, std::uint32_t, std::uint32_t, bool>;

template <class Record, class Parse>
ParseResult parse(InBuf data, OutBuf out, std::uint64_t first_line, bool header_checked,
                  Parse fn) {
    to::Error err;
    std::size_t count = 0;
    const std::size_t cap = out.shape(0) / sizeof(Record);
    if (first_line == 0) throw nb::value_error("first_line counts from 1");
    to::LineState state{first_line, header_checked};
    {
        nb::gil_scoped_release release;
        count = fn(data.data(), data.shape(0), reinterpret_cast<Record*>(out.data()), cap, err,
                   state);
    }
    return {count, static_cast<int>(err.problem), err.line, err.field, err.nfields,
            state.header_checked};
}

}  // namespace

void register_orders(nb::module_& m) {
    m.def("parse_csv", [](InBuf data, OutBuf out, std::uint64_t first_line, bool header_checked) {
        return parse<twinmatch::OpRecord>(data, out, first_line, header_checked, to::parse_csv);
    }, nb::arg("data"), nb::arg("out"), nb::arg("first_line"), nb::arg("header_checked"),
       "CSV orders -> OPS_DTYPE records in out;"
       " (count, problem, line, field, nfields, header_checked)");
    m.def("parse_lobster", [](InBuf data, OutBuf out, std::uint64_t first_line,
                              bool header_checked) {
        return parse<twinmatch::LobsterRecord>(data, out, first_line, header_checked,
                                               to::parse_lobster);
    }, nb::arg("data"), nb::arg("out"), nb::arg("first_line"), nb::arg("header_checked"),
       "LOBSTER -> LOBSTER_DTYPE records in out;"
       " (count, problem, line, field, nfields, header_checked)");
    using SkipResult =
        std::tuple<std::size_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>;
    m.def("lobster_to_ops", [](InBuf messages, OutBuf out) -> SkipResult {
        const std::size_t n = messages.shape(0) / sizeof(twinmatch::LobsterRecord);
        if (out.shape(0) / sizeof(twinmatch::OpRecord) < n)
            throw nb::value_error("lobster_to_ops: output too small");
        std::uint64_t skipped[4] = {};
        std::size_t count = 0;
        {
            nb::gil_scoped_release release;
            count = to::lobster_to_ops(messages.data(), n,
                reinterpret_cast<twinmatch::OpRecord*>(out.data()), skipped);
        }
        return {count, skipped[0], skipped[1], skipped[2], skipped[3]};
    }, nb::arg("messages"), nb::arg("out"),
       "LOBSTER_DTYPE bytes -> OPS_DTYPE bytes; (count, hidden, cross, halt, other)");
}
