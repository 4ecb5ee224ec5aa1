// Exercise 01_order_book/bitset_scan: the highest set bit of a bitset held in 64-bit words.
#pragma once
#include <bit>
#include <cstdint>

// Index (w * 64 + b) of the highest set bit in words[0..n), or -1 if there is none.
inline int highest_set(const std::uint64_t* words, int n) {
    // TODO: scan the words from the top (w = n - 1 down to 0); in the first non-zero
    // word, find the highest set bit without looping over its 64 bits.
    (void)words;
    (void)n;
    return -1;
}
