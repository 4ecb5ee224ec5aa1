// Python bindings for native/itch.hpp (optimized.itch is the typed face over these).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdlib>
#include <new>

#include "itch.hpp"

namespace nb = nanobind;
using twinmatch::ItchEvent;
namespace itch = twinmatch::itch;

namespace {

// A read-only view of any bytes-like object (bytes, bytearray, mmap, memoryview, numpy
// uint8). Holding the Py_buffer keeps the exporter from resizing or freeing the memory
// while the GIL is released; the destructor gives it back.
class ReadBuffer {
public:
    explicit ReadBuffer(nb::handle obj) {
        if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0) throw nb::python_error();
    }
    ~ReadBuffer() { PyBuffer_Release(&view_); }
    ReadBuffer(const ReadBuffer&) = delete;
    ReadBuffer& operator=(const ReadBuffer&) = delete;
    const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(view_.buf); }
    std::size_t size() const { return static_cast<std::size_t>(view_.len); }

private:
    Py_buffer view_{};
};

using U8Array = nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>;
using U64Array = nb::ndarray<nb::numpy, std::uint64_t, nb::ndim<1>>;

// A malloc'd block handed to numpy: the capsule frees it when the array dies.
template <class T>
T* checked_malloc(std::size_t count) {
    void* p = std::malloc(count * sizeof(T) + 1);  // +1: never malloc(0)
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
}

// --8<-- [start:bind_scan]
// scan(buffer) -> (events as uint8 bytes, counts[256], consumed, error, type, length).
// The output is sized for the worst case (every record an S event) once, before the loop,
// so the loop never allocates; untouched pages of that block cost nothing, and realloc
// gives the rest back afterwards.
nb::tuple scan(nb::handle buffer) {
    ReadBuffer in(buffer);
    const std::size_t cap = in.size() / itch::kMinEventRecord;
    auto* events = checked_malloc<ItchEvent>(cap);
    auto* counts = checked_malloc<std::uint64_t>(256);
    std::fill(counts, counts + 256, 0);
    itch::ScanResult r;
    {
        nb::gil_scoped_release no_gil;  // pure C++ from here: other Python threads may run
        r = itch::scan(in.data(), in.size(), events, counts);
    }
    const std::size_t bytes = r.events * sizeof(ItchEvent);
    if (void* shrunk = std::realloc(events, bytes + 1)) events = static_cast<ItchEvent*>(shrunk);
    nb::capsule ev_owner(events, [](void* p) noexcept { std::free(p); });
    nb::capsule ct_owner(counts, [](void* p) noexcept { std::free(p); });
    U8Array ev(reinterpret_cast<std::uint8_t*>(events), {bytes}, ev_owner);
    U64Array ct(counts, {std::size_t{256}}, ct_owner);
    return nb::make_tuple(ev, ct, r.consumed, static_cast<int>(r.error),
                          static_cast<int>(r.error_type), static_cast<int>(r.error_length));
}
// --8<-- [end:bind_scan]

std::uint64_t sum_bytes(nb::handle buffer) {
    ReadBuffer in(buffer);
    nb::gil_scoped_release no_gil;
    return itch::sum_bytes(in.data(), in.size());
}

}  // namespace

void register_itch(nb::module_& m) {
    m.def("itch_scan", &scan, nb::arg("buffer"),
          "Decode the whole ITCH records at the start of a bytes-like buffer (GIL released).");
    m.def("itch_sum_bytes", &sum_bytes, nb::arg("buffer"),
          "Sum a buffer as 8-byte words: one plain sequential read, the bandwidth ceiling.");
    nb::list lengths;
    for (auto v : itch::kLength) lengths.append(static_cast<int>(v));
    m.attr("ITCH_LENGTHS") = lengths;
    m.attr("ITCH_EVENT_SIZE") = sizeof(ItchEvent);
}
