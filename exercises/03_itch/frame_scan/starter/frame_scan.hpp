// 03_itch/frame_scan: one pass over length-prefixed ITCH messages (starter).
//
// TODO: the results are right. On a file of a few thousand messages it is already slow,
// and it gets slower faster than the file gets longer: profile it (see the README) before
// you read on, then make the scan one pass. Keep every result the same, and every bound
// checked.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ex03 {

inline std::uint32_t be16(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) << 8 | p[1];
}
inline std::uint32_t be32(const std::uint8_t* p) {
    return be16(p) << 16 | be16(p + 2);
}

struct Totals {
    std::uint64_t messages = 0;      // whole frames seen
    std::uint64_t adds = 0;          // 'A' and 'F' messages (Add Order, with or without MPID)
    std::uint64_t shares_added = 0;  // their shares (bytes 20..23 of the message)
    std::uint64_t short_adds = 0;    // 'A' shorter than 36 bytes or 'F' shorter than 40
    std::size_t end = 0;             // where the scan stopped: n, or the offset of the
                                     // first frame that is empty or runs past the end
};

// The offset of the i-th frame (its 2-byte length prefix), given that frames 0..i-1 are
// whole.
inline std::size_t frame_offset(const std::uint8_t* p, std::size_t i) {
    std::size_t off = 0;
    for (std::size_t k = 0; k < i; ++k) off += 2 + be16(p + off);
    return off;
}

inline void count_message(const std::uint8_t* m, std::size_t len, Totals& t) {
    ++t.messages;
    const bool add = m[0] == 'A' || m[0] == 'F';
    if (!add) return;
    ++t.adds;
    if (len < (m[0] == 'A' ? 36u : 40u)) {
        ++t.short_adds;
        return;
    }
    t.shares_added += be32(m + 20);
}

inline Totals scan(const std::uint8_t* p, std::size_t n) {
    Totals t;
    for (std::size_t i = 0;; ++i) {
        const std::size_t off = frame_offset(p, i);
        if (off == n) {
            t.end = n;
            return t;
        }
        const std::size_t len = n - off >= 2 ? be16(p + off) : 0;
        if (len == 0 || n - off - 2 < len) {  // a cut-off prefix, an empty frame, a cut body
            t.end = off;
            return t;
        }
        count_message(p + off + 2, len, t);
    }
}

}  // namespace ex03
