// Chapter 8: book layouts compared. One book's matching logic (LayoutBook), written
// once and compiled once per price-level index: a policy type, so the compiler
// specialises every call into the index (no virtual calls, no function pointers; each
// layout's machine code is its own). The rules are naive/book.py's and Book's:
// price-time priority, the same fills, the same rejects (DESIGN.md "Order book
// semantics"), and the same strong guarantee (everything that can allocate happens
// before an operation changes anything).
//
// What the layouts share: the 32-byte order nodes of native/book.hpp (its NodePool), one
// FIFO of nodes per level (its Level), and, but for the capped layout, its id hash
// (IdHash). What differs: how a side finds the level of a price, and its best price.
//
//   map      std::map of levels                    any price; O(log n) per level lookup
//   vector   sorted std::vector, best at the end   any price; binary search, O(n) shift
//   window   flat window + hierarchical bitset     any price (a std::map beyond the window)
//   bitmap3  flat window + fixed 3-level bitmap    the same, the bitset's depth fixed at 3
//   treap    intrusive treap (randomised BST)      any price; O(log n) expected, no allocation
//                                                  per level (nodes from a pool)
//   capped   array indexed by raw price, order     refuses what is beyond its caps (below)
//            table indexed by raw id
//
// The capped layout's rules (tests/test_layouts.py checks them against a model of them):
//   * a price >= price_cap is refused as bad_price, exactly like a price of 0;
//   * an id >= id_cap is refused as unknown_id by every operation, adds included: the
//     book has no slot for such an id, so it can never know it (and a query for one
//     answers None);
//   * inside its caps it gives the fills and rejects of every other layout.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "book.hpp"
#include "dtypes.hpp"

namespace twinmatch::layouts {

// Sizes the layouts are built with. Only the capped layout reads them.
struct Options {
    std::uint64_t price_cap = std::uint64_t(1) << 20;  // capped: prices 1 .. price_cap-1
    std::uint64_t id_cap = std::uint64_t(1) << 20;     // capped: ids 0 .. id_cap-1
};
inline constexpr std::uint64_t kMaxCap = std::uint64_t(1) << 28;

// Is price a better than price b for side S? (Bids: higher; asks: lower.) S is a
// template parameter, so this is one comparison with no branch on the side.
template <Side S>
constexpr bool better(std::uint32_t a, std::uint32_t b) {
    if constexpr (S == Side::Buy) return a > b;
    else return a < b;
}

// ---------------------------------------------------------------------------------------
// The policy every level index follows (one instance per side; S the side):
//   Level* find(p)        the level at price p, or nullptr
//   void reserve(p)       make room so that insert(p) cannot fail, even after erases;
//                         may throw (before the operation changes anything)
//   Level* insert(p)      a new, empty level at p (p absent; reserve(p) done)
//   void erase(p)         drop the (emptied) level at p; never allocates
//   bool empty()          no levels
//   uint32 best()         the best price (precondition: !empty())
//   Level* best_level()   its level
//   for_each(f)           f(price, const Level&) best first, until f returns false
//   clear()
// A Level pointer stays valid until the next insert or erase on that side.
// ---------------------------------------------------------------------------------------

// --8<-- [start:map_levels]
// The baseline: a red-black tree (std::map) keyed by price, ordered best first, so the
// best level is begin(). Every level is a heap node of its own; a lookup walks O(log n)
// of them, each likely in another cache line.
template <Side S>
class MapLevels {
    using Cmp = std::conditional_t<S == Side::Buy, std::greater<>, std::less<>>;
    using Map = std::map<std::uint32_t, Level, Cmp>;

public:
    explicit MapLevels(const Options&) {}
    Level* find(std::uint32_t p) {
        auto it = levels_.find(p);
        return it == levels_.end() ? nullptr : &it->second;
    }
    void reserve(std::uint32_t) {
        if (!spare_.empty()) return;  // a map node, made before anything changes
        alloc_checkpoint();
        Map one;
        one.emplace(0, Level{});
        spare_ = one.extract(one.begin());
    }
    Level* insert(std::uint32_t p) {
        spare_.key() = p;
        spare_.mapped() = Level{};
        return &levels_.insert(std::move(spare_)).position->second;
    }
    void erase(std::uint32_t p) { levels_.erase(p); }
    bool empty() const { return levels_.empty(); }
    std::uint32_t best() const { return levels_.begin()->first; }
    Level* best_level() { return &levels_.begin()->second; }
    template <class F>
    void for_each(F&& f) const {
        for (const auto& [p, l] : levels_)
            if (!f(p, l)) return;
    }
    void clear() { levels_.clear(); }

private:
    Map levels_;
    typename Map::node_type spare_;
};
// --8<-- [end:map_levels]

// --8<-- [start:vector_levels]
// A sorted array of (price, level), worst first, so the best level is the last element:
// orders near the touch (most of them) insert and erase near the end, where there is
// little to shift. A lookup is a binary search over contiguous memory. Inserting or
// erasing a level far from the touch shifts every level between it and the end:
// O(levels) bytes moved: what can give this layout a long tail.
template <Side S>
class VectorLevels {
    struct Entry {
        std::uint32_t price;
        Level level;
    };

public:
    explicit VectorLevels(const Options&) { levels_.reserve(64); }
    Level* find(std::uint32_t p) {
        auto it = lower(p);
        return it != levels_.end() && it->price == p ? &it->level : nullptr;
    }
    void reserve(std::uint32_t) {
        if (levels_.size() == levels_.capacity()) {  // grow before anything changes
            alloc_checkpoint();
            levels_.reserve(levels_.capacity() * 2);
        }
    }
    Level* insert(std::uint32_t p) {
        return &levels_.insert(lower(p), Entry{p, Level{}})->level;  // room: reserve()
    }
    void erase(std::uint32_t p) { levels_.erase(lower(p)); }
    bool empty() const { return levels_.empty(); }
    std::uint32_t best() const { return levels_.back().price; }
    Level* best_level() { return &levels_.back().level; }
    template <class F>
    void for_each(F&& f) const {
        for (auto it = levels_.rbegin(); it != levels_.rend(); ++it)
            if (!f(it->price, it->level)) return;
    }
    void clear() { levels_.clear(); }

private:
    // The first entry not worse than p (worst first: bids ascending, asks descending).
    typename std::vector<Entry>::iterator lower(std::uint32_t p) {
        return std::lower_bound(levels_.begin(), levels_.end(), p,
                                [](const Entry& e, std::uint32_t q) { return better<S>(q, e.price); });
    }
    std::vector<Entry> levels_;
};
// --8<-- [end:vector_levels]

// --8<-- [start:bitmap3]
// A fixed three-level bitmap over 64^3 = 2^18 slots: bit i of leaf_ says slot i is in
// use, bit j of mid_ says leaf_ word j is non-zero, bit k of top_ says mid_ word k is.
// The same tree of words as book.hpp's LevelBitset, with the depth fixed at compile time:
// the searches are three count-leading/trailing-zero steps written out, with no loop over
// layers and no vector of vectors to reach through.
class Bitmap3 {
public:
    static constexpr std::uint64_t kBits = std::uint64_t(1) << 18;
    static constexpr std::uint64_t npos = ~std::uint64_t(0);
    explicit Bitmap3(std::uint64_t) {}

