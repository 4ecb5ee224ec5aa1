// _exercises: the C++ exercises' headers compiled into an extension module of their own
// (exercises/native/CMakeLists.txt), never into optimized._native, so that a learner's
// starter that does not compile yet breaks nothing but this module. Built on demand from
// the starters (or the reference solutions), a learner's edit takes effect on the next
// build:
//
//     from exercise_support import load_native      # exercises/ on sys.path
//     ex = load_native()                            # compiles what changed, then imports
//     ex.highest_set(np.array([0, 1 << 5], dtype=np.uint64))    # 69
//
// (The checkers compile the same headers into a small program under sanitizers; these
// bindings are for trying an idea from Python.)
#include <cstddef>
#include <cstdint>
#include <limits>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "highest_set.hpp"  // exercises/01_order_book/bitset_scan/starter/
#include "op_record.hpp"    // exercises/02_boundary/op_record/starter/
#include "itch_wire.hpp"    // exercises/03_itch/wire_struct/starter/
#include "udp_frame.hpp"    // exercises/04_wire/udp_header/starter/
#include "cached_ring.hpp"  // exercises/06_pipeline/cached_ring/starter/
#include "node_pool.hpp"    // exercises/01_order_book/node_align/starter/
#include "flat_levels.hpp"  // exercises/01_order_book/flat_levels/starter/
#include "order_pool.hpp"   // exercises/01_order_book/free_list/starter/
#include "frame_scan.hpp"   // exercises/03_itch/frame_scan/starter/
#include "ref_table.hpp"    // exercises/05_many_books/ref_hash/starter/
#include "publish_ring.hpp" // exercises/06_pipeline/memory_order/starter/
#include "fill_ring.hpp"    // exercises/06_pipeline/backpressure/starter/
#include "records_view.hpp"

#include <chrono>
#include <thread>
#include <tuple>
#include <nanobind/stl/tuple.h>
#include <vector>

namespace nb = nanobind;

