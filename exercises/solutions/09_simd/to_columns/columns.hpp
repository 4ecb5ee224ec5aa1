// Exercise 09_simd/to_columns: from an array of structs to a struct of arrays.
//
// `filter_aos` below is chapter 9's filter over the 56-byte records (given: it is the
// reference). Your task: fill `to_columns` so that it copies the three fields the
// filter reads into three columns, and write `filter_soa`, the same filter over them.
// The checker wants the same indices as filter_aos, and far fewer first-level cache
// misses per row (counted by valgrind, so a busy machine does not move the number).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ex09 {

// The decoders' event record (ItchEvent in native/dtypes.hpp): 56 bytes.
struct Event {
    std::uint64_t timestamp, order_ref, new_order_ref, match_number;
    std::uint32_t shares, price;
    std::uint16_t locate;
    std::uint8_t type, side, printable, pad_[3];
    char stock[8];  // space-padded ASCII
};
static_assert(sizeof(Event) == 56);

inline std::uint64_t stock_key(const char* stock8) {
    std::uint64_t k;
    std::memcpy(&k, stock8, 8);  // the 8 bytes as one integer: one compare, not eight
    return k;
}

// Indices of every add (type 'A' or 'F') of the stock `key` priced above `above`.
inline std::size_t filter_aos(const Event* ev, std::size_t n, std::uint64_t key,
                              std::uint32_t above, std::int64_t* out) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool add = ev[i].type == 'A' || ev[i].type == 'F';
        const bool hit = add & (stock_key(ev[i].stock) == key) & (ev[i].price > above);
        out[k] = static_cast<std::int64_t>(i);  // written always, kept only on a hit
        k += hit;
    }
    return k;
}

// The struct of arrays: column[i] is that field of event i.
struct Columns {
    std::vector<std::uint8_t> type;
    std::vector<std::uint64_t> stock;  // stock_key() of each event
    std::vector<std::uint32_t> price;
};

inline Columns to_columns(const Event* ev, std::size_t n) {
    Columns c;
    c.type.resize(n);
    c.stock.resize(n);
    c.price.resize(n);
    for (std::size_t i = 0; i < n; ++i) {  // read each record once, write three columns
        c.type[i] = ev[i].type;
        c.stock[i] = stock_key(ev[i].stock);
        c.price[i] = ev[i].price;
    }
    return c;
}

// The same indices as filter_aos, reading the columns only.
inline std::size_t filter_soa(const Columns& c, std::uint64_t key, std::uint32_t above,
                              std::int64_t* out) {
    // The same branch-free loop; a row now costs 13 bytes of reading, not a 56-byte record.
    const std::size_t n = c.type.size();
    const std::uint8_t* type = c.type.data();
    const std::uint64_t* stock = c.stock.data();
    const std::uint32_t* price = c.price.data();
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool add = type[i] == 'A' || type[i] == 'F';
        const bool hit = add & (stock[i] == key) & (price[i] > above);
        out[k] = static_cast<std::int64_t>(i);
        k += hit;
    }
    return k;
}

}  // namespace ex09