    bool empty() const { return top_ == 0; }
    bool test(std::uint64_t i) const { return (leaf_[i >> 6] >> (i & 63)) & 1; }
    void set(std::uint64_t i) {
        leaf_[i >> 6] |= bit(i);
        mid_[i >> 12] |= bit(i >> 6);
        top_ |= bit(i >> 12);
    }
    void reset(std::uint64_t i) {
        if ((leaf_[i >> 6] &= ~bit(i)) != 0) return;
        if ((mid_[i >> 12] &= ~bit(i >> 6)) != 0) return;
        top_ &= ~bit(i >> 12);
    }
    std::uint64_t highest() const { return down_high(63 - std::countl_zero(top_)); }
    std::uint64_t lowest() const { return down_low(std::countr_zero(top_)); }
    // The highest set bit strictly below i, or npos.
    std::uint64_t prev_below(std::uint64_t i) const {
        if (std::uint64_t w = leaf_[i >> 6] & below(i); w != 0)
            return (i >> 6 << 6) + 63 - std::countl_zero(w);
        if (std::uint64_t w = mid_[i >> 12] & below(i >> 6); w != 0)
            return leaf_high((i >> 12 << 6) + 63 - std::countl_zero(w));
        if (std::uint64_t w = top_ & below(i >> 12); w != 0)
            return down_high(63 - std::countl_zero(w));
        return npos;
    }
    // The lowest set bit strictly above i, or npos.
    std::uint64_t next_above(std::uint64_t i) const {
        if (std::uint64_t w = leaf_[i >> 6] & above(i); w != 0)
            return (i >> 6 << 6) + std::countr_zero(w);
        if (std::uint64_t w = mid_[i >> 12] & above(i >> 6); w != 0)
            return leaf_low((i >> 12 << 6) + std::countr_zero(w));
        if (std::uint64_t w = top_ & above(i >> 12); w != 0)
            return down_low(std::countr_zero(w));
        return npos;
    }
    void clear() {
        leaf_.fill(0);
        mid_.fill(0);
        top_ = 0;
    }

private:
    static std::uint64_t bit(std::uint64_t i) { return std::uint64_t(1) << (i & 63); }
    static std::uint64_t below(std::uint64_t i) { return bit(i) - 1; }  // bits < i%64
    static std::uint64_t above(std::uint64_t i) {  // bits > i%64
        return (i & 63) == 63 ? 0 : ~std::uint64_t(0) << ((i & 63) + 1);
    }
    // From a mid_ word index (a 12-bit prefix) or a leaf_ word index down to a slot.
    std::uint64_t down_high(std::uint64_t k) const {
        return leaf_high((k << 6) + 63 - std::countl_zero(mid_[k]));
    }
    std::uint64_t down_low(std::uint64_t k) const {
        return leaf_low((k << 6) + std::countr_zero(mid_[k]));
    }
    std::uint64_t leaf_high(std::uint64_t j) const { return (j << 6) + 63 - std::countl_zero(leaf_[j]); }
    std::uint64_t leaf_low(std::uint64_t j) const { return (j << 6) + std::countr_zero(leaf_[j]); }

