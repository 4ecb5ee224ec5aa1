// PLACEHOLDER (branch wip-ex only): main's module.cpp calls register_book, which the
// native book branch (wip-book) provides. This empty definition lets the extension link
// here; drop this file when merging (wip-book's book_bind.cpp replaces it).
#include <nanobind/nanobind.h>

void register_book(nanobind::module_&) {}
