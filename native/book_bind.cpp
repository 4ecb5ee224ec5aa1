// PLACEHOLDER (wip-wire branch only): the book helper owns this file on its branch.
#include <nanobind/nanobind.h>

void register_book(nanobind::module_&) {}