    std::uint64_t top_ = 0;
    std::array<std::uint64_t, 64> mid_{};
    std::array<std::uint64_t, 4096> leaf_{};
};
// --8<-- [end:bitmap3]

// --8<-- [start:window_levels]
// A window of 2^18 consecutive prices as one flat array of levels, with a bitset (Bits:
// book.hpp's LevelBitset, or Bitmap3) saying which are in use, so a level lookup is one
// subtraction and one index, and the best price a few bit scans. Prices outside the
// window go to a std::map (the slow path): any price is accepted. The window moves (to
// centre on a new order) only when it holds none of its side's levels; the far levels
// that then fall inside it move in. (Book does more: it also moves a window the market
// has left behind. This layout keeps only the part the comparison needs.)
template <Side S, class Bits>
class WindowLevels {
    static constexpr std::uint64_t kWindow = std::uint64_t(1) << 18;
    using Cmp = std::conditional_t<S == Side::Buy, std::greater<>, std::less<>>;
    using Far = std::map<std::uint32_t, Level, Cmp>;

public:
    explicit WindowLevels(const Options&) : bits_(kWindow) {
        levels_ = static_cast<Level*>(std::calloc(kWindow, sizeof(Level)));  // zero pages: lazy
        if (levels_ == nullptr) throw std::bad_alloc();
    }
    ~WindowLevels() { std::free(levels_); }
    WindowLevels(const WindowLevels&) = delete;
    WindowLevels& operator=(const WindowLevels&) = delete;

