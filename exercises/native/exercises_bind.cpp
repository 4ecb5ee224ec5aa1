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
#include "records_view.hpp"

#include <chrono>
#include <thread>
#include <tuple>
#include <nanobind/stl/tuple.h>

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
}
