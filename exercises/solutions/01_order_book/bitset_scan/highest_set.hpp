// Exercise 01_order_book/bitset_scan, reference solution.
#pragma once
#include <bit>
#include <cstdint>

// Index (w * 64 + b) of the highest set bit in words[0..n), or -1 if there is none.
inline int highest_set(const std::uint64_t* words, int n) {
    for (int w = n - 1; w >= 0; --w) {
        if (words[w] != 0) {
            // countl_zero counts the zero bits above the highest set one: a single
            // instruction (LZCNT) instead of a loop over 64 bits.
            return w * 64 + 63 - std::countl_zero(words[w]);
        }
    }
    return -1;
}