    Level* find(std::uint32_t p) {
        std::uint64_t off = std::uint64_t(p) - base_;  // below base wraps to a huge offset
        // A level in use has orders (count != 0): the line the caller reads anyway.
        if (off < kWindow) [[likely]] return levels_[off].count != 0 ? &levels_[off] : nullptr;
        auto it = far_.find(p);
        return it == far_.end() ? nullptr : &it->second;
    }
    void reserve(std::uint32_t p) {
        if (std::uint64_t(p) - base_ < kWindow || !spare_.empty()) return;
        alloc_checkpoint();  // a far level may be needed: its map node, made now
        Far one;
        one.emplace(0, Level{});
        spare_ = one.extract(one.begin());
    }
    Level* insert(std::uint32_t p) {
        if (std::uint64_t(p) - base_ >= kWindow && in_window_ == 0) recentre(p);
        Level* l;
        std::uint64_t off = std::uint64_t(p) - base_;
        if (off < kWindow) {
            bits_.set(off);
            ++in_window_;
            l = &levels_[off];
            *l = Level{};
        } else {
            spare_.key() = p;
            spare_.mapped() = Level{};
            l = &far_.insert(std::move(spare_)).position->second;
        }
        if (best_ == 0 || better<S>(p, best_)) best_ = p;
        return l;
    }
    void erase(std::uint32_t p) {
        std::uint64_t off = std::uint64_t(p) - base_;
        if (off < kWindow) {
            bits_.reset(off);
            --in_window_;
        } else {
            far_.erase(p);
        }
        if (p == best_) best_ = scan_best();
    }
    bool empty() const { return best_ == 0; }
    std::uint32_t best() const { return best_; }
    Level* best_level() { return find(best_); }
    // Window levels (by the bitset) merged with the far map's, best first.
    template <class F>
    void for_each(F&& f) const {
        std::uint64_t w = bits_.empty() ? Bits::npos : first_slot();
        auto fi = far_.begin();
        for (;;) {
            bool have_w = w != Bits::npos, have_f = fi != far_.end();
            if (!have_w && !have_f) return;
            auto wp = static_cast<std::uint32_t>(base_ + (have_w ? w : 0));
            if (have_w && (!have_f || better<S>(wp, fi->first))) {
                if (!f(wp, levels_[w])) return;
                w = S == Side::Buy ? bits_.prev_below(w) : bits_.next_above(w);
            } else {
                if (!f(fi->first, fi->second)) return;
                ++fi;
            }
        }
    }
    void clear() {
        while (!bits_.empty()) {
            std::uint64_t i = bits_.lowest();
            levels_[i] = Level{};
            bits_.reset(i);
        }
        far_.clear();
        in_window_ = 0;
        best_ = 0;
    }

private:
    std::uint64_t first_slot() const { return S == Side::Buy ? bits_.highest() : bits_.lowest(); }
    std::uint32_t scan_best() const {
        std::uint32_t b = 0;
        if (!bits_.empty()) b = static_cast<std::uint32_t>(base_ + first_slot());
        if (!far_.empty() && (b == 0 || better<S>(far_.begin()->first, b))) b = far_.begin()->first;
        return b;
    }
    // The window holds none of this side's levels: centre it on p and move in the far
    // levels it now covers (erasing map nodes frees memory, it never allocates).
    void recentre(std::uint32_t p) {
        constexpr std::uint64_t top = std::uint64_t(1) << 32;  // one past the last price
        std::uint64_t base = p > kWindow / 2 ? p - kWindow / 2 : 1;
        if (base + kWindow > top) base = top - kWindow;
        base_ = base;
        for (auto it = far_.begin(); it != far_.end();) {
            std::uint64_t off = std::uint64_t(it->first) - base_;
            if (off >= kWindow) {
                ++it;
                continue;
            }
            levels_[off] = it->second;
            bits_.set(off);
            ++in_window_;
            it = far_.erase(it);
        }
    }
    std::uint64_t base_ = 1;  // price of levels_[0]
    Level* levels_ = nullptr;
    Bits bits_;
    std::uint64_t in_window_ = 0;  // levels in the window
    std::uint32_t best_ = 0;       // 0: the side is empty
    Far far_;
    typename Far::node_type spare_;
};
template <Side S>
using BitsetWindowLevels = WindowLevels<S, LevelBitset>;
template <Side S>
using Bitmap3WindowLevels = WindowLevels<S, Bitmap3>;
// --8<-- [end:window_levels]

// --8<-- [start:treap_levels]
// An intrusive treap: each level is itself a node of a binary search tree by price (its
// links live in the node, no separate container node), and each node has a random
// priority, the tree kept heap-ordered by it, which makes its depth O(log n) in
// expectation whatever order the prices arrive in -- as long as the input cannot guess
// the priorities. With one fixed seed it could: prices ranked as the priorities are
// build a path. So each book draws its own seed (as IdHash draws its multiplier), and
// split, merge and the walk loop instead of recursing: even an unlucky deep tree costs
// time, never the stack. Nodes come from a pool addressed by 32-bit index, like the
// order nodes: no allocation per level once the pool has grown.
template <Side S>
class TreapLevels {
    struct TNode {
        Level level;
        std::uint32_t price;
        std::uint32_t prio;
        std::uint32_t left, right;  // indices into nodes_, or kNil
    };
    static_assert(sizeof(TNode) == 40);

public:
    explicit TreapLevels(const Options&) : rng_(random_seed()) { nodes_.reserve(64); }
    Level* find(std::uint32_t p) {
        std::uint32_t t = root_;
        while (t != kNil && nodes_[t].price != p) t = p < nodes_[t].price ? nodes_[t].left : nodes_[t].right;
        return t == kNil ? nullptr : &nodes_[t].level;
    }
    void reserve(std::uint32_t) {
        if (free_ == kNil && nodes_.size() == nodes_.capacity()) {
            alloc_checkpoint();
            nodes_.reserve(nodes_.capacity() * 2);  // may throw: nothing changed yet
        }
    }
    Level* insert(std::uint32_t p) {
        std::uint32_t n;
        if (free_ != kNil) {
            n = free_;
            free_ = nodes_[n].left;
        } else {
            n = static_cast<std::uint32_t>(nodes_.size());
            nodes_.push_back(TNode{});  // room: reserve()
        }
        nodes_[n] = TNode{Level{}, p, next_prio(), kNil, kNil};
        auto [l, r] = split(root_, p);
        root_ = merge(merge(l, n), r);
        if (best_ == kNil || better<S>(p, nodes_[best_].price)) best_ = n;
        ++size_;
        return &nodes_[n].level;
    }
    void erase(std::uint32_t p) {
        std::uint32_t* link = &root_;  // the link that points at the node with price p
        while (nodes_[*link].price != p)
            link = p < nodes_[*link].price ? &nodes_[*link].left : &nodes_[*link].right;
        std::uint32_t n = *link;
        *link = merge(nodes_[n].left, nodes_[n].right);
        nodes_[n].left = free_;
        free_ = n;
        --size_;
        if (n == best_) best_ = extreme();
    }
    bool empty() const { return size_ == 0; }
    std::uint32_t best() const { return nodes_[best_].price; }
    Level* best_level() { return &nodes_[best_].level; }
    template <class F>
    void for_each(F&& f) const {
        walk(f);
    }
    void clear() {
        nodes_.clear();
        root_ = best_ = free_ = kNil;
        size_ = 0;
    }

private:
    static std::uint32_t random_seed() {  // any non-zero value; xorshift32 stays non-zero
        std::uint32_t s = 0;
        try {
            s = std::random_device{}();
        } catch (const std::exception&) {  // no entropy source: the clock will do
            s = static_cast<std::uint32_t>(
                std::chrono::steady_clock::now().time_since_epoch().count());
        }
        return s != 0 ? s : 0x9E3779B9u;
    }
    std::uint32_t next_prio() {  // xorshift32 from this book's own seed
        rng_ ^= rng_ << 13;
        rng_ ^= rng_ >> 17;
        rng_ ^= rng_ << 5;
        return rng_;
    }
    // Split t into (prices < p, prices >= p), walking down once: each node goes to the
    // end of the left or the right result (`lt`, `rt`: the links still to fill).
    std::pair<std::uint32_t, std::uint32_t> split(std::uint32_t t, std::uint32_t p) {
        std::uint32_t l = kNil, r = kNil;
        std::uint32_t *lt = &l, *rt = &r;
        while (t != kNil) {
            if (nodes_[t].price < p) {
                *lt = t;
                lt = &nodes_[t].right;
                t = nodes_[t].right;
            } else {
                *rt = t;
                rt = &nodes_[t].left;
                t = nodes_[t].left;
            }
        }
        *lt = *rt = kNil;
        return {l, r};
    }
    // Join a (every price smaller) and b: the higher priority goes on top, one link at
    // a time (`link`: where the next node hangs).
    std::uint32_t merge(std::uint32_t a, std::uint32_t b) {
        std::uint32_t root = kNil;
        std::uint32_t* link = &root;
        while (a != kNil && b != kNil) {
            if (nodes_[a].prio > nodes_[b].prio) {
                *link = a;
                link = &nodes_[a].right;
                a = nodes_[a].right;
            } else {
                *link = b;
                link = &nodes_[b].left;
                b = nodes_[b].left;
            }
        }
        *link = a != kNil ? a : b;
        return root;
    }
    std::uint32_t extreme() const {  // the best node: rightmost for bids, leftmost for asks
        std::uint32_t t = root_;
        if (t == kNil) return kNil;
        for (;;) {
            std::uint32_t next = S == Side::Buy ? nodes_[t].right : nodes_[t].left;
            if (next == kNil) return t;
            t = next;
        }
    }
    // In order, best first, with a stack of its own instead of recursion. The stack is
    // kept between walks: it allocates only when the tree is deeper than ever before.
    template <class F>
    void walk(F& f) const {
        std::vector<std::uint32_t>& stack = stack_;
        stack.clear();
        std::uint32_t t = root_;
        for (;;) {
            for (; t != kNil; t = S == Side::Buy ? nodes_[t].right : nodes_[t].left)
                stack.push_back(t);  // the better subtree first
            if (stack.empty()) return;
            const TNode& n = nodes_[stack.back()];
            stack.pop_back();
            if (!f(n.price, n.level)) return;
            t = S == Side::Buy ? n.left : n.right;
        }
    }
    std::vector<TNode> nodes_;
    std::uint32_t root_ = kNil, best_ = kNil, free_ = kNil;
    std::uint32_t size_ = 0;
    std::uint32_t rng_;  // this book's priority stream
    mutable std::vector<std::uint32_t> stack_;  // walk()'s
};
// --8<-- [end:treap_levels]

// --8<-- [start:capped_levels]
// The classic student design: one level per raw price, levels_[price], no window, no
// map. The lookup is one index. The best price is cached and, when its level empties,
// found again by scanning towards worse prices to the next level in use: cheap when the
// book is dense near the touch, as long as the gap when it is not.
template <Side S>
class CappedLevels {
public:
    explicit CappedLevels(const Options& o) : cap_(o.price_cap) {
        levels_ = static_cast<Level*>(std::calloc(cap_, sizeof(Level)));  // zero pages: lazy
        if (levels_ == nullptr) throw std::bad_alloc();
    }
    ~CappedLevels() { std::free(levels_); }
    CappedLevels(const CappedLevels&) = delete;
    CappedLevels& operator=(const CappedLevels&) = delete;

