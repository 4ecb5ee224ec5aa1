// A read-only view of any bytes-like Python object (bytes, mmap, numpy uint8), shared by
// the bindings that read input in place.
#pragma once
#include <cstddef>
#include <cstdint>

#include <nanobind/nanobind.h>

namespace twinmatch {

// Holding the Py_buffer keeps the memory alive and unmoved while the GIL is released,
// so C++ may read it with no Python object in sight.
class ReadBuffer {
public:
    explicit ReadBuffer(nanobind::handle obj) {
        if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0)
            throw nanobind::python_error();
    }
    ~ReadBuffer() { PyBuffer_Release(&view_); }
    ReadBuffer(const ReadBuffer&) = delete;
    ReadBuffer& operator=(const ReadBuffer&) = delete;
    const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(view_.buf); }
    std::size_t size() const { return static_cast<std::size_t>(view_.len); }

private:
    Py_buffer view_{};
};

}  // namespace twinmatch
