// 01_order_book/flat_levels: one side's price levels, std::map against a flat array
// (starter: the std::map version, correct; make it fast).
#pragma once

#include <cstdint>
#include <map>

namespace ex01 {

// The total shares resting at each price of one side (the buy side: the best price is
// the highest), for prices in the window [lo, lo + span). The caller never passes a price
// outside the window, and never removes more than rests at a price.
//
// TODO: replace the std::map, whose every add and remove walks a tree of heap-allocated
// nodes, with flat arrays indexed by price - lo (chapter 1's "flat price levels"), and
// keep best() cheap: remember the best price, and search for the next one only when the
// best level empties (a bitset of non-empty levels makes that search one word at a time).
class Levels {
public:
    Levels(std::uint32_t lo, std::uint32_t span) : lo_(lo), span_(span) {}

    void add(std::uint32_t price, std::uint64_t qty) { levels_[price] += qty; }

    void remove(std::uint32_t price, std::uint64_t qty) {
        auto it = levels_.find(price);
        it->second -= qty;
        if (it->second == 0) levels_.erase(it);
    }

    std::uint64_t at(std::uint32_t price) const {
        auto it = levels_.find(price);
        return it == levels_.end() ? 0 : it->second;
    }

    // The highest price with shares resting, or 0 when the side is empty.
    std::uint32_t best() const { return levels_.empty() ? 0 : levels_.rbegin()->first; }

    std::uint32_t lo() const { return lo_; }
    std::uint32_t span() const { return span_; }

private:
    std::uint32_t lo_, span_;
    std::map<std::uint32_t, std::uint64_t> levels_;
};

}  // namespace ex01