    // Precondition everywhere: 1 <= p < price_cap (the book refused anything else).
    Level* find(std::uint32_t p) { return levels_[p].count != 0 ? &levels_[p] : nullptr; }
    void reserve(std::uint32_t) {}
    Level* insert(std::uint32_t p) {
        if (best_ == 0 || better<S>(p, best_)) best_ = p;
        lo_ = std::min(lo_, p);
        hi_ = std::max(hi_, p);
        ++size_;
        return &levels_[p];  // count 0: empty; the book fills it in
    }
    void erase(std::uint32_t p) {
        --size_;
        if (p != best_) return;
        if (size_ == 0) {
            best_ = 0;
            return;
        }
        // Scan to the next level in use: one exists, since size_ > 0.
        if constexpr (S == Side::Buy) {
            while (levels_[--p].count == 0) {}
        } else {
            while (levels_[++p].count == 0) {}
        }
        best_ = p;
    }
    bool empty() const { return size_ == 0; }
    std::uint32_t best() const { return best_; }
    Level* best_level() { return &levels_[best_]; }
    template <class F>
    void for_each(F&& f) const {
        if (size_ == 0) return;
        std::uint64_t seen = 0;
        for (std::uint64_t p = best_; seen < size_; p = S == Side::Buy ? p - 1 : p + 1) {
            if (levels_[p].count == 0) continue;
            ++seen;
            if (!f(static_cast<std::uint32_t>(p), levels_[p])) return;
        }
    }
    void clear() {  // only the prices ever used: [lo_, hi_]
        if (hi_ >= lo_) std::memset(&levels_[lo_], 0, (hi_ - lo_ + 1) * sizeof(Level));
        lo_ = std::numeric_limits<std::uint32_t>::max();
        hi_ = best_ = 0;
        size_ = 0;
    }

private:
    std::uint64_t cap_;
    Level* levels_ = nullptr;
    std::uint32_t best_ = 0;
    std::uint64_t size_ = 0;
    std::uint32_t lo_ = std::numeric_limits<std::uint32_t>::max(), hi_ = 0;
};
// --8<-- [end:capped_levels]

// ---------------------------------------------------------------------------------------
// Id tables: id -> order node. Every layout but the capped one uses book.hpp's IdHash.
// ---------------------------------------------------------------------------------------

class HashIds {
public:
    HashIds(const Options&, std::uint32_t expected) : h_(expected) {}
    static constexpr bool accepts(std::uint64_t) { return true; }
    template <class Pool>
    std::uint32_t find(std::uint64_t id, const Pool& pool) const {
        return h_.find(id, h_.fingerprint(id), pool);
    }
    template <class Pool>
    void ensure_one(Pool& pool) { h_.ensure_one(pool); }
    template <class Pool>
    void ensure_keyed(Pool& pool) { h_.ensure_keyed(pool); }
    template <class Pool>
    void insert(std::uint64_t id, std::uint32_t node, Pool& pool) {  // id absent
        std::uint32_t fp = h_.fingerprint(id);
        pool[node].fp = fp;  // kept so that erase need not rehash
        h_.insert_at(h_.slot_of(id, fp, pool), fp, node);
    }
    void erase(const Node& n, std::uint32_t node) { h_.erase(n.fp, node); }
    void clear() { h_.clear(); }

private:
    IdHash h_;
};

// --8<-- [start:capped_ids]
// The capped layout's order table: slots_[id] holds node + 1 (0: no order), so a lookup
// is one load with no hashing and no probing; ids at or beyond id_cap are refused.
// calloc'ed: the pages of ids never used are never touched.
class CappedIds {
public:
    CappedIds(const Options& o, std::uint32_t) : cap_(o.id_cap) {
        slots_ = static_cast<std::uint32_t*>(std::calloc(cap_, sizeof(std::uint32_t)));
        if (slots_ == nullptr) throw std::bad_alloc();
    }
    ~CappedIds() { std::free(slots_); }
    CappedIds(const CappedIds&) = delete;
    CappedIds& operator=(const CappedIds&) = delete;
    bool accepts(std::uint64_t id) const { return id < cap_; }
    template <class Pool>
    std::uint32_t find(std::uint64_t id, const Pool&) const {
        return slots_[id] - 1;  // 0-1 = kNil
    }
    template <class Pool>
    void ensure_one(Pool&) {}
    template <class Pool>
    void ensure_keyed(Pool&) {}
    template <class Pool>
    void insert(std::uint64_t id, std::uint32_t node, Pool&) {
        slots_[id] = node + 1;
        hi_ = std::max(hi_, id + 1);
    }
    void erase(const Node& n, std::uint32_t) { slots_[n.id] = 0; }
    void clear() {
        std::memset(slots_, 0, hi_ * sizeof(std::uint32_t));
        hi_ = 0;
    }

private:
    std::uint64_t cap_;
    std::uint32_t* slots_ = nullptr;
    std::uint64_t hi_ = 0;  // one past the highest id ever stored
};
// --8<-- [end:capped_ids]

// ---------------------------------------------------------------------------------------
// The layouts: a level index per side, an id table, and whether prices and ids are capped.
// ---------------------------------------------------------------------------------------
template <template <Side> class L, class I, bool Capped = false>
struct Layout {
    template <Side S>
    using Levels = L<S>;
    using Ids = I;
    static constexpr bool kCapped = Capped;
};
using MapLayout = Layout<MapLevels, HashIds>;
using VectorLayout = Layout<VectorLevels, HashIds>;
using WindowLayout = Layout<BitsetWindowLevels, HashIds>;
using Bitmap3Layout = Layout<Bitmap3WindowLevels, HashIds>;
using TreapLayout = Layout<TreapLevels, HashIds>;
using CappedLayout = Layout<CappedLevels, CappedIds, true>;

// --8<-- [start:layout_book]
// The one matching engine, compiled once per layout. Same C++ API as Book and MapBook,
// so the same bindings (book_bind.hpp's bind_api) and the same batch loop serve it.
template <class Lay>
class LayoutBook {
    using Bids = typename Lay::template Levels<Side::Buy>;
    using Asks = typename Lay::template Levels<Side::Sell>;
    using Ids = typename Lay::Ids;

public:
    static constexpr bool kCapped = Lay::kCapped;
    static constexpr std::uint32_t kDefaultOrders = std::uint32_t(1) << 16;
    static constexpr std::uint32_t kMaxOrders = std::uint32_t(1) << 31;

