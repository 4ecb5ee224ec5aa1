// Exercise 02_boundary/op_record: read numpy's OPS_DTYPE records in place, as a C++
// struct laid out byte for byte like the dtype (see contract/dtypes.py).
#pragma once
#include <cstddef>
#include <cstdint>

namespace exercise {

// One operation of Book.apply, as contract.dtypes.OPS_DTYPE lays it out.
// TODO: this struct lists the fields in the order you might read a message (what,
// which side, which order, ...) and its ids are too narrow. Make it match OPS_DTYPE:
// the dtype's fields in the dtype's order, each as wide as its numpy format ("<u8",
// "<u4", "u1"), so that every offset and the total size are the dtype's.
// (Its sizeof is already 32. Is that enough to be right?)
struct OpRecord {
    std::uint8_t op;
    std::uint8_t side;
    std::uint32_t order_id;
    std::uint32_t price;
    std::uint32_t qty;
    std::uint32_t new_order_id;
    std::uint8_t pad_[12];
};
// TODO: static_assert the size and every field's offset (offsetof, from <cstddef>), so
// a layout that disagrees with numpy stops the build instead of giving wrong answers.

inline constexpr std::uint8_t kOpLimit = 0;  // OP_LIMIT
inline constexpr std::uint8_t kBuy = 0;      // Side.BUY

// The total qty of the buy limit orders among ops[0..n).
inline std::uint64_t sum_buy_limit_qty(const OpRecord* ops, std::size_t n) {
    // TODO: add up the qty of the records that are limit orders on the buy side. How
    // wide must the running total be when each qty can be 2^32 - 1?
    (void)ops;
    (void)n;
    return 0;
}

}  // namespace exercise
