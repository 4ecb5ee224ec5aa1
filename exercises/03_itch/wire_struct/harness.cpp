// Test harness for wire_struct: one case per line of stdin, one answer per line.
//   size                 -> "size <sizeof(WireReplace)>"
//   be16|be32|be48|be64 <hex>  -> the loader applied to exactly those bytes
//   replace <hex>        -> "ok <locate> <tracking> <timestamp> <order_ref> <new_order_ref>
//                            <shares> <price>" or "no"
// Every input is copied into a heap buffer of exactly its size, so a read past the end
// of the field or message stops the program under AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "itch_wire.hpp"

namespace w = exercise::wire;

static std::unique_ptr<std::uint8_t[]> from_hex(const std::string& hex, std::size_t& n) {
    n = hex.size() / 2;
    auto buf = std::make_unique<std::uint8_t[]>(n);  // exactly n bytes (n may be 0)
    for (std::size_t i = 0; i < n; ++i)
        buf[i] = static_cast<std::uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    return buf;
}

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string op, hex;
        in >> op >> hex;
        std::size_t n = 0;
        auto buf = from_hex(hex, n);
        if (op == "size") {
            std::cout << "size " << sizeof(w::WireReplace) << '\n';
        } else if (op == "be16") {
            std::cout << w::be16(buf.get()) << '\n';
        } else if (op == "be32") {
            std::cout << w::be32(buf.get()) << '\n';
        } else if (op == "be48") {
            std::cout << w::be48(buf.get()) << '\n';
        } else if (op == "be64") {
            std::cout << w::be64(buf.get()) << '\n';
        } else if (op == "replace") {
            w::Replace r;
            if (w::decode_replace(buf.get(), n, r)) {
                std::cout << "ok " << r.locate << ' ' << r.tracking << ' ' << r.timestamp << ' '
                          << r.order_ref << ' ' << r.new_order_ref << ' ' << r.shares << ' '
                          << r.price << '\n';
            } else {
                std::cout << "no\n";
            }
        } else {
            return 2;
        }
    }
    return 0;
}
