// Feed text as report text: the one rule of contract/feed_text.py, for the C++ twins.
// ITCH text fields are raw bytes; a hostile feed can hold any byte, and a report must
// still be valid ASCII that compares byte for byte with the Python twin's.
#pragma once
#include <cstddef>
#include <string>

namespace twinmatch {

// --8<-- [start:show_bytes]
// Printable ASCII as itself, except backslash (the escape), comma (the CSV separator)
// and double quote (the CSV quote); any other byte as \xNN (two lowercase hex digits).
inline std::string show_bytes(const char* p, std::size_t n) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        auto c = static_cast<unsigned char>(p[i]);
        if (c >= 0x20 && c <= 0x7e && c != '\\' && c != ',' && c != '"') {
            s += static_cast<char>(c);
        } else {
            s += "\\x";
            s += kHex[c >> 4];
            s += kHex[c & 15];
        }
    }
    return s;
}
// A stock name: its 8 bytes with trailing spaces (only spaces) cut, then show_bytes.
inline std::string show_stock(const char* p8) {
    std::size_t n = 8;
    while (n > 0 && p8[n - 1] == ' ') --n;
    return show_bytes(p8, n);
}
// --8<-- [end:show_bytes]

// A message type byte as a report key.
inline std::string type_key(int t) {
    const char c = static_cast<char>(t);
    return show_bytes(&c, 1);
}

}  // namespace twinmatch
