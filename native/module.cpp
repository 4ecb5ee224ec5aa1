// The one extension module, optimized._native. Each component registers its own
// bindings from its *_bind.cpp file; this file only lists them.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_book(nb::module_& m);
void register_itch(nb::module_& m);
void register_pcap(nb::module_& m);
void register_orders(nb::module_& m);
void register_gen(nb::module_& m);        // native/harness/: twinmatch gen, not a twin
void register_market(nb::module_& m);
void register_pipeline(nb::module_& m);
void register_capped_ref(nb::module_& m);  // benchmark-only (group "engine")
void register_contract(nb::module_& m);    // the codes and layouts, for one test
void register_journal(nb::module_& m);     // chapter 11: the input journal
void register_columns(nb::module_& m);     // chapter 9: struct of arrays, SIMD filter
void register_feed(nb::module_& m);        // chapter 13: the live feed receiver
void register_tables(nb::module_& m);      // chapter 14: research tables
void register_layouts(nb::module_& m);     // chapter 8: book layouts compared
void register_shard(nb::module_& m);       // chapter 10: sharding by symbol
void register_entry(nb::module_& m);       // chapter 12: the order-entry server
void register_load(nb::module_& m);        // chapter 12: the load client (harness)
void register_trade(nb::module_& m);       // chapter 15: tick to trade

NB_MODULE(_native, m) {
    m.doc() = "twinmatch optimized twins (C++20)";
    m.attr("COMPILER") = TWINMATCH_COMPILER;
    m.attr("BUILD_TYPE") = TWINMATCH_BUILD_TYPE;
    register_book(m);
    register_itch(m);
    register_pcap(m);
    register_orders(m);
    register_gen(m);
    register_market(m);
    register_pipeline(m);
    register_capped_ref(m);
    register_contract(m);
    register_journal(m);
    register_columns(m);
    register_feed(m);
    register_tables(m);
    register_layouts(m);
    register_shard(m);
    register_entry(m);
    register_load(m);
    register_trade(m);
}
