// Exercise 04_wire/udp_header, reference solution: find the UDP ports and payload in an
// Ethernet frame, trusting no length field until it has been checked against the bytes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace exercise::udp {

struct Udp {
    std::uint16_t src_port = 0;
    std::uint16_t dst_port = 0;
    std::size_t payload_offset = 0;  // where the UDP payload starts in the frame
    std::size_t payload_len = 0;     // its length, from the UDP header
};

inline std::uint16_t be16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

// Ethernet II [802.1Q/802.1ad tags] -> IPv4 -> UDP. False, with out untouched, for
// anything else or anything that does not fit in frame[0, n).
inline bool parse_udp(const std::uint8_t* frame, std::size_t n, Udp& out) {
    // Check that the bytes are there before every read. pos only grows by small steps,
    // so n < pos + 2 cannot overflow; n - pos < 2 would wrap around (to a huge unsigned
    // number) whenever a tag has already taken pos past n.
    if (n < 14) return false;                      // two MAC addresses + EtherType
    std::size_t pos = 12;
    std::uint16_t ethertype = be16(frame + pos);
    while (ethertype == 0x8100 || ethertype == 0x88A8) {
        pos += 4;                                  // TPID + TCI; the EtherType follows
        if (n < pos + 2) return false;
        ethertype = be16(frame + pos);
    }
    if (ethertype != 0x0800) return false;
    const std::uint8_t* ip = frame + pos + 2;
    const std::size_t ip_avail = n - pos - 2;
    if (ip_avail < 20) return false;
    const std::size_t header_len = std::size_t{ip[0] & 0x0Fu} * 4;  // IHL: 32-bit words
    const std::size_t total_len = be16(ip + 2);
    if ((ip[0] >> 4) != 4 || header_len < 20 || total_len < header_len || total_len > ip_avail)
        return false;
    if (be16(ip + 6) & 0x3FFF) return false;       // MF flag or a fragment offset
    if (ip[9] != 17) return false;                 // not UDP
    const std::uint8_t* udp = ip + header_len;
    const std::size_t udp_avail = total_len - header_len;  // bounded by IP, not the frame
    if (udp_avail < 8) return false;
    const std::size_t udp_len = be16(udp + 4);
    if (udp_len < 8 || udp_len > udp_avail) return false;
    out.src_port = be16(udp);
    out.dst_port = be16(udp + 2);
    out.payload_offset = static_cast<std::size_t>(udp + 8 - frame);
    out.payload_len = udp_len - 8;
    return true;
}

}  // namespace exercise::udp