    explicit LayoutBook(std::uint32_t initial_orders = kDefaultOrders,
                        std::uint32_t max_orders = kMaxOrders, Options opt = {})
        : opt_(check(opt)),
          max_orders_(check_max_orders(max_orders)),
          bids_(opt_),
          asks_(opt_),
          pool_(initial_orders, max_orders),
          ids_(opt_, std::min(initial_orders, max_orders)) {}
    // --8<-- [end:layout_book]

    // --8<-- [start:layout_add]
    template <class Sink>
    Reason add_limit(std::uint64_t id, Side side, std::int64_t price, std::int64_t qty,
                     Sink&& sink) {
        if (!price_ok(price)) return Reason::BadPrice;
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        if (!ids_.accepts(id)) return Reason::UnknownId;  // capped only: no slot for it
        if (ids_.find(id, pool_) != kNil) return Reason::DuplicateId;
        if (size_ >= max_orders_)
            throw BookFull("book full: it holds max_orders resting orders");
        // Everything that can fail (allocate) happens here, before anything changes.
        pool_.ensure_one();
        ids_.ensure_one(pool_);
        auto p = static_cast<std::uint32_t>(price);
        auto q = static_cast<std::uint32_t>(qty);
        on_side(side, [&](auto& own) { own.reserve(p); });
        bool cross = crosses(side, p);
        if (cross) {
            reserve_fills(sink, side, p, q);
            q = match(id, side, p, q, sink);
        }
        if (q != 0) rest(id, side, p, q);
        return Reason::Ok;
    }
    // --8<-- [end:layout_add]

