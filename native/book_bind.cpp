// Placeholder (wip-itch branch only): the lead drops this at merge in favour of the book's bindings.
#include <nanobind/nanobind.h>
void register_book(nanobind::module_&) {}
