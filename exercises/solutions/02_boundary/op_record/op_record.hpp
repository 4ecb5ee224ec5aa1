// Exercise 02_boundary/op_record, reference solution: read numpy's OPS_DTYPE records in
// place, as a C++ struct laid out byte for byte like the dtype.
#pragma once
#include <cstddef>
#include <cstdint>

namespace exercise {

// One operation of Book.apply, exactly as contract.dtypes.OPS_DTYPE lays it out:
// "<u8" is std::uint64_t, "<u4" std::uint32_t, "u1" std::uint8_t, and the offsets
// 0, 8, 16, 20, 24, 25 fall out of declaring the fields in the dtype's order.
struct OpRecord {
    std::uint64_t order_id;
    std::uint64_t new_order_id;
    std::uint32_t price;
    std::uint32_t qty;
    std::uint8_t op;
    std::uint8_t side;
    // numpy's itemsize is 32, so 6 bytes follow side. The compiler would pad to 32
    // anyway (the struct's alignment is 8); naming them makes the layout explicit.
    std::uint8_t pad_[6];
};
// If a field moves, the build stops here instead of reading the wrong bytes at run time.
static_assert(sizeof(OpRecord) == 32);
static_assert(offsetof(OpRecord, order_id) == 0);
static_assert(offsetof(OpRecord, new_order_id) == 8);
static_assert(offsetof(OpRecord, price) == 16);
static_assert(offsetof(OpRecord, qty) == 20);
static_assert(offsetof(OpRecord, op) == 24);
static_assert(offsetof(OpRecord, side) == 25);

inline constexpr std::uint8_t kOpLimit = 0;  // OP_LIMIT
inline constexpr std::uint8_t kBuy = 0;      // Side.BUY

// The total qty of the buy limit orders among ops[0..n).
inline std::uint64_t sum_buy_limit_qty(const OpRecord* ops, std::size_t n) {
    // 64 bits: a sum of uint32 quantities passes 2^32 after two large orders.
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (ops[i].op == kOpLimit && ops[i].side == kBuy) total += ops[i].qty;
    }
    return total;
}

}  // namespace exercise