    template <class Sink>
    Reason add_market(std::uint64_t id, Side side, std::int64_t qty, std::uint64_t& unfilled,
                      Sink&& sink) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        if (!ids_.accepts(id)) return Reason::UnknownId;
        if (ids_.find(id, pool_) != kNil) return Reason::DuplicateId;
        std::uint64_t limit = side == Side::Buy ? kMaxPrice : 1;  // crosses any level
        auto q = static_cast<std::uint32_t>(qty);
        reserve_fills(sink, side, limit, q);
        unfilled = match(id, side, limit, q, sink);
        return Reason::Ok;
    }

    Reason cancel(std::uint64_t id, std::uint64_t& removed) {
        std::uint32_t i = lookup(id);
        if (i == kNil) return Reason::UnknownId;
        removed = pool_[i].qty;
        remove(i);
        return Reason::Ok;
    }

    Reason reduce(std::uint64_t id, std::int64_t qty, std::uint64_t& left) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        std::uint32_t i = lookup(id);
        if (i == kNil) return Reason::UnknownId;
        if (std::uint64_t(qty) > pool_[i].qty) return Reason::OverReduce;
        left = take(i, static_cast<std::uint32_t>(qty));
        return Reason::Ok;
    }

    Reason execute(std::uint64_t id, std::int64_t qty, Fill& fill) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        std::uint32_t i = lookup(id);
        if (i == kNil) return Reason::UnknownId;
        const Node& n = pool_[i];
        if (std::uint64_t(qty) > n.qty) return Reason::OverReduce;
        fill = Fill{id, 0, n.price, static_cast<std::uint32_t>(qty), opposite(n.side)};
        take(i, static_cast<std::uint32_t>(qty));
        return Reason::Ok;
    }

    // old_id leaves; new_id (same side) enters at price/qty at the back and may match.
    template <class Sink>
    Reason replace(std::uint64_t old_id, std::uint64_t new_id, std::int64_t price,
                   std::int64_t qty, Sink&& sink) {
        if (!price_ok(price)) return Reason::BadPrice;
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        ids_.ensure_keyed(pool_);  // a pending re-key of the hash, before any lookup
        std::uint32_t i = lookup(old_id);
        if (i == kNil) return Reason::UnknownId;
        if (!ids_.accepts(new_id)) return Reason::UnknownId;
        if (new_id != old_id && ids_.find(new_id, pool_) != kNil) return Reason::DuplicateId;
        Side side = pool_[i].side;
        auto p = static_cast<std::uint32_t>(price);
        auto q = static_cast<std::uint32_t>(qty);
        on_side(side, [&](auto& own) { own.reserve(p); });  // may throw: nothing changed
        bool cross = crosses(side, p);  // against the other side: the old order is no part
        if (cross) reserve_fills(sink, side, p, q);
        remove(i);  // frees a node and an id entry: rest() below needs no growth
        if (cross) q = match(new_id, side, p, q, sink);
        if (q != 0) rest(new_id, side, p, q);
        return Reason::Ok;
    }

    // ---- queries ----
    std::size_t size() const { return size_; }
    std::uint32_t best(Side side, std::uint64_t& qty) {
        qty = 0;
        return on_side(side, [&](auto& lv) -> std::uint32_t {
            if (lv.empty()) return 0;
            qty = lv.best_level()->total;
            return lv.best();
        });
    }
    bool order(std::uint64_t id, Side& side, std::uint32_t& price, std::uint32_t& qty) const {
        if (!ids_.accepts(id)) return false;
        std::uint32_t i = ids_.find(id, pool_);
        if (i == kNil) return false;
        const Node& n = pool_[i];
        side = n.side;
        price = n.price;
        qty = n.qty;
        return true;
    }
    template <class Out>
    void depth(Side side, std::int64_t max_levels, Out&& out) const {
        if (max_levels <= 0) return;
        std::int64_t emitted = 0;
        on_side(side, [&](const auto& lv) {
            lv.for_each([&](std::uint32_t p, const Level& l) {
                out(DepthRow{p, l.total, l.count});
                return ++emitted < max_levels;
            });
        });
    }
    void clear() {
        bids_.clear();
        asks_.clear();
        ids_.clear();
        pool_.clear();
        size_ = 0;
    }
    std::uint64_t price_cap() const { return kCapped ? opt_.price_cap : kMaxPrice + 1; }
    std::uint64_t id_cap() const { return kCapped ? opt_.id_cap : 0; }  // 0: none