namespace {

using Words = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

int highest_set_py(const Words& words) {
    if (words.shape(0) > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw nb::value_error("highest_set: too many words for an int count");
    return highest_set(words.data(), static_cast<int>(words.shape(0)));
}

std::uint64_t sum_buy_limit_qty_py(nb::handle ops_in) {
    using exercise::OpRecord;
    twinmatch::RecordsView ops(ops_in, "OPS_DTYPE", "ops");
    // The learner's struct may still be wrong: refuse to read records of another size
    // (that would run past the end of the array) rather than trust it.
    if (sizeof(OpRecord) != 32)
        throw nb::value_error(nb::str("exercise::OpRecord is {} bytes but OPS_DTYPE records "
                                      "are 32 (exercises/02_boundary/op_record/starter/op_record.hpp)")
                                  .format(sizeof(OpRecord)).c_str());
    if (reinterpret_cast<std::uintptr_t>(ops.data()) % alignof(OpRecord) != 0)
        throw nb::value_error("ops: the array's data is not aligned for OpRecord");
    const auto* records = static_cast<const OpRecord*>(ops.data());
    return exercise::sum_buy_limit_qty(records, ops.bytes() / sizeof(OpRecord));
}

// 03_itch/wire_struct: the learner's be48 on exactly 6 bytes, and decode_replace on one
// message. Python bytes are read in place; the size is checked before the call.
std::uint64_t itch_be48_py(const nb::bytes& raw) {
    if (raw.size() != 6) throw nb::value_error("itch_be48: give exactly 6 bytes");
    return exercise::wire::be48(reinterpret_cast<const std::uint8_t*>(raw.c_str()));
}

nb::object decode_replace_py(const nb::bytes& message) {
    exercise::wire::Replace r;
    if (!exercise::wire::decode_replace(reinterpret_cast<const std::uint8_t*>(message.c_str()),
                                        message.size(), r))
        return nb::none();
    return nb::make_tuple(r.locate, r.tracking, r.timestamp, r.order_ref, r.new_order_ref,
                          r.shares, r.price);
}

// 04_wire/udp_header: (src port, dst port, payload offset, payload length) or None.
nb::object parse_udp_py(const nb::bytes& frame) {
    exercise::udp::Udp u;
    if (!exercise::udp::parse_udp(reinterpret_cast<const std::uint8_t*>(frame.c_str()),
                                  frame.size(), u))
        return nb::none();
    return nb::make_tuple(u.src_port, u.dst_port, u.payload_offset, u.payload_len);
}

// Two threads pass `items` numbers through the learner's ring (yield when full/empty):
// (received, in_order, remote index reads, seconds).
std::tuple<std::uint64_t, bool, std::uint64_t, double> cached_ring_stress_py(
    std::uint64_t items, std::uint64_t capacity) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        throw nb::value_error("capacity must be a power of two >= 2");
    ex06::CachedRing<std::uint64_t> ring(capacity);
    std::uint64_t received = 0;
    bool in_order = true;
    auto t0 = std::chrono::steady_clock::now();
    {
        nb::gil_scoped_release nogil;
        std::thread consumer([&] {
            std::uint64_t v;
            while (received < items) {
                if (ring.try_pop(v)) in_order &= v == received++;
                else std::this_thread::yield();
            }
        });
        for (std::uint64_t i = 0; i < items; ++i)
            while (!ring.try_push(i)) std::this_thread::yield();
        consumer.join();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {received, in_order, ring.remote_loads(), s};
}

// 01_order_book/node_align: how many of a new pool's nodes straddle two cache lines,
// and where the pool starts relative to a line: (straddling, start address % 64).
std::tuple<std::uint64_t, std::uint64_t> node_pool_straddles(std::size_t capacity) {
    if (capacity == 0 || capacity > (std::size_t{1} << 24))
        throw nb::value_error("capacity must be 1 .. 2**24 nodes");
    ex01::NodePool pool(capacity);
    std::uint64_t straddling = 0;
    for (std::size_t i = 0; i < pool.capacity(); ++i) {
        const auto a = reinterpret_cast<std::uintptr_t>(pool.data() + i);
        straddling += a / 64 != (a + sizeof(ex01::Node) - 1) / 64;
    }
    return {straddling, reinterpret_cast<std::uintptr_t>(pool.data()) % 64};
}

// 01_order_book/free_list: acquire a, b; release a; acquire c: is c a's node? (The
// checker's harness also counts the allocations, which only a program of its own can.)
bool order_pool_reuses() {
    ex01::OrderPool pool;
    ex01::Order* a = pool.acquire(1, 1);
    ex01::Order* b = pool.acquire(2, 2);
    pool.release(a);
    ex01::Order* c = pool.acquire(3, 3);
    const bool same = c == a;
    pool.release(b);
    pool.release(c);
    return same;
}

// 01_order_book/flat_levels: the learner's Levels, with the header's preconditions (a
// price inside the window, never more removed than rests) checked here, from Python.
class LevelsPy {
public:
    LevelsPy(std::uint32_t lo, std::uint32_t span) : levels_(lo, span) {
        if (span == 0 || span > (1u << 24) || lo == 0 ||
            static_cast<std::uint64_t>(lo) + span > (std::uint64_t{1} << 32))
            throw nb::value_error("need lo >= 1, 1 <= span <= 2**24, lo + span <= 2**32");
    }
    void add(std::uint32_t price, std::uint64_t qty) {
        check(price);
        if (qty == 0) throw nb::value_error("qty must be positive");
        levels_.add(price, qty);
    }
    void remove(std::uint32_t price, std::uint64_t qty) {
        check(price);
        if (qty == 0 || qty > levels_.at(price))
            throw nb::value_error("remove: 1 .. the shares resting at that price");
        levels_.remove(price, qty);
    }
    std::uint64_t at(std::uint32_t price) const {
        check(price);
        return levels_.at(price);
    }
    std::uint32_t best() const { return levels_.best(); }

private:
    void check(std::uint32_t price) const {
        if (price < levels_.lo() || price - levels_.lo() >= levels_.span())
            throw nb::value_error("price outside the window [lo, lo + span)");
    }
    ex01::Levels levels_;
};

// 03_itch/frame_scan: (messages, adds, shares_added, short_adds, end) of a buffer.
std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::size_t>
frame_scan_py(const nb::bytes& buffer) {
    const ex03::Totals t =
        ex03::scan(reinterpret_cast<const std::uint8_t*>(buffer.c_str()), buffer.size());
    return {t.messages, t.adds, t.shares_added, t.short_adds, t.end};
}

// 05_many_books/ref_hash: insert `refs` into a table of `capacity` slots, look each one up
// again: (inserted, slots looked at by the lookups).
std::tuple<std::uint64_t, std::uint64_t> ref_table_probes(
    const nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>& refs,
    std::size_t capacity) {
    if (capacity < 2 || capacity > (std::size_t{1} << 26) || (capacity & (capacity - 1)))
        throw nb::value_error("capacity must be a power of two, 2 .. 2**26");
    ex05::RefTable table(capacity);
    std::uint64_t inserted = 0;
    for (std::size_t i = 0; i < refs.shape(0); ++i)
        inserted += table.insert(refs.data()[i], static_cast<std::uint32_t>(i));
    table.reset_probes();
    for (std::size_t i = 0; i < refs.shape(0); ++i) (void)table.find(refs.data()[i]);
    return {inserted, table.probes()};
}

// 06_pipeline/memory_order: two threads through the learner's PublishRing:
// (received, in_order, intact). Run it under ThreadSanitizer with the checker's harness.
std::tuple<std::uint64_t, bool, bool> publish_ring_stress(std::uint64_t items,
                                                          std::uint64_t capacity) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        throw nb::value_error("capacity must be a power of two >= 2");
    ex06::PublishRing<ex06::Event> ring(capacity);
    std::uint64_t received = 0;
    bool in_order = true, intact = true;
    {
        nb::gil_scoped_release nogil;
        std::thread consumer([&] {
            ex06::Event e{};
            while (received < items) {
                if (!ring.try_pop(e)) {
                    std::this_thread::yield();
                    continue;
                }
                in_order &= e.seq == received;
                intact &= e.order_ref == e.seq * 3 + 1;
                ++received;
            }
        });
        for (std::uint64_t i = 0; i < items; ++i)
            while (!ring.try_push(ex06::Event{i, i * 3 + 1, 1, 1})) std::this_thread::yield();
        consumer.join();
    }
    return {received, in_order, intact};
}

// 06_pipeline/backpressure: `pushes` pushes into an empty ring of `capacity` slots and
// no pops, then pop everything: (accepted, popped, popped in order).
std::tuple<std::uint64_t, std::uint64_t, bool> fill_ring_fill(std::uint64_t capacity,
                                                              std::uint64_t pushes) {
    if (capacity < 2 || capacity > (1u << 24) || (capacity & (capacity - 1)) != 0)
        throw nb::value_error("capacity must be a power of two, 2 .. 2**24");
    ex06::FillRing<ex06::FillRecord> ring(capacity);
    std::uint64_t accepted = 0, popped = 0;
    bool in_order = true;
    for (std::uint64_t i = 0; i < pushes; ++i) accepted += ring.try_push({i, i, 1, 1});
    ex06::FillRecord f{};
    while (popped <= pushes && ring.try_pop(f)) in_order &= f.seq == popped++;
    return {accepted, popped, in_order};
}

}  // namespace

