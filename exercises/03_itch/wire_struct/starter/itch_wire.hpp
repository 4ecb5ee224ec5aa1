// Exercise 03_itch/wire_struct: big-endian loaders, the 6-byte timestamp, and the Order
// Replace ('U') message as a packed wire struct. See README.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace exercise::wire {

// The integer whose most significant byte is p[0] (network byte order), on any machine.
inline std::uint16_t be16(const std::uint8_t* p) {
    // TODO: read p[0] and p[1] (memcpy into a local, or index the bytes) and put p[0]
    // in the high byte.
    (void)p;
    return 0;
}

inline std::uint32_t be32(const std::uint8_t* p) {
    // TODO: four bytes, p[0] most significant. Can you build it from two be16 calls?
    (void)p;
    return 0;
}

inline std::uint64_t be64(const std::uint8_t* p) {
    // TODO: eight bytes, p[0] most significant.
    (void)p;
    return 0;
}

// The 6-byte ITCH timestamp: reads p[0] .. p[5] and nothing else.
inline std::uint64_t be48(const std::uint8_t* p) {
    // TODO: six bytes, p[0] most significant. Do not load 8 bytes and mask: the checker
    // puts the timestamp at the very end of a heap buffer.
    (void)p;
    return 0;
}

// The Order Replace message byte for byte (35 bytes in the spec).
#pragma pack(push, 1)
struct WireReplace {
    std::uint8_t type;  // 'U'
    // TODO: the other fields, in wire order, each a std::uint8_t array of the field's
    // width (locate 2, tracking 2, timestamp 6, order_ref 8, new_order_ref 8, shares 4,
    // price 4). Then static_assert the size below.
};
#pragma pack(pop)
// TODO: static_assert(sizeof(WireReplace) == 35, "...");

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
inline bool decode_replace(const std::uint8_t* p, std::size_t n, Replace& out) {
    // TODO: refuse anything that is not exactly sizeof(WireReplace) bytes of type 'U'
    // (check the length before reading p[0]: n may be 0). Then read each field at
    // p + offsetof(WireReplace, field) with the loader of its width.
    (void)p;
    (void)n;
    (void)out;
    return false;
}

}  // namespace exercise::wire
