// 03_itch/frame_scan: one pass over length-prefixed ITCH messages (reference solution).
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
    // One cursor walks the frames: each frame is read once (the starter found frame i by
    // walking frames 0..i-1 again, so n frames cost n * n / 2 steps).
    std::size_t off = 0;
    while (off != n) {
        const std::size_t len = n - off >= 2 ? be16(p + off) : 0;
        if (len == 0 || n - off - 2 < len) {  // a cut-off prefix, an empty frame, a cut body
            t.end = off;
            return t;
        }
        count_message(p + off + 2, len, t);
        off += 2 + len;
    }
    t.end = n;
    return t;
}

}  // namespace ex03