NB_MODULE(_exercises, ex) {
    ex.doc() = "The C++ exercises' headers (starters or solutions), built on demand.";
    ex.def("highest_set", &highest_set_py, nb::arg("words"),
           "01_order_book/bitset_scan: index of the highest set bit in a uint64 array, or -1.");
    ex.def("sum_buy_limit_qty", &sum_buy_limit_qty_py, nb::arg("ops"),
           "02_boundary/op_record: total qty of the buy limit orders in an OPS_DTYPE array.");
    ex.attr("RECORD_SIZE") = sizeof(exercise::OpRecord);
    ex.def("itch_be48", &itch_be48_py, nb::arg("raw"),
           "03_itch/wire_struct: the 6-byte big-endian timestamp in `raw` (exactly 6 bytes).");
    ex.def("decode_replace", &decode_replace_py, nb::arg("message"),
           "03_itch/wire_struct: an Order Replace message as (locate, tracking, timestamp, "
           "order_ref, new_order_ref, shares, price), or None if it is not one.");
    ex.attr("WIRE_REPLACE_SIZE") = sizeof(exercise::wire::WireReplace);
    ex.def("parse_udp", &parse_udp_py, nb::arg("frame"),
           "04_wire/udp_header: (src_port, dst_port, payload_offset, payload_len) of an "
           "Ethernet/IPv4/UDP frame, or None.");
    ex.def("cached_ring_stress", &cached_ring_stress_py, nb::arg("items"), nb::arg("capacity"),
           "06_pipeline/cached_ring: two threads through the learner's ring: (received, "
           "in_order, remote index reads, seconds).");
    ex.def("node_pool_straddles", &node_pool_straddles, nb::arg("capacity"),
           "01_order_book/node_align: (nodes straddling two cache lines, pool start % 64) "
           "of a new pool.");
    ex.attr("NODE_SIZE") = sizeof(ex01::Node);
    ex.def("order_pool_reuses", &order_pool_reuses,
           "01_order_book/free_list: is the node released last the next one acquired?");
    nb::class_<LevelsPy>(ex, "Levels",
                         "01_order_book/flat_levels: one side's levels in [lo, lo + span).")
        .def(nb::init<std::uint32_t, std::uint32_t>(), nb::arg("lo"), nb::arg("span"))
        .def("add", &LevelsPy::add, nb::arg("price"), nb::arg("qty"))
        .def("remove", &LevelsPy::remove, nb::arg("price"), nb::arg("qty"))
        .def("at", &LevelsPy::at, nb::arg("price"))
        .def("best", &LevelsPy::best);
    ex.def("frame_scan", &frame_scan_py, nb::arg("buffer"),
           "03_itch/frame_scan: (messages, adds, shares_added, short_adds, end) of a buffer "
           "of length-prefixed messages.");
    ex.def("hash_ref", &ex05::hash_ref, nb::arg("ref"),
           "05_many_books/ref_hash: the learner's hash of an order reference.");
    ex.def("ref_table_probes", &ref_table_probes, nb::arg("refs"), nb::arg("capacity"),
           "05_many_books/ref_hash: insert refs (uint64 array), look each up: (inserted, "
           "slots looked at by the lookups).");
    ex.def("publish_ring_stress", &publish_ring_stress, nb::arg("items"), nb::arg("capacity"),
           "06_pipeline/memory_order: two threads through the learner's ring: (received, "
           "in_order, intact). Only ThreadSanitizer (the checker) can prove it right.");
    ex.def("fill_ring_fill", &fill_ring_fill, nb::arg("capacity"), nb::arg("pushes"),
           "06_pipeline/backpressure: pushes into an empty ring, no pops, then pop all: "
           "(accepted, popped, in_order).");
}
