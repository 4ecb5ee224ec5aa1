// Test harness for udp_header: one frame per line of stdin, in hex (an empty line is a
// 0-byte frame). Prints "ok <src_port> <dst_port> <payload_offset> <payload_len>" or "no".
// Each frame is copied into a heap buffer of exactly its size, so a read past the end
// stops the program under AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "udp_frame.hpp"

int main() {
    std::string hex;
    while (std::getline(std::cin, hex)) {
        const std::size_t n = hex.size() / 2;
        auto frame = std::make_unique<std::uint8_t[]>(n);
        for (std::size_t i = 0; i < n; ++i)
            frame[i] = static_cast<std::uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
        exercise::udp::Udp u;
        if (exercise::udp::parse_udp(frame.get(), n, u)) {
            std::cout << "ok " << u.src_port << ' ' << u.dst_port << ' ' << u.payload_offset
                      << ' ' << u.payload_len << '\n';
        } else {
            std::cout << "no\n";
        }
    }
    return 0;
}