private:
    static Options check(Options o) {
        if (kCapped && (o.price_cap < 2 || o.price_cap > kMaxCap || o.id_cap < 1 || o.id_cap > kMaxCap))
            throw std::invalid_argument("price_cap must be in 2..2^28 and id_cap in 1..2^28");
        return o;
    }
    static std::uint32_t check_max_orders(std::uint32_t m) {
        if (m == 0 || m > kMaxOrders) throw std::invalid_argument("max_orders must be in 1..2^31");
        return m;
    }
    bool price_ok(std::int64_t price) const {
        if (price < 1 || price > kMaxPrice) return false;
        return !kCapped || std::uint64_t(price) < opt_.price_cap;
    }
    std::uint32_t lookup(std::uint64_t id) const {
        return ids_.accepts(id) ? ids_.find(id, pool_) : kNil;
    }
    // Run f on the index of one side: each side's index is its own type (S is a template
    // parameter), so f is compiled twice and the side is known inside each copy.
    template <class F>
    decltype(auto) on_side(Side side, F&& f) {
        if (side == Side::Buy) return f(bids_);
        return f(asks_);
    }
    template <class F>
    decltype(auto) on_side(Side side, F&& f) const {
        if (side == Side::Buy) return f(bids_);
        return f(asks_);
    }
    // Does an aggressor on `side` with this limit trade with the opposite best level?
    bool crosses(Side side, std::uint64_t limit) const {
        if (side == Side::Buy) return !asks_.empty() && asks_.best() <= limit;
        return !bids_.empty() && bids_.best() >= limit;
    }

    // --8<-- [start:layout_match]
    // Trade against the opposite side while it crosses `limit`; returns the qty left.
    template <class Sink>
    std::uint32_t match(std::uint64_t id, Side side, std::uint64_t limit,
                        std::uint32_t qty, Sink& sink) {
        return on_side(opposite(side), [&](auto& rest) {
            while (qty > 0 && crosses(side, limit)) {
                std::uint32_t price = rest.best();
                Level* l = rest.best_level();
                std::uint32_t i = l->head;
                while (qty > 0 && i != kNil) {
                    Node& n = pool_[i];
                    std::uint32_t q = std::min(qty, n.qty);
                    sink(Fill{n.id, id, price, q, side});
                    n.qty -= q;
                    qty -= q;
                    l->total -= q;
                    if (n.qty != 0) break;  // a partly filled head keeps its place
                    std::uint32_t next = n.next;
                    ids_.erase(n, i);
                    pool_.release(i);
                    --size_;
                    --l->count;
                    i = next;
                }
                l->head = i;
                if (i != kNil) pool_[i].prev = kNil;
                if (l->count == 0) rest.erase(price);  // l is stale after this
            }
            return qty;
        });
    }
    // --8<-- [end:layout_match]

    // Room in the sink for every fill an aggressor can make (as Book::reserve_fills).
    template <class Sink>
    void reserve_fills(Sink& sink, Side side, std::uint64_t limit, std::uint32_t qty) {
        if constexpr (requires { sink.room(); sink.reserve(std::size_t{}); }) {
            if (sink.room() >= std::min<std::uint64_t>(qty, size_)) [[likely]] return;
            std::size_t fills = 0;
            std::uint64_t left = qty;
            on_side(opposite(side), [&](const auto& rest) {
                rest.for_each([&](std::uint32_t p, const Level& l) {
                    if (side == Side::Buy ? p > limit : p < limit) return false;  // no cross
                    if (l.total < left) {
                        fills += l.count;
                        left -= l.total;
                        return true;
                    }
                    for (std::uint32_t i = l.head; left > 0; i = pool_[i].next) {
                        ++fills;
                        left -= std::min<std::uint64_t>(left, pool_[i].qty);
                    }
                    return false;
                });
            });
            sink.reserve(fills);
        }
    }

    // A remainder joins the back of its level's queue. Cannot fail: the node, the id
    // entry and the level were made room for before anything changed.
    void rest(std::uint64_t id, Side side, std::uint32_t price, std::uint32_t qty) {
        on_side(side, [&](auto& own) {
            Level* l = own.find(price);
            if (l == nullptr) l = own.insert(price);
            std::uint32_t i = pool_.alloc();
            Node& n = pool_[i];
            n.id = id;
            n.qty = qty;
            n.price = price;
            n.next = kNil;
            n.side = side;
            if (l->count != 0) {
                n.prev = l->tail;
                pool_[l->tail].next = i;
                l->tail = i;
                l->total += qty;
                ++l->count;
            } else {
                n.prev = kNil;
                *l = Level{qty, i, i, 1, 0};
            }
            ids_.insert(id, i, pool_);
            ++size_;
        });
    }
    std::uint32_t take(std::uint32_t i, std::uint32_t qty) {
        Node& n = pool_[i];
        std::uint32_t left = n.qty - qty;
        if (left == 0) {
            remove(i);
        } else {
            n.qty = left;
            on_side(n.side, [&](auto& own) { own.find(n.price)->total -= qty; });
        }
        return left;
    }
    void remove(std::uint32_t i) {
        Node& n = pool_[i];
        on_side(n.side, [&](auto& own) {
            Level* l = own.find(n.price);
            if (n.prev != kNil) pool_[n.prev].next = n.next;
            else l->head = n.next;
            if (n.next != kNil) pool_[n.next].prev = n.prev;
            else l->tail = n.prev;
            l->total -= n.qty;
            if (--l->count == 0) own.erase(n.price);
        });
        ids_.erase(n, i);
        pool_.release(i);
        --size_;
    }

    Options opt_;
    std::uint32_t max_orders_;
    Bids bids_;
    Asks asks_;
    NodePool pool_;
    Ids ids_;
    std::uint64_t size_ = 0;
};

}  // namespace twinmatch::layouts
