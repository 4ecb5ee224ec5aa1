// 01_order_book/flat_levels: one side's price levels in flat arrays (reference solution).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ex01 {

// The total shares resting at each price of one side (the buy side: the best price is
// the highest), for prices in the window [lo, lo + span). The caller never passes a price
// outside the window, and never removes more than rests at a price.
class Levels {
public:
    Levels(std::uint32_t lo, std::uint32_t span)
        : lo_(lo), span_(span), qty_(span, 0), words_((span + 63) / 64, 0) {}

    // O(1): one array slot, one bit, one comparison with the cached best.
    void add(std::uint32_t price, std::uint64_t qty) {
        const std::size_t i = price - lo_;
        qty_[i] += qty;
        words_[i / 64] |= std::uint64_t{1} << (i % 64);
        if (!any_ || i > best_) best_ = i;
        any_ = true;
    }

    void remove(std::uint32_t price, std::uint64_t qty) {
        const std::size_t i = price - lo_;
        qty_[i] -= qty;
        if (qty_[i] != 0) return;
        words_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
        if (i == best_) find_best_below(i);
    }

    std::uint64_t at(std::uint32_t price) const { return qty_[price - lo_]; }

    // The highest price with shares resting, or 0 when the side is empty.
    std::uint32_t best() const { return any_ ? lo_ + static_cast<std::uint32_t>(best_) : 0; }

    std::uint32_t lo() const { return lo_; }
    std::uint32_t span() const { return span_; }

private:
    // The best level emptied: the highest set bit at or below i, one word at a time.
    void find_best_below(std::size_t i) {
        for (std::size_t w = i / 64 + 1; w-- > 0;) {
            if (words_[w] != 0) {
                best_ = w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(words_[w]));
                return;
            }
        }
        any_ = false;  // no level has shares
    }

    std::uint32_t lo_, span_;
    std::vector<std::uint64_t> qty_;    // shares at price lo_ + i
    std::vector<std::uint64_t> words_;  // bit i: qty_[i] != 0
    std::size_t best_ = 0;              // index of the best level, when any_
    bool any_ = false;                  // some level has shares
};

}  // namespace ex01
