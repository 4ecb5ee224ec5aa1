// Python bindings of the capped flat-array reference (native/capped_ref.hpp), used only by
// the "engine" benchmarks (tests/bench/test_bench_engine.py). Not a twin.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "capped_ref.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;

namespace {

using InBuf = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// The reference, its fills vector, and a busy flag: run() releases the GIL, and a second
// thread running the same reference meanwhile would share its arrays.
struct BoundRef {
    CappedRef ref;
    std::vector<FillRecord> fills;
    bool busy = false;
    BoundRef(const ItchEvent* ev, std::size_t n, std::uint64_t max_refs) : ref(ev, n, max_refs) {}
};

}  // namespace

void register_capped_ref(nb::module_& m) {
    nb::class_<BoundRef>(m, "CappedRef",
                         "Benchmark-only capped flat-array matching engine (capped_ref.hpp).")
        .def(
            "__init__",
            [](BoundRef* self, InBuf events, std::uint64_t max_refs) {
                if (events.shape(0) % sizeof(ItchEvent) != 0)
                    throw nb::value_error("events: byte length is not a multiple of 56");
                const auto* ev = reinterpret_cast<const ItchEvent*>(events.data());
                try {
                    new (self) BoundRef(ev, events.shape(0) / sizeof(ItchEvent), max_refs);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            },
            "events"_a, "max_refs"_a,
            nb::sig("def __init__(self, events: numpy.typing.NDArray[numpy.uint8], "
                    "max_refs: int) -> None"),
            "Check and copy EVENT_DTYPE records (as raw bytes): A adds for locate 1 only,\n"
            "prices 1..100,000, references 1..max_refs, each once (ValueError otherwise).")
        .def_prop_ro("adds", [](BoundRef& b) { return b.ref.adds(); })
        .def(
            "run",
            [](BoundRef& b) {
                if (b.busy) throw std::runtime_error("CappedRef is busy in another thread");
                b.fills.clear();
                b.busy = true;
                try {
                    nb::gil_scoped_release nogil;
                    b.ref.run(b.fills);  // throws only std::bad_alloc, before any matching
                } catch (...) {
                    b.busy = false;
                    throw;
                }
                b.busy = false;
                nb::object dtypes = nb::module_::import_("contract.dtypes");
                nb::object np = nb::module_::import_("numpy");
                nb::object a = np.attr("zeros")(b.fills.size(),
                                                "dtype"_a = dtypes.attr("FILL_DTYPE"));
                if (!b.fills.empty()) {
                    Py_buffer view;
                    if (PyObject_GetBuffer(a.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE))
                        throw nb::python_error();
                    std::memcpy(view.buf, b.fills.data(), b.fills.size() * sizeof(FillRecord));
                    PyBuffer_Release(&view);
                }
                return a;
            },
            nb::sig("def run(self) -> numpy.typing.NDArray[numpy.void]"),
            "Match every add from an empty book; returns the fills (FILL_DTYPE).")
        .def("resting",
             [](BoundRef& b) {
                 if (b.busy) throw std::runtime_error("CappedRef is busy in another thread");
                 return b.ref.resting();
             },
             "Orders resting after the last run().");
}
