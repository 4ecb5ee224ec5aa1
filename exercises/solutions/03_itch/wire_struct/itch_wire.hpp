// Exercise 03_itch/wire_struct, reference solution: big-endian loaders, the 6-byte
// timestamp, and the Order Replace ('U') message as a packed wire struct.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace exercise::wire {

// memcpy into a local is the defined way to read an integer from an address with no
// alignment promise; the compiler turns it into one load. The shifts then put the
// first (most significant) wire byte on top, whatever the machine's byte order.
inline std::uint16_t be16(const std::uint8_t* p) {
    std::uint8_t b[2];
    std::memcpy(b, p, 2);
    return static_cast<std::uint16_t>((b[0] << 8) | b[1]);
}

inline std::uint32_t be32(const std::uint8_t* p) {
    return (std::uint32_t{be16(p)} << 16) | be16(p + 2);
}

inline std::uint64_t be64(const std::uint8_t* p) {
    return (std::uint64_t{be32(p)} << 32) | be32(p + 4);
}

// Exactly 6 bytes: a 2-byte and a 4-byte load. An 8-byte load masked down to 48 bits
// would give the same number but read 2 bytes past the field, and past the buffer when
// the timestamp is the last thing in it.
inline std::uint64_t be48(const std::uint8_t* p) {
    return (std::uint64_t{be16(p)} << 32) | be32(p + 2);
}

// The Order Replace message byte for byte: only byte arrays, so alignment is 1 and the
// compiler inserts no padding; pack(1) states the intent.
#pragma pack(push, 1)
struct WireReplace {
    std::uint8_t type;            // 'U'
    std::uint8_t locate[2];
    std::uint8_t tracking[2];
    std::uint8_t timestamp[6];
    std::uint8_t order_ref[8];
    std::uint8_t new_order_ref[8];
    std::uint8_t shares[4];
    std::uint8_t price[4];
};
#pragma pack(pop)
static_assert(sizeof(WireReplace) == 35, "the spec says an Order Replace is 35 bytes");
static_assert(offsetof(WireReplace, order_ref) == 11 && offsetof(WireReplace, price) == 31);

// The decoded message, in native integers.
struct Replace {
    std::uint16_t locate = 0;
    std::uint16_t tracking = 0;
    std::uint64_t timestamp = 0;
    std::uint64_t order_ref = 0;
    std::uint64_t new_order_ref = 0;
    std::uint32_t shares = 0;
    std::uint32_t price = 0;
};

// Decode the message in p[0, n): false (out untouched) unless it is exactly one 'U'.
// Every field is read at its offsetof in the wire struct; nothing is read before the
// length is checked, and nothing outside p[0, n).
inline bool decode_replace(const std::uint8_t* p, std::size_t n, Replace& out) {
    if (n != sizeof(WireReplace) || p[0] != 'U') return false;
    out.locate = be16(p + offsetof(WireReplace, locate));
    out.tracking = be16(p + offsetof(WireReplace, tracking));
    out.timestamp = be48(p + offsetof(WireReplace, timestamp));
    out.order_ref = be64(p + offsetof(WireReplace, order_ref));
    out.new_order_ref = be64(p + offsetof(WireReplace, new_order_ref));
    out.shares = be32(p + offsetof(WireReplace, shares));
    out.price = be32(p + offsetof(WireReplace, price));
    return true;
}

}  // namespace exercise::wire
