// A batch API's numpy array, seen from C++ as plain bytes: the array goes through
// contract.dtypes.as_records (the checks every twin makes: the dtype, or the same fields
// in another layout, converted; one dimension; C-contiguous), then its buffer is held
// until the view goes out of scope. Shared by the books' apply() and the exercises.
#pragma once

#include <cstddef>

#include <nanobind/nanobind.h>

namespace twinmatch {

class RecordsView {
public:
    // dtype_name: an attribute of contract.dtypes ("OPS_DTYPE"); what: the argument's
    // name in error messages ("ops").
    RecordsView(nanobind::handle arr, const char* dtype_name, const char* what) {
        nanobind::object dtypes = nanobind::module_::import_("contract.dtypes");
        arr_ = dtypes.attr("as_records")(arr, dtypes.attr(dtype_name), what);
        if (PyObject_GetBuffer(arr_.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0)
            throw nanobind::python_error();
    }
    ~RecordsView() { PyBuffer_Release(&view_); }
    RecordsView(const RecordsView&) = delete;
    RecordsView& operator=(const RecordsView&) = delete;

    const void* data() const { return view_.buf; }
    std::size_t bytes() const { return static_cast<std::size_t>(view_.len); }

private:
    nanobind::object arr_;  // keeps the (possibly converted) array alive
    Py_buffer view_{};
};

}  // namespace twinmatch
