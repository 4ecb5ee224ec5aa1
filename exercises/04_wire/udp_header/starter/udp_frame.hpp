// Exercise 04_wire/udp_header: find the UDP ports and payload in an Ethernet frame,
// trusting no length field until it has been checked against the bytes. See README.md.
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
    // TODO, in this order, returning false as soon as something is wrong:
    //  1. Ethernet: 14 bytes at least; the EtherType at offset 12. While it is a VLAN tag
    //     (0x8100 or 0x88A8), skip 4 bytes and read the next EtherType (check it is there).
    //     It must then be 0x0800 (IPv4).
    //  2. IPv4: 20 bytes at least. Version (high nibble of byte 0) 4; header length =
    //     low nibble * 4, at least 20; total length (bytes 2-3) at least the header
    //     length and no more than the bytes left; no fragment (bytes 6-7 & 0x3FFF);
    //     protocol (byte 9) 17.
    //  3. UDP starts after the IPv4 header and ends at the IPv4 total length (not at the
    //     end of the frame: Ethernet pads short frames). 8 bytes at least; its length
    //     field (bytes 4-5) at least 8 and within those bytes. Ports at 0 and 2.
    (void)frame;
    (void)n;
    (void)out;
    return false;
}

}  // namespace exercise::udp
