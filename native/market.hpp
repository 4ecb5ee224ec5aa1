// Many books: one book per stock locate, driven by decoded ITCH events.
//
// The naive twin is naive/market.py; every decision below is written there first, in
// plain Python, and both twins must count every message, fill, anomaly and reject alike.
//
// Two modes, one storage:
//   * book  (a feed handler): rebuild NASDAQ's books from A F E C X D U, never matching.
//     Orders rest where the feed puts them, even through the other side (NASDAQ's book
//     does lock and cross, e.g. in a halt's quotation period), and the market reports how
//     often and how long books were locked or crossed. H messages set a symbol's trading
//     state; it never gates an update. Something the feed should never say (an unknown
//     reference, an over-execution) is counted as an anomaly and changes nothing.
//   * match (a matching engine): A/F are incoming limit orders that match when they cross
//     (price 0: a market order), X reduces, D cancels, U replaces (and may match); E/C/P/Q
//     are the exchange's own executions and are only counted. The same price-time rules
//     as the one-symbol twinmatch::Book of chapter 1 (and the naive Book it must equal).
//
// The storage is what the fastest feed handlers share:
//   * one order table for the whole day (RefIndex), indexed directly by the reference
//     number: NASDAQ numbers orders densely and in increasing order through the day;
//   * all orders of all symbols in one pool of 32-byte nodes that never moves (chunks of
//     65,536 nodes, added as the day needs them: growth copies nothing);
//   * per locate and side, a window of price levels indexed by tick ($0.01 from $1 up,
//     $0.0001 below), sized from what the symbol's prices do: it starts at 32 levels and
//     doubles (up to window_levels) while the symbol keeps trading outside it, beyond
//     the market's first 2^20 window levels never to more than kLevelsPerOrder (16)
//     levels per resting order on that side; prices
//     outside it (or off its tick grid) live in an ordered map per side, the slow path;
//   * an order knows its price, so E C X D find their level by one subtraction and one
//     multiply, and touch one order, one level and one line of per-locate state.
// Order references are unique for the whole day, across symbols: when the message's
// locate and the order's disagree, the order wins and the message counts as a
// `locate_mismatch` anomaly.
//
// What a failed allocation leaves: every growth an event may need (the pool, the order
// table, a window, a far-price map node, room for its fills) happens before the event
// changes anything, so an out-of-memory error leaves the market exactly as it was after
// the previous event (run() then raises and says which event; the events before it are
// applied, it and later ones are not). Moving or growing a window is only an
// optimisation: it runs between events, and if memory runs out it is skipped.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <random>
#include <stdexcept>
#include <cstdio>  // reading the cache size from sysfs
#include <string>
#include <type_traits>
#include <vector>

#include <sys/mman.h>  // mmap: the locate table
#include <unistd.h>  // sysconf: the cache sizes

#include "book.hpp"
#include "dtypes.hpp"
#include "feed_text.hpp"
#include "itch.hpp"


namespace twinmatch {

// --8<-- [start:anomalies]
// Anomaly kinds (book mode); the numbers are ANOMALIES' indices in contract/dtypes.py.
enum class Anomaly : std::uint8_t {
    UnknownRef = 0,     // E C X D U name no live order
    DuplicateRef = 1,   // A F U add a reference that is already live
    OverExecution = 2,  // E C execute more shares than rest
    OverCancel = 3,     // X cancels more shares than rest
    BadPrice = 4,       // A F U with price 0
    BadShares = 5,      // A F E C X U with 0 shares
    BadSide = 6,        // A F with a side other than 'B' / 'S'
    LocateMismatch = 7, // the reference lives in another locate's book (handled there)
};
inline constexpr std::size_t kAnomalyKinds = 8;
// --8<-- [end:anomalies]

enum class Mode : std::uint8_t { Book = 0, Match = 1 };

// Test hook: a budget of growth steps (pool, map, book creation) after which the next
// one throws std::bad_alloc, so tests can check what a failed allocation leaves.
// Negative: no limit (the default).
struct GrowthBudget {
    std::int64_t left = -1;
    void spend() {
        if (left == 0) throw std::bad_alloc();
        if (left > 0) --left;
    }
    void spend_if(bool growing) {
        if (growing) spend();
    }
};

// --8<-- [start:refmap]
// Order reference -> a uint32 (book mode: the order's node; match mode: its locate), for
// every live order of the day. Open addressing with linear probing, at most half full,
// backward-shift deletion (no tombstones). A slot is 16 bytes, four to a 64-byte cache
// line; references in blocks of 8 get 8 neighbouring slots (two lines): NASDAQ numbers
// orders in sequence, so consecutive references rarely collide. The hash is keyed by a per-market random value, so a stream cannot
// be built in advance to pile its references onto one probe run.
class RefMap {
public:
    explicit RefMap(GrowthBudget* budget) : budget_(budget) {
        std::random_device rd;
        key_ = (std::uint64_t(rd()) << 32) ^ rd();
        alloc(16);
    }
    ~RefMap() { std::free(slots_); }
    RefMap(const RefMap&) = delete;
    RefMap& operator=(const RefMap&) = delete;

    static constexpr std::uint32_t kAbsent = 0xFFFF'FFFFu;

    [[gnu::always_inline]] std::uint32_t find(std::uint64_t ref) const {  // value or kAbsent
        for (std::uint64_t i = home(ref);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (!s.used) return kAbsent;
            if (s.ref == ref) return s.value;
        }
    }
    // The value of a present key, to change in place, or nullptr.
    std::uint32_t* value_of(std::uint64_t ref) {
        for (std::uint64_t i = home(ref);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.used) return nullptr;
            if (s.ref == ref) return &s.value;
        }
    }
    // Ask for the cache line of a key's home slot (a hint: no effect on the map).
    [[gnu::always_inline]] void prefetch(std::uint64_t ref) const {
        __builtin_prefetch(&slots_[home(ref)], 1);
    }
    // Called before an operation changes anything: afterwards one insert cannot fail.
    void reserve_one() {
        if ((size_ + 1) * 2 > mask_ + 1) [[unlikely]] rehash((mask_ + 1) * 2);
    }
    void insert(std::uint64_t ref, std::uint32_t value) {  // ref absent; reserve_one() first
        std::uint64_t i = home(ref);
        while (slots_[i].used) i = (i + 1) & mask_;
        slots_[i] = Slot{ref, value, 1};
        ++size_;
    }
    void erase(std::uint64_t ref) {  // no-op when absent
        std::uint64_t i = home(ref);
        for (;; i = (i + 1) & mask_) {
            if (!slots_[i].used) return;
            if (slots_[i].ref == ref) break;
        }
        // Backward shift: an entry later in the run moves into the hole if the hole lies
        // between its home slot and where it sits now.
        for (std::uint64_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
            std::uint64_t h = home(slots_[j].ref);
            if (((j - h) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].used = 0;
        --size_;
    }
    std::uint64_t size() const { return size_; }
    std::uint64_t capacity() const { return mask_ + 1; }

private:
    struct Slot {
        std::uint64_t ref;
        std::uint32_t value;
        std::uint32_t used;
    };
    static_assert(sizeof(Slot) == 16, "four slots per 64-byte cache line");

    std::uint64_t home(std::uint64_t ref) const {
        return ((IdHash::mix((ref >> 3) ^ key_) >> 32) + (ref & 7)) & mask_;
    }
    void alloc(std::uint64_t cap) {
        // calloc: used = 0 everywhere.
        auto* p = static_cast<Slot*>(std::calloc(cap, sizeof(Slot)));
        if (p == nullptr) throw std::bad_alloc();
        slots_ = p;
        mask_ = cap - 1;
        size_ = 0;
    }
    void rehash(std::uint64_t cap) {
        if (cap > (std::uint64_t(1) << 40)) throw std::length_error("reference map full");
        budget_->spend();
        Slot* old = slots_;
        std::uint64_t old_cap = mask_ + 1;
        alloc(cap);  // throws before anything is lost
        for (std::uint64_t k = 0; k < old_cap; ++k) {
            if (!old[k].used) continue;
            std::uint64_t i = home(old[k].ref);
            while (slots_[i].used) i = (i + 1) & mask_;
            slots_[i] = old[k];
            ++size_;
        }
        std::free(old);
    }
    Slot* slots_ = nullptr;
    std::uint64_t mask_ = 0;
    std::uint64_t size_ = 0;
    std::uint64_t key_ = 0;
    GrowthBudget* budget_;
};
// --8<-- [end:refmap]

// --8<-- [start:refindex]
// Order reference -> a uint32, for every live order of the day: the market's one order
// table. NASDAQ numbers orders densely and in increasing order through the day, so a
// reference below 2^34 indexes a table directly: its top 14 bits pick a directory block,
// the next 10 a page, the low 10 a slot (0 = empty, else the value + 1). Blocks and
// pages are allocated when the first reference in them arrives and released when their
// last one leaves (a few empty pages are kept for reuse, so a steady day does not call
// malloc), so memory follows the live range of references: an isolated live order costs
// at most one 8 KiB block and one 4 KiB page. A lookup is three dependent loads and no
// comparison of keys, whatever the references are: a stream cannot make it probe
// longer. References from 2^34 up (never seen in a real day, but any uint64 is valid)
// go to the hash map above.
class RefIndex {
public:
    static constexpr std::uint32_t kAbsent = RefMap::kAbsent;
    static constexpr unsigned kSlotBits = 10, kPageBits = 10, kTopBits = 14;
    static constexpr std::uint64_t kDirect = std::uint64_t(1) << (kSlotBits + kPageBits + kTopBits);

    explicit RefIndex(GrowthBudget* budget) : far_(budget), budget_(budget) {
        spare_.reserve(kSpare);
    }
    ~RefIndex() {
        for (Block* b : top_) {
            if (b == nullptr) continue;
            for (Page* p : b->pages) std::free(p);
            std::free(b);
        }
        for (Page* p : spare_) std::free(p);
    }
    RefIndex(const RefIndex&) = delete;
    RefIndex& operator=(const RefIndex&) = delete;

    [[gnu::always_inline]] std::uint32_t find(std::uint64_t ref) const {  // value or kAbsent
        if (ref >= kDirect) [[unlikely]] return far_find(ref);
        const std::uint32_t* slot = direct_slot(ref);
        return slot == nullptr ? kAbsent : *slot - 1;  // 0 - 1 wraps to kAbsent
    }
    // Ask for the cache line of a reference's slot (a hint: no effect on the table).
    [[gnu::always_inline]] void prefetch(std::uint64_t ref) const {
        if (ref >= kDirect) return;
        if (const std::uint32_t* slot = direct_slot(ref)) __builtin_prefetch(slot, 1);
    }
    // Called before an operation changes anything: afterwards insert(ref) cannot fail.
    // The page it makes sure of is pinned: erase() leaves it in place even if it empties,
    // so the operation may erase other references first (a replace, a match) and still
    // insert this one. Re-pinning releases the previous page if it is empty.
    // The common case (the same page as the last time) is inlined; the rest is not, so
    // that the message loop stays small.
    [[gnu::always_inline]] void reserve_for(std::uint64_t ref) {
        if (ref >> (kSlotBits + kPageBits) == pin_hi_ &&
            ((ref >> kSlotBits) & (kPages - 1)) == pin_page_) [[likely]]
            return;  // still the same page (a ref >= kDirect never matches: pin_hi_ < 2^14)
        reserve_slow(ref);
    }
    [[gnu::noinline]] void reserve_slow(std::uint64_t ref) {
        if (ref >= kDirect) return far_.reserve_one();
        std::uint64_t hi = ref >> (kSlotBits + kPageBits);
        std::size_t page = (ref >> kSlotBits) & (kPages - 1);
        if (hi >= top_.size()) [[unlikely]] {
            budget_->spend();
            top_.resize(hi + 1, nullptr);
        }
        Block*& b = top_[hi];
        if (b == nullptr) [[unlikely]] {
            budget_->spend();
            b = static_cast<Block*>(std::calloc(1, sizeof(Block)));
            if (b == nullptr) throw std::bad_alloc();
        }
        Page*& p = b->pages[page];
        if (p == nullptr) [[unlikely]] {
            if (!spare_.empty()) {
                p = spare_.back();  // all zeros: a page is spared only when its last ref left
                spare_.pop_back();
            } else {
                budget_->spend();
                p = static_cast<Page*>(std::calloc(1, sizeof(Page)));
                if (p == nullptr) throw std::bad_alloc();
            }
            ++b->live_pages;
        }
        // Nothing below can fail.
        std::uint64_t old_hi = pin_hi_;
        std::size_t old_page = pin_page_;
        pin_hi_ = hi;
        pin_page_ = page;
        if (old_hi < top_.size()) drop_if_empty(old_hi, old_page);
    }
    void insert(std::uint64_t ref, std::uint32_t value) {  // ref absent; reserve_for(ref) first
        ++size_;
        if (ref >= kDirect) [[unlikely]] return far_.insert(ref, value);
        Block* b = top_[ref >> (kSlotBits + kPageBits)];
        Page* p = b->pages[(ref >> kSlotBits) & (kPages - 1)];
        p->slot[ref & (kSlots - 1)] = value + 1;
        ++b->live[(ref >> kSlotBits) & (kPages - 1)];
    }
    [[gnu::always_inline]] void erase(std::uint64_t ref) {  // no-op when absent
        if (ref >= kDirect) [[unlikely]] return erase_far(ref);
        std::uint64_t hi = ref >> (kSlotBits + kPageBits);
        std::size_t page = (ref >> kSlotBits) & (kPages - 1);
        Block* b = hi < top_.size() ? top_[hi] : nullptr;
        Page* p = b != nullptr ? b->pages[page] : nullptr;
        if (p == nullptr || p->slot[ref & (kSlots - 1)] == 0) return;
        p->slot[ref & (kSlots - 1)] = 0;
        --size_;
        if (--b->live[page] == 0) [[unlikely]] drop_if_empty(hi, page);
    }
    [[gnu::noinline]] std::uint32_t far_find(std::uint64_t ref) const { return far_.find(ref); }
    [[gnu::noinline]] void erase_far(std::uint64_t ref) {
        if (far_.find(ref) != kAbsent) --size_;
        far_.erase(ref);
    }
    std::uint64_t size() const { return size_; }

private:
    static constexpr std::size_t kSlots = std::size_t(1) << kSlotBits;
    static constexpr std::size_t kPages = std::size_t(1) << kPageBits;
    static constexpr std::size_t kSpare = 16;
    struct Page {
        std::uint32_t slot[kSlots];
    };
    static_assert(sizeof(Page) == 4096, "one OS page");
    struct Block {
        Page* pages[kPages];
        std::uint16_t live[kPages];  // live references per page (at most 1024)
        std::uint64_t live_pages;
    };
    // The slot of a reference below kDirect, or nullptr if its block or page is absent.
    [[gnu::always_inline]] const std::uint32_t* direct_slot(std::uint64_t ref) const {
        const std::uint64_t hi = ref >> (kSlotBits + kPageBits);
        if (hi >= top_.size()) return nullptr;
        const Block* b = top_[hi];
        if (b == nullptr) return nullptr;
        const Page* p = b->pages[(ref >> kSlotBits) & (kPages - 1)];
        return p == nullptr ? nullptr : &p->slot[ref & (kSlots - 1)];
    }
    // Release page `page` of block `hi` if no reference lives in it and it is not pinned;
    // then the block too if it has no page left.
    [[gnu::noinline]] void drop_if_empty(std::uint64_t hi, std::size_t page) {
        Block* b = top_[hi];
        if (b == nullptr || b->pages[page] == nullptr || b->live[page] != 0) return;
        if (hi == pin_hi_ && page == pin_page_) return;
        Page* p = b->pages[page];
        b->pages[page] = nullptr;
        // All zeros again (every slot was emptied): keep a few for reuse. spare_ was
        // reserved up front, so push_back does not allocate.
        if (spare_.size() < kSpare) spare_.push_back(p); else std::free(p);
        if (--b->live_pages == 0) {
            std::free(b);
            top_[hi] = nullptr;
        }
    }
    RefMap far_;
    std::vector<Block*> top_;   // by ref >> 20, grown to the highest block used
    std::vector<Page*> spare_;  // empty pages kept for reuse
    std::uint64_t pin_hi_ = ~std::uint64_t(0);  // the page reserve_for() made sure of
    std::size_t pin_page_ = 0;
    std::uint64_t size_ = 0;
    GrowthBudget* budget_;
};
// --8<-- [end:refindex]

// --8<-- [start:storage]
// One resting order, of any symbol. 32 bytes: two to a 64-byte cache line.
struct MarketOrder {
    std::uint64_t ref;
    std::uint32_t shares;
    std::uint32_t price;  // its level is found from the price (see SideBook::slot)
    std::uint32_t next;   // younger order at the same price, or kNil (free: next free node)
    std::uint32_t prev;   // older order (meaningless in the level's head: see unlink_at)
    std::uint16_t locate;
    std::uint8_t side;    // 0 buy, 1 sell
    std::uint8_t pad_[5];
};
static_assert(sizeof(MarketOrder) == 32, "two order nodes per cache line");

// One price level: a FIFO of orders (oldest at head) and its total. 16 bytes, four to a
// line. No order count and no price: depth queries count the queue, the price is the
// slot's (or the far map's key). An empty level is {0, kNil, kNil}: a window's levels
// start so and are left so when their last order goes, so an add learns whether its
// level is new from the level itself (the line it is about to write anyway).
struct PriceLevel {
    std::uint64_t total;  // shares at this price (can exceed 2^32)
    std::uint32_t head;   // oldest order (the next to trade)
    std::uint32_t tail;   // youngest order (new arrivals join here)
};
static_assert(sizeof(PriceLevel) == 16, "four levels per cache line");
// --8<-- [end:storage]

// Test only: the largest first reservation an OrderPool may take, in bytes (0: no cap),
// so that the tests reach the fallback below (halving, then moving) without a ulimit.
inline std::atomic<std::size_t> g_pool_reservation_cap{0};

// --8<-- [start:pool]
// Every order of the market, addressed by a uint32 index into one flat array: node i is
// base_[i], one load from one base pointer on every access (a table of chunks costs a
// second, dependent load and a shift). At its first growth the pool reserves 1 GiB of
// address space (33.5M nodes; PROT_NONE pages are neither backed nor charged; all 2^32
// nodes, 128 GiB, would let only ~1,000 markets live in a process's 128 TiB) and makes
// it usable 65,536 nodes (2 MiB, one huge page) at a time with mprotect, which under
// strict overcommit is where running out of memory shows up: as a clean bad_alloc,
// before the operation changes anything. Within its reservation it never moves. If the
// reservation fills (or a smaller one was all it could get: a ulimit -v, a crowded
// address space; it halves until one is granted), the kernel moves the array into one
// twice the size (mremap: page tables move, the nodes are not copied), up to the
// 2^32 - 1 nodes a uint32 can name. Indices stay valid through all of it; a pointer into
// the pool may not, so none is held across reserve_one(). The free list is threaded
// through `next` of the free nodes, so in steady state an add reuses the node a cancel
// just freed (still in the cache).
class OrderPool {
public:
    static constexpr unsigned kChunkBits = 16;
    static constexpr std::uint32_t kChunk = std::uint32_t(1) << kChunkBits;

    explicit OrderPool(GrowthBudget* budget) : budget_(budget) {
        const std::size_t cap = g_pool_reservation_cap.load(std::memory_order_relaxed);
        while (cap != 0 && first_ > kStep && first_ > cap) first_ /= 2;
    }
    ~OrderPool() {
        if (base_ != nullptr) munmap(base_, reserved_);
    }
    OrderPool(const OrderPool&) = delete;
    OrderPool& operator=(const OrderPool&) = delete;

    [[gnu::always_inline]] MarketOrder& operator[](std::uint32_t i) { return base_[i]; }
    [[gnu::always_inline]] const MarketOrder& operator[](std::uint32_t i) const {
        return base_[i];
    }
    void prefetch(std::uint32_t i) const { __builtin_prefetch(&base_[i], 1); }
    // For an index read from a node (a neighbour, a level's tail): kNil or stale values
    // are skipped, so no address past the usable nodes is formed.
    void prefetch_any(std::uint32_t i) const {
        if (i < used_) __builtin_prefetch(&base_[i], 1);
    }
    // Called before an operation changes anything: afterwards alloc() cannot fail.
    void reserve_one() {
        if (free_ == kNil && used_ == cap_) [[unlikely]] grow();
    }
    std::uint32_t alloc() {  // precondition: reserve_one() since the last alloc
        if (free_ != kNil) [[likely]] {
            std::uint32_t i = free_;
            free_ = base_[i].next;
            return i;
        }
        return static_cast<std::uint32_t>(used_++);
    }
    void release(std::uint32_t i) {
        base_[i].next = free_;
        free_ = i;
    }
    // Usable nodes, in chunks of 65,536 (the last may be short: kNil is not an index).
    std::size_t chunks() const { return static_cast<std::size_t>((cap_ + kChunk - 1) / kChunk); }
    // Bytes of address space reserved (tests: the fallback's halving and moves).
    std::size_t reserved() const { return reserved_; }

private:
    static constexpr std::size_t kStep = std::size_t(kChunk) * sizeof(MarketOrder);  // 2 MiB
    static constexpr std::size_t kAll = (std::size_t(1) << 32) * sizeof(MarketOrder);
    static constexpr std::size_t kFirst = std::size_t(1) << 30;
    static_assert(kStep == kHugePage, "a growth step is one huge page");

    [[gnu::noinline]] void grow() {
        // kNil (2^32 - 1) means "no order": indices stop one short of it.
        if (cap_ >= kNil) throw std::length_error("more than 2^32-1 live orders");
        budget_->spend();
        alloc_checkpoint();
        const std::size_t have = static_cast<std::size_t>(cap_ / kChunk) * kStep;
        if (have + kStep > reserved_) enlarge(have + kStep);  // may throw: nothing changed
        if (mprotect(base_ + cap_, kStep, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
        madvise(base_ + cap_, kStep, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
        cap_ = std::min<std::uint64_t>(cap_ + kChunk, kNil);
    }
    // Room for `need` bytes: the first reservation, or a move into one twice the size.
    [[gnu::noinline]] void enlarge(std::size_t need) {
        if (base_ == nullptr) {
            for (std::size_t b = first_; b >= kStep; b /= 2)
                if (void* p = reserve_aligned(b)) {
                    base_ = static_cast<MarketOrder*>(p);
                    reserved_ = b;
                    return;
                }
            throw std::bad_alloc();
        }
        const std::size_t b = std::max(need, std::min(reserved_ * 2, kAll));
        // The whole reservation is usable (it is full), so it is one mapping to move.
        void* p = mremap(base_, reserved_, b, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) throw std::bad_alloc();
        base_ = static_cast<MarketOrder*>(p);
        reserved_ = b;  // the new part is usable already: mprotect below is a no-op on it
    }
    // `bytes` of PROT_NONE address space starting on a 2 MiB boundary (huge pages), or
    // nullptr: an over-sized mapping trimmed at both ends.
    static void* reserve_aligned(std::size_t bytes) {
        const std::size_t over = bytes + kStep;
        void* p = mmap(nullptr, over, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return nullptr;
        const auto at = reinterpret_cast<std::uintptr_t>(p);
        const std::uintptr_t start = (at + kStep - 1) & ~std::uintptr_t(kStep - 1);
        if (start != at) munmap(p, start - at);
        if (at + over != start + bytes)
            munmap(reinterpret_cast<void*>(start + bytes), at + over - (start + bytes));
        return reinterpret_cast<void*>(start);
    }
    std::size_t first_ = kFirst;   // the first reservation to try (smaller in tests)
    MarketOrder* base_ = nullptr;  // reserved_ bytes of address space; cap_ nodes usable
    std::size_t reserved_ = 0;
    std::uint64_t used_ = 0;  // nodes ever handed out (the rest are untouched)
    std::uint64_t cap_ = 0;
    std::uint32_t free_ = kNil;
    GrowthBudget* budget_;
};
// --8<-- [end:pool]

// --8<-- [start:window]
// Levels outside a side's window, or off its tick grid: price -> level, in price order.
using FarMap = std::pmr::map<std::uint32_t, PriceLevel>;

// One side of one locate's book. The window holds n levels, level k at price
// base + k * tick; a bitset (one bit per level, and a summary bit per 64-bit word) says
// which are non-empty, so the next best price is a couple of count-leading-zeros away.
// The tick is 100 (one cent) for a book whose first price is a whole cent from $1 up,
// else 1; a price the grid cannot hold goes to the far map, as does any price outside
// the window. 64 bytes: one cache line, read by every message on this side.
struct alignas(64) SideBook {
    PriceLevel* lv = nullptr;       // n levels (one allocation with the bitset)
    std::uint64_t* bits = nullptr;  // words(n) words, then summary_words(n)
    FarMap* far = nullptr;          // created at the first far price
    std::uint32_t base = 0;         // the price of level 0
    std::uint32_t span = 0;         // n * tick: prices base .. base + span - 1
    std::uint32_t n = 0;            // 0 until the side's first order
    std::uint32_t tick = 0;         // set with the window (0 before: span 0 says "none")
    std::uint32_t magic = 0;        // (d * magic) >> 31 == d / tick for every d < 2^24
    std::uint32_t orders = 0;       // resting orders on this side
    std::uint32_t far_ops = 0;      // operations on far levels since the window last moved
    std::uint8_t off_grid = 0;      // a far price off the cent grid was seen

    static std::uint32_t words(std::uint32_t n) { return (n + 63) / 64; }
    static std::uint32_t summary_words(std::uint32_t n) { return (words(n) + 63) / 64; }

    // The window slot of a price, or n if the window cannot hold it. Prices are checked
    // as unsigned distances from base, so a price below base wraps to a huge distance.
    [[gnu::always_inline]] std::uint32_t slot(std::uint32_t price) const {
        const std::uint32_t d = price - base;
        if (d >= span) return n;
        const auto q = static_cast<std::uint32_t>((std::uint64_t(d) * magic) >> 31);
        return q * tick == d ? q : n;
    }
    std::uint32_t price_at(std::uint32_t k) const { return base + k * tick; }
    bool has(std::uint32_t k) const { return (bits[k >> 6] >> (k & 63)) & 1; }
    void set(std::uint32_t k) {
        bits[k >> 6] |= std::uint64_t(1) << (k & 63);
        bits[words(n) + (k >> 12)] |= std::uint64_t(1) << ((k >> 6) & 63);
    }
    void clear(std::uint32_t k) {
        std::uint64_t& w = bits[k >> 6];
        w &= ~(std::uint64_t(1) << (k & 63));
        if (w == 0) bits[words(n) + (k >> 12)] &= ~(std::uint64_t(1) << ((k >> 6) & 63));
    }
    // The highest non-empty level at or below k (k < n), or -1.
    std::int64_t highest_at_or_below(std::uint32_t k) const {
        std::uint32_t w = k >> 6;
        std::uint64_t m = bits[w] & (~std::uint64_t(0) >> (63 - (k & 63)));
        if (m != 0) return std::int64_t(w) * 64 + 63 - std::countl_zero(m);
        if (w == 0) return -1;
        const std::uint64_t* sum = bits + words(n);
        std::uint32_t j = w - 1;  // words below w, through the summary
        std::int64_t s = j >> 6;
        std::uint64_t sm = sum[s] & (~std::uint64_t(0) >> (63 - (j & 63)));
        for (;;) {
            if (sm != 0) {
                std::uint32_t word = std::uint32_t(s) * 64 + 63 - std::countl_zero(sm);
                return std::int64_t(word) * 64 + 63 - std::countl_zero(bits[word]);
            }
            if (--s < 0) return -1;
            sm = sum[s];
        }
    }
    // The lowest non-empty level at or above k, or -1 (k may be n: none).
    std::int64_t lowest_at_or_above(std::uint32_t k) const {
        if (k >= n) return -1;
        std::uint32_t w = k >> 6;
        std::uint64_t m = bits[w] & (~std::uint64_t(0) << (k & 63));
        if (m != 0) return std::int64_t(w) * 64 + std::countr_zero(m);
        const std::uint64_t* sum = bits + words(n);
        const std::uint32_t j = w + 1;
        if (j >= words(n)) return -1;
        std::uint32_t s = j >> 6;
        std::uint64_t sm = sum[s] & (~std::uint64_t(0) << (j & 63));
        for (;;) {
            if (sm != 0) {
                std::uint32_t word = s * 64 + std::countr_zero(sm);
                return std::int64_t(word) * 64 + std::countr_zero(bits[word]);
            }
            if (++s >= summary_words(n)) return -1;
            sm = sum[s];
        }
    }
};
static_assert(sizeof(SideBook) == 64, "one cache line per side");

// Everything a message reads about its locate besides its side, in one line: an E or a
// D touches this line, its side's line, its order and its level.
struct alignas(64) LocateState {
    std::uint64_t activity = 0;      // book messages (A F E C X D U), both modes
    std::uint64_t since = 0;         // when the book became locked or crossed (ITCH ns)
    std::uint32_t best[2] = {0, 0};  // best bid, best ask (0: none)
    char name[8] = {};               // raw bytes of the R message, if `named`
    std::uint16_t trading = 0;       // 0x100 | trading state of the last H, or 0
    std::uint8_t state = 0;          // 0 normal, 1 locked (bid = ask), 2 crossed (bid > ask)
    std::uint8_t has_book = 0;       // an add has applied here (what `books` counts)
    std::uint8_t named = 0;          // an R message named it (else its name is 8 spaces)
};
static_assert(sizeof(LocateState) == 64, "one cache line per locate");
inline std::string name_of(const LocateState& s) {
    return s.named ? show_stock(s.name) : show_stock("        ");
}

struct Locate {
    LocateState s;
    SideBook side[2];  // [0] bids, [1] asks
};
static_assert(sizeof(Locate) == 192, "three cache lines per locate");

// A fresh Locate is all zero bytes (every field above starts at 0, false or nullptr):
// that is what lets LocateTable take its memory from the kernel's zero pages. Checked
// here field by field, so that a new field with another start fails to compile.
constexpr bool fresh_locate_is_zero() {
    const Locate l{};
    const LocateState& t = l.s;
    bool zero = t.activity == 0 && t.since == 0 && t.best[0] == 0 && t.best[1] == 0 &&
                t.trading == 0 && t.state == 0 && t.has_book == 0 && t.named == 0;
    for (char c : t.name) zero = zero && c == 0;
    for (const SideBook& b : l.side)
        zero = zero && b.lv == nullptr && b.bits == nullptr && b.far == nullptr &&
               b.base == 0 && b.span == 0 && b.n == 0 && b.tick == 0 && b.magic == 0 &&
               b.orders == 0 && b.far_ops == 0 && b.off_grid == 0;
    return zero;
}
static_assert(fresh_locate_is_zero(), "LocateTable's zero pages must be fresh Locates");
static_assert(std::is_trivially_copyable_v<Locate> && std::is_trivially_destructible_v<Locate>,
              "an implicit-lifetime type: zeroed memory holds Locates without constructing them");

// The table of all 65,536 locates (12.6 MB), mapped from the kernel's zero pages: a page
// is only made real when a message first writes to one of its 21 locates, so a market
// costs the pages of the locates its day uses, not 3,072 page faults and 12.6 MB of
// zeroing at construction and a 12.6 MB walk at destruction (`touched` bounds the walks).
class LocateTable {
public:
    static constexpr std::size_t kCount = 0x1'0000;
    LocateTable() {
        void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        p_ = static_cast<Locate*>(p);  // page-aligned, so each Locate's lines are too
    }
    ~LocateTable() { munmap(p_, kBytes); }
    LocateTable(const LocateTable&) = delete;
    LocateTable& operator=(const LocateTable&) = delete;
    [[gnu::always_inline]] Locate& operator[](std::size_t i) { return p_[i]; }
    [[gnu::always_inline]] const Locate& operator[](std::size_t i) const { return p_[i]; }
    // 1 + the highest locate written so far: every locate above it is still fresh.
    std::size_t touched() const { return touched_; }
    void touch(std::uint16_t locate) {
        touched_ = std::max<std::size_t>(touched_, std::size_t(locate) + 1);
    }
    void touch(const Locate& l) { touch(static_cast<std::uint16_t>(&l - p_)); }

private:
    static constexpr std::size_t kBytes = sizeof(Locate) * kCount;
    Locate* p_ = nullptr;
    std::size_t touched_ = 0;
};
// --8<-- [end:window]

// Message counts, fills, anomalies and rejects: what a replay reports.
struct MarketCounts {
    std::array<std::uint64_t, 256> events{};             // by ITCH type byte
    std::array<std::uint64_t, kAnomalyKinds> anomalies{};
    std::array<std::uint64_t, 8> rejects{};              // by Reason (match mode)
    std::uint64_t fills = 0;
    std::uint64_t volume = 0;                            // shares in all fills
};

// Locked / crossed books (book mode): episodes entered and time spent, by state.
struct BookStates {
    std::uint64_t episodes[3] = {0, 0, 0};  // [1] locked, [2] crossed
    std::uint64_t ns[3] = {0, 0, 0};
    std::uint64_t now[3] = {0, 0, 0};       // books in the state at the time of asking
};

// Window statistics (for the tests and the chapter): how the windows were sized.
struct WindowStats {
    std::uint64_t windows = 0;      // sides with a window now
    std::uint64_t levels = 0;       // their levels (window slots) in all
    std::uint64_t largest = 0;      // the largest window
    std::uint64_t far_levels = 0;   // levels in the far maps now
    std::uint64_t moves = 0;        // window moves and resizes so far
    std::uint64_t pool_chunks = 0;  // chunks of 65,536 order nodes made usable
    std::uint64_t pool_reserved = 0;  // bytes of address space the pool has reserved
};

class Market {
public:
    static constexpr std::uint64_t kNoLocate = 0x1'0000;  // locates are uint16
    // A side's window starts at kMinWindow levels and may double up to window_levels
    // (at most kMaxWindow: 131,072 levels of one cent span $1,310.72, and keep the
    // tick arithmetic below 2^24).
    static constexpr std::uint32_t kMinWindow = 32;
    static constexpr std::uint32_t kMaxWindow = std::uint32_t(1) << 17;
    // A window grows only while its side rests at least one order per kLevelsPerOrder
    // levels: a window's memory (16 bytes a level) stays within 16 * kLevelsPerOrder
    // bytes per resting order (or kMinWindow levels), except that the market's windows
    // may hold kFreeLevels levels in all (16 MiB) whatever their orders: a day of a few
    // symbols gets windows that cover its prices at once, a day of thousands the rule.
    static constexpr std::uint64_t kLevelsPerOrder = 16;
    static constexpr std::uint64_t kFreeLevels = std::uint64_t(1) << 20;
    static constexpr std::uint64_t kDefaultWindow = kMaxWindow;

    explicit Market(Mode mode, std::uint64_t window_levels = kDefaultWindow)
        : mode_(mode), refs_(&budget_), orders_(&budget_) {
        if (window_levels < kMinWindow || window_levels > kMaxWindow ||
            !std::has_single_bit(window_levels))
            throw std::invalid_argument("window_levels must be a power of two in 32..131072");
        window_cap_ = static_cast<std::uint32_t>(window_levels);
    }
    ~Market() {
        for (std::size_t i = 0; i < loc_.touched(); ++i)
            for (SideBook& sb : loc_[i].side) {
                std::free(sb.lv);
                delete sb.far;  // its nodes go back to pool_, which outlives nothing here
            }
    }
    Market(const Market&) = delete;
    Market& operator=(const Market&) = delete;

    Mode mode() const { return mode_; }
    const MarketCounts& counts() const { return counts_; }
    std::size_t live_orders() const { return refs_.size(); }
    std::size_t books() const { return n_books_; }
    std::uint64_t activity(std::uint16_t locate) const { return loc_[locate].s.activity; }
    // 1 + the highest locate any message has named: every locate from here up is fresh
    // (a walk over all locates stops here, and reads none of the untouched table).
    std::size_t locates_touched() const { return loc_.touched(); }
    std::string stock(std::uint16_t locate) const { return name_of(loc_[locate].s); }
    // 0 if no H message named the locate, else 0x100 | the trading state byte.
    std::uint16_t trading_state(std::uint16_t locate) const { return loc_[locate].s.trading; }
    std::size_t applied() const { return applied_; }  // events of the last run() applied
    // Book-mode events refused so far (an anomaly other than a locate mismatch: the event
    // changed nothing). Unchanged across one event = it applied (tables.hpp reads this
    // instead of looking the order up again afterwards).
    std::uint64_t refused() const { return refused_; }
    void set_growth_budget(std::int64_t steps) { budget_.left = steps; }
    // Look-ahead on (by the working set, the default: see stages_now) or off.
    void set_lookahead(bool on) { lookahead_ = on ? kAuto : 0; }
    // Benchmark hook: exactly the first `stages` of the three look-ahead stages (0 = none),
    // whatever the working set.
    void set_lookahead_stages(unsigned stages) { lookahead_ = std::min(stages, kStages); }
    std::uint32_t window_cap() const { return window_cap_; }
    // Match mode: the batch engine runs for batches of at least `events` events (0: never;
    // tests set 1 to reach it with small streams, the ablation benchmark 0).
    void set_match_batch(std::size_t events) { batch_min_ = events; }
    std::size_t match_batch() const { return batch_min_; }
    std::uint64_t batch_runs() const { return batch_runs_; }  // runs the batch engine took

    WindowStats window_stats() const {
        WindowStats w;
        for (std::size_t i = 0; i < loc_.touched(); ++i)
            for (const SideBook& sb : loc_[i].side) {
                if (sb.n != 0) {
                    ++w.windows;
                    w.levels += sb.n;
                    w.largest = std::max<std::uint64_t>(w.largest, sb.n);
                }
                if (sb.far != nullptr) w.far_levels += sb.far->size();
            }
        w.moves = moves_;
        w.pool_chunks = orders_.chunks();
        w.pool_reserved = orders_.reserved();
        return w;
    }

    // --8<-- [start:run]
    // Apply n events in order. Every fill is appended to `fills` with op_index = its
    // event's index. An event either applies entirely or (out of memory) not at all.
    void run(const ItchEvent* ev, std::size_t n, std::vector<FillRecord>& fills) {
        applied_ = 0;
        // Match mode, an empty market, a batch worth it: the batch engine (below), if
        // the batch qualifies; else (it changed nothing) the loop.
        if (mode_ == Mode::Match && batch_min_ != 0 && n >= batch_min_ &&
            refs_.size() == 0 && run_batch(ev, n, fills))
            return;
        const unsigned st = stages_now();
        for (std::size_t k = 0; k < n; ++k) {
            if (st != 0) {  // prefetch for the events ahead (lookahead, below)
                if (k + kAhead < n) hint_slot(ahead_of(ev[k + kAhead]), st);
                if (st > 1 && k + kNode < n) hint_node(ahead_of(ev[k + kNode]));
                if (st > 2 && k + kLevel < n) hint_level(ahead_of(ev[k + kLevel]));
            }
            apply(ev[k], static_cast<std::uint32_t>(k), fills);
            applied_ = k + 1;
        }
    }
    // --8<-- [end:run]

    // One event, for a caller that steps event by event (tables.hpp, which writes rows
    // between events): run(&e, 1, fills) without the loop, the look-ahead and the call
    // (inlined into the caller's own loop). Fills get op_index 0.
    [[gnu::always_inline]] void step(const ItchEvent& e, std::vector<FillRecord>& fills) {
        applied_ = 0;
        apply(e, 0, fills);
        applied_ = 1;
    }

    // --8<-- [start:run_itch]
    // Decode and apply in one pass: the framed ITCH records of buf[0, n) (checked and
    // counted exactly as itch::scan does: same framing rules, same errors, a partial
    // record at the end left for the caller), each applied as soon as it is decoded.
    // Nothing goes through memory between the two: the event is a local (in registers or
    // the L1 cache), where run() reads a 56-byte record per message back from an array
    // that the decoder wrote out, and a big batch's array no longer fits in the caches.
    // `counts` (256, by type byte) is added to; fills get op_index = the event's index
    // among this call's events, as if scan() had produced them and run() applied them.
    itch::ScanResult run_itch(const std::uint8_t* buf, std::size_t n, std::uint64_t* counts,
                              std::vector<FillRecord>& fills) {
        applied_ = 0;
        itch::ScanResult r;
        std::size_t off = 0;
        std::uint32_t k = 0;
        ItchEvent e;
        Lookahead la(buf, n, stages_now());  // hints for the records ahead (below)
        look_first(la);
        while (n - off >= 2) {
            look_next(la);
            const std::size_t len = itch::be16(buf + off);
            if (len == 0) {
                r.error = itch::Error::ZeroLength;
                break;
            }
            if (n - off - 2 < len) break;  // partial record: the caller's next window
            const std::uint8_t* msg = buf + off + 2;
            const std::uint8_t type = msg[0];
            const std::size_t want = itch::kLength[type];
            if (want != len) [[unlikely]] {
                if (want != 0) {
                    r.error = itch::Error::BadLength;
                    r.error_type = type;
                    r.error_length = static_cast<std::uint16_t>(len);
                    break;
                }
                ++counts[type];  // unknown type: counted, skipped
                off += 2 + len;
                continue;
            }
            ++counts[type];
            if (itch::decode_event(msg, e)) {  // reads exactly `want` bytes
                apply(e, k, fills);
                applied_ = ++k;
            }
            off += 2 + len;
        }
        r.consumed = off;
        r.events = k;
        return r;
    }
    // --8<-- [end:run_itch]

    // --8<-- [start:lookahead]
    // Software prefetching. A message's cost is mostly waiting for memory: the slot of its
    // reference, then the order node the slot names, then the level and the neighbours the
    // node names; each address is known only when the load before it arrives. While one
    // message is applied, the loop runs three stages for the messages ahead:
    //   1. kAhead records ahead: the reference's slot and its locate's three lines (the
    //      message names its locate); an add: its locate's line and its side's line;
    //   2. kNode ahead: the order node the slot names (the slot has had two messages'
    //      time to arrive); an add: its level;
    //   3. kLevel ahead: what the node leads to: its level, its bitset word and its queue
    //      neighbours, which an unlink writes; an add: its level's youngest order, which
    //      the new order is linked behind, and its bitset word.
    // Hints only: a prefetch never faults and changes nothing, and every address comes
    // from a lookup with its usual bounds checks (a stale or unknown reference prefetches
    // a line in vain). set_lookahead_stages(n) runs exactly the first n, for the
    // benchmark that shows what each buys.
    static constexpr unsigned kAhead = 4, kNode = 2, kLevel = 1, kStages = 3;
    // By default (set_lookahead(true)) the stages run only while the market's working set
    // (a line per live order, for its node and slot, plus the windows' levels) outgrows
    // half the last-level cache (its size from the kernel, once: see last_level_cache).
    // Below that, the lines mostly come from that cache, in a few tens of cycles that the
    // out-of-order core overlaps by itself, and the hints cost more instructions than they
    // save waiting. The paired benchmarks `market-lookahead-rule` (1 symbol) and
    // `market-lookahead-rule-500` show what the rule saves, `market-step-*` (the 20M-message,
    // 4,000-symbol day) what the stages buy past it.
    static constexpr unsigned kAuto = 255;
    static constexpr std::uint64_t kLineBytesPerOrder = 64;  // its node and reference slot
    std::uint64_t working_set_bytes() const {
        return live_orders() * kLineBytesPerOrder + window_levels_ * sizeof(PriceLevel);
    }
    unsigned stages_now() const {  // what the next run() or run_itch() call will run
        if (lookahead_ != kAuto) return lookahead_;
        return working_set_bytes() > cache_bytes_ / 2 ? kStages : 0;
    }
    // The largest cache of cpu0 as the kernel describes it (sysfs: "16384K"), else what
    // sysconf says (L3, else L2), else 1 MiB; never more than kCacheCap. sysfs first: in a
    // virtual machine, sysconf may read the CPUID of the host's whole processor (on one
    // machine here 256 MiB of L3, where the kernel said 16 MiB). And the cap: on another,
    // the kernel itself said 260 MiB (the host's L3, shared with every other guest), the
    // rule never ran the stages, and the 4,000-symbol day lost what `market-step-prefetch`
    // shows they buy there. The cap is what a core can count on holding, not a reading.
    static constexpr std::uint64_t kCacheCap = std::uint64_t(16) << 20;
    static std::uint64_t last_level_cache() {
        static const std::uint64_t bytes = [] {
            std::uint64_t best = 0;
            for (int i = 0; i < 8; ++i) {
                const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" +
                                        std::to_string(i) + "/";
                std::FILE* f = std::fopen((dir + "size").c_str(), "r");
                if (f == nullptr) break;
                unsigned long long n = 0;
                char unit = 0;
                const int got = std::fscanf(f, "%llu%c", &n, &unit);
                std::fclose(f);
                if (got < 1) continue;
                const std::uint64_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
                best = std::max<std::uint64_t>(best, std::uint64_t(n) * scale);
            }
            for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
                const long b = ::sysconf(name);
                if (best == 0 && b > 0) best = std::uint64_t(b);
            }
            return std::min(best != 0 ? best : std::uint64_t(1) << 20, kCacheCap);
        }();
        return bytes;
    }
    static_assert(kLevel < kNode && kNode < kAhead && kAhead < 8, "the ring holds 8 records");

    // What a record ahead asks for: its kind (0 nothing, 1 a reference, 2 an add) and key.
    struct Ahead {
        std::uint64_t key;  // the reference, or an add's locate << 33 | side << 32 | price
        std::uint8_t kind;
        std::uint16_t locate;  // a reference's message names its locate too
    };
    // The look-ahead over framed records, for a loop that decodes and applies them one by
    // one (run_itch, and tables.hpp's builder): a cursor kAhead records ahead of the one
    // applied, and a ring of what the last eight records ahead asked for, by record number.
    struct Lookahead {
        Lookahead(const std::uint8_t* b, std::size_t len, unsigned stages)
            : buf(b), n(len), st(stages) {}
        const std::uint8_t* buf;
        std::size_t n;
        unsigned st;               // stages to run (0: none)
        std::size_t cursor = 0;    // the next record ahead
        std::uint32_t ahead = 0;   // its record number (this loop's records from 0)
        std::array<Ahead, 8> ring{};
        // What this record's step asked of stage 1 (kAhead ahead: a ring entry) and the
        // order stage 3 found (kLevel ahead; nullptr if none), for a caller's own hints.
        const Ahead* first = nullptr;
        const MarketOrder* order = nullptr;
    };
    void look_first(Lookahead& la) const {  // stage 1 of the first kAhead records
        if (la.st == 0) return;
        for (; la.ahead < kAhead; ++la.ahead) {
            la.ring[la.ahead] = ahead_of(next_record(la.buf, la.n, la.cursor));
            hint_slot(la.ring[la.ahead], la.st);
        }
    }
    // Before each record is applied: record `ahead` is kAhead past it.
    [[gnu::always_inline]] void look_next(Lookahead& la) const {
        if (la.st == 0) return;
        // Written in place and read field by field, never copied whole: a copy of a struct
        // just written a field at a time is one wide load over narrow stores, which the
        // core cannot forward from its store queue; it waits for the stores to retire
        // (an earlier version copied it, and perf put half the builder's samples there).
        Ahead& a = la.ring[la.ahead & 7];
        a = ahead_of(next_record(la.buf, la.n, la.cursor));
        la.first = &a;
        hint_slot(a, la.st);
        if (la.st > 1) hint_node(la.ring[(la.ahead - (kAhead - kNode)) & 7]);
        if (la.st > 2) la.order = hint_level(la.ring[(la.ahead - (kAhead - kLevel)) & 7]);
        ++la.ahead;
    }
    static constexpr std::array<std::uint8_t, 256> kKind = [] {
        std::array<std::uint8_t, 256> t{};
        for (std::uint8_t c : {'E', 'C', 'X', 'D', 'U'}) t[c] = 1;
        t['A'] = t['F'] = 2;
        return t;
    }();

    // The record at cursor c (nullptr unless it is whole and of its type's length, so the
    // fields read below are inside it); c moves to the next record (to n at a partial or
    // malformed one: the message loop is the one that reports errors).
    [[gnu::always_inline]] static const std::uint8_t* next_record(const std::uint8_t* buf,
                                                                  std::size_t n, std::size_t& c) {
        if (n - c < 3) {
            c = n;
            return nullptr;
        }
        const std::size_t len = itch::be16(buf + c);
        if (len == 0 || n - c - 2 < len) {
            c = n;
            return nullptr;
        }
        const std::uint8_t* msg = buf + c + 2;
        c += 2 + len;
        return itch::kLength[msg[0]] == len ? msg : nullptr;
    }
    [[gnu::always_inline]] static Ahead ahead_of(const std::uint8_t* msg) {
        if (msg == nullptr) return Ahead{0, 0, 0};
        const std::uint8_t kind = kKind[msg[0]];
        if (kind == 1) return Ahead{itch::be64(msg + 11), 1, itch::be16(msg + 1)};
        if (kind == 2)
            return Ahead{(std::uint64_t(itch::be16(msg + 1)) << 33) |
                         (std::uint64_t(msg[19] == 'S') << 32) | itch::be32(msg + 32), 2, 0};
        return Ahead{0, 0, 0};
    }
    [[gnu::always_inline]] static Ahead ahead_of(const ItchEvent& e) {
        const std::uint8_t kind = kKind[e.type];
        if (kind == 1) return Ahead{e.order_ref, 1, e.locate};
        if (kind == 2)
            return Ahead{(std::uint64_t(e.locate) << 33) | (std::uint64_t(e.side == 'S') << 32) |
                         e.price, 2, 0};
        return Ahead{0, 0, 0};
    }
    // Stage 1 (kAhead records ahead): the reference's slot, or the add's locate lines.
    [[gnu::always_inline]] void hint_slot(const Ahead& a, unsigned st) const {
        if (a.kind == 1) {
            refs_.prefetch(a.key);
            if (st > 2) {  // its locate's lines (which side: the node will say)
                const Locate& l = loc_[a.locate];
                __builtin_prefetch(&l.s, 1);
                __builtin_prefetch(&l.side[0], 1);
                __builtin_prefetch(&l.side[1], 1);
            }
            return;
        }
        if (a.kind == 2) {
            const Locate& l = loc_[a.key >> 33];
            __builtin_prefetch(&l.s, 1);
            __builtin_prefetch(&l.side[(a.key >> 32) & 1], 1);
        }
    }
    // Stage 2 (kNode records ahead): the order node the slot names, or the add's level.
    [[gnu::always_inline]] void hint_node(const Ahead& a) const {
        if (a.kind == 1) {
            if (a.key >= RefIndex::kDirect) return;
            const std::uint32_t i = refs_.find(a.key);
            if (i != RefIndex::kAbsent) orders_.prefetch(i);
        } else if (a.kind == 2) {
            const SideBook& sb = loc_[a.key >> 33].side[(a.key >> 32) & 1];
            const std::uint32_t k = sb.slot(static_cast<std::uint32_t>(a.key));
            if (k < sb.n) __builtin_prefetch(&sb.lv[k], 1);
        }
    }
    // Stage 3 (kLevel records ahead): what the node (or the add's level) leads to. A
    // reference: its side's window line, its level and its queue neighbours (an unlink
    // writes them); an add: the level's youngest order (the new one is linked behind it).
    // Returns the order a reference names (nullptr if none, or an add).
    [[gnu::always_inline]] const MarketOrder* hint_level(const Ahead& a) const {
        if (a.kind == 1) {
            if (a.key >= RefIndex::kDirect) return nullptr;
            const std::uint32_t i = refs_.find(a.key);
            if (i == RefIndex::kAbsent) return nullptr;
            const MarketOrder& o = orders_[i];
            const SideBook& sb = loc_[o.locate].side[o.side & 1];
            const std::uint32_t k = sb.slot(o.price);
            if (k < sb.n) {
                __builtin_prefetch(&sb.lv[k], 1);
                __builtin_prefetch(&sb.bits[k >> 6], 1);
            }
            orders_.prefetch_any(o.prev);
            orders_.prefetch_any(o.next);
            return &o;
        }
        if (a.kind == 2) {
            const SideBook& sb = loc_[a.key >> 33].side[(a.key >> 32) & 1];
            const std::uint32_t k = sb.slot(static_cast<std::uint32_t>(a.key));
            if (k < sb.n) {
                orders_.prefetch_any(sb.lv[k].tail);
                __builtin_prefetch(&sb.bits[k >> 6], 1);
            }
        }
        return nullptr;
    }
    // --8<-- [end:lookahead]

    // ---- queries (both modes) ----

    // Best price and its total shares of one side of a locate's book; price 0 if none.
    std::uint32_t best(std::uint16_t locate, Side side, std::uint64_t& qty) const {
        const Locate& l = loc_[locate];
        const std::uint32_t p = l.s.best[int(side)];
        qty = p == 0 ? 0 : peek_level(l.side[int(side)], p).total;
        return p;
    }

    // Up to max_levels levels of one side, best first, as DepthRow(price, total, orders).
    template <class Out>
    void depth(std::uint16_t locate, Side side, std::int64_t max_levels, Out&& out) const {
        if (max_levels <= 0) return;
        std::int64_t emitted = 0;
        for_each_level(loc_[locate].side[int(side)], side == Side::Sell,
                       [&](std::uint32_t price, const PriceLevel& l) {
                           std::uint32_t count = 0;
                           for (std::uint32_t i = l.head; i != kNil; i = orders_[i].next) ++count;
                           out(DepthRow{price, l.total, count});
                           return ++emitted < max_levels;
                       });
    }

    // depth() without the order counts (which walk each level's queue): (price, total)
    // of up to max_levels levels, best first. For the research tables (tables.hpp).
    template <class Out>
    void depth_totals(std::uint16_t locate, Side side, std::int64_t max_levels, Out&& out) const {
        if (max_levels <= 0) return;
        std::int64_t emitted = 0;
        for_each_level(loc_[locate].side[int(side)], side == Side::Sell,
                       [&](std::uint32_t price, const PriceLevel& l) {
                           out(price, l.total);
                           return ++emitted < max_levels;
                       });
    }

    // (locate, side, price, shares) of a live order.
    bool order(std::uint64_t ref, std::uint16_t& locate, Side& side, std::uint32_t& price,
               std::uint32_t& shares) const {
        std::uint32_t i = refs_.find(ref);
        if (i == RefIndex::kAbsent) return false;
        const MarketOrder& o = orders_[i];
        locate = o.locate;
        side = Side(o.side);
        price = o.price;
        shares = o.shares;
        return true;
    }

    BookStates book_states() const {
        BookStates s;
        for (int k = 1; k < 3; ++k) {
            s.episodes[k] = states_.episodes[k];
            s.ns[k] = states_.ns[k];
        }
        for (std::size_t i = 0; i < loc_.touched(); ++i) {
            const Locate& l = loc_[i];
            if (l.s.state == 0) continue;
            ++s.now[l.s.state];
            s.ns[l.s.state] += clock_ > l.s.since ? clock_ - l.s.since : 0;  // still open
        }
        return s;
    }

    // --8<-- [start:books_csv]
    // The books CSV (DESIGN.md): one row per resting order, by locate, side (B first),
    // price ascending, then priority (place in the level's queue, 0 = next to trade).
    std::string books_csv() const {
        std::string s = "locate,stock,side,price,priority,order_ref,shares\n";
        char buf[24];
        auto num = [&](std::uint64_t v) {
            auto r = std::to_chars(buf, buf + sizeof buf, v);
            s.append(buf, r.ptr);
        };
        for (std::size_t loc = 0; loc < loc_.touched(); ++loc) {
            const Locate& l = loc_[loc];
            if (l.side[0].orders == 0 && l.side[1].orders == 0) continue;
            const std::string stock = name_of(l.s);
            for (int side : {0, 1}) {
                for_each_level(l.side[side], true, [&](std::uint32_t price, const PriceLevel& lv) {
                    std::uint64_t prio = 0;
                    for (std::uint32_t i = lv.head; i != kNil; i = orders_[i].next) {
                        num(loc);
                        s += ',';
                        s += stock;
                        s += side == 0 ? ",B," : ",S,";
                        num(price);
                        s += ',';
                        num(prio++);
                        s += ',';
                        num(orders_[i].ref);
                        s += ',';
                        num(orders_[i].shares);
                        s += '\n';
                    }
                    return true;
                });
            }
        }
        return s;
    }
    // --8<-- [end:books_csv]

private:
    void anomaly(Anomaly a) {
        ++counts_.anomalies[static_cast<std::size_t>(a)];
        if (a != Anomaly::LocateMismatch) ++refused_;  // the one anomaly that still applies
    }
    void reject(Reason r) { ++counts_.rejects[static_cast<std::size_t>(r)]; }

    // Room for `n` more fills, made before an event changes anything (doubling, so the
    // vector grows a logarithmic number of times).
    static void reserve_fills(std::vector<FillRecord>& fills, std::size_t n) {
        if (fills.capacity() - fills.size() < n) [[unlikely]]
            fills.reserve(std::max(fills.capacity() * 2, fills.size() + n));
    }
    void emit(std::vector<FillRecord>& fills, std::uint64_t resting, std::uint64_t aggressor,
              std::uint32_t price, std::uint32_t qty, Side side, std::uint32_t idx) {
        fills.push_back(FillRecord{resting, aggressor, price, qty, idx,
                                   static_cast<std::uint8_t>(side), {}});  // reserved
        ++counts_.fills;
        counts_.volume += qty;
    }

    // One event, in either mode (run() and run_itch() share it).
    [[gnu::always_inline]] void apply(const ItchEvent& e, std::uint32_t idx,
                                      std::vector<FillRecord>& fills) {
        // loc_.touch(locate) wherever a locate may be written for the first time (the
        // table's walks stop at the highest one): here for R, H and a book message's
        // activity count, and in prepare_level for a window (an order's locate got one).
        switch (e.type) {
            case 'R': case 'H': name_or_state(e); break;
            case 'A': case 'F': case 'E': case 'C': case 'X': case 'D': case 'U':
                if (mode_ == Mode::Book) feed(e, idx, fills); else match(e, idx, fills);
                // counted once the event has applied; the first count touches the locate
                if (++loc_[e.locate].s.activity == 1) [[unlikely]] loc_.touch(e.locate);
                break;
            default: break;  // S P Q B ...: counted only
        }
        ++counts_.events[e.type];
        clock_ = std::max(clock_, e.timestamp);
        if (pending_ != nullptr) [[unlikely]] maintain();  // between events, never inside one
    }

    // R: a locate's name; H: its trading state (recorded, never gates an update).
    void name_or_state(const ItchEvent& e) {
        if (e.type != 'R' && e.type != 'H') return;
        loc_.touch(e.locate);
        LocateState& st = loc_[e.locate].s;
        if (e.type == 'H') {
            st.trading = static_cast<std::uint16_t>(0x100 | e.side);
            return;
        }
        std::memcpy(st.name, e.stock, 8);
        st.named = 1;
    }

    // --------------------------------------------------- levels and windows (both modes)

    // --8<-- [start:levels]
    // The level of an order's price (it exists: the order rests there).
    [[gnu::always_inline]] PriceLevel& level_of(Locate& l, SideBook& sb, std::uint32_t price) {
        const std::uint32_t k = sb.slot(price);
        if (k < sb.n) [[likely]] return sb.lv[k];
        return far_level(l, sb, price);
    }
    [[gnu::noinline]] PriceLevel& far_level(Locate& l, SideBook& sb, std::uint32_t price) {
        note_far(l, sb, price);
        return sb.far->find(price)->second;
    }
    const PriceLevel& peek_level(const SideBook& sb, std::uint32_t price) const {
        const std::uint32_t k = sb.slot(price);
        return k < sb.n ? sb.lv[k] : sb.far->find(price)->second;
    }

    // Where a new order at `price` will rest: its level (made now, empty, if it is a new
    // far price; a new window level is only marked when the order rests). Everything that
    // can fail happens here, before the event changes anything.
    struct Prepared {
        PriceLevel* lv;
        std::uint32_t k;  // window slot, or sb.n: a far level
        bool fresh;       // the level has no order yet
    };
    [[gnu::always_inline]] Prepared prepare_level(Locate& l, SideBook& sb, int s,
                                                   std::uint32_t price) {
        if (sb.orders == 0) [[unlikely]] {
            loc_.touch(l);  // its first window, maybe: before it is written
            fresh_window(sb, s, price);
        }
        const std::uint32_t k = sb.slot(price);
        if (k < sb.n) [[likely]] return Prepared{&sb.lv[k], k, sb.lv[k].head == kNil};
        return prepare_far(l, sb, price);
    }
    [[gnu::noinline]] Prepared prepare_far(Locate& l, SideBook& sb, std::uint32_t price) {
        if (sb.far == nullptr) {
            budget_.spend();
            sb.far = new FarMap(&pool_);
        }
        auto it = sb.far->find(price);
        bool fresh = false;
        if (it == sb.far->end()) {
            budget_.spend();
            it = sb.far->emplace(price, PriceLevel{0, kNil, kNil}).first;  // may throw
            fresh = true;
        }
        note_far(l, sb, price);
        return Prepared{&it->second, sb.n, fresh};
    }

    // A new order at the back of its prepared level's queue. Cannot fail.
    [[gnu::always_inline]] void rest(Locate& l, SideBook& sb, int s, const Prepared& p,
                                     std::uint64_t ref, std::uint32_t shares,
                                     std::uint16_t locate, std::uint32_t price) {
        const std::uint32_t i = orders_.alloc();
        PriceLevel& lv = *p.lv;
        if (p.fresh) {  // an empty window level is already {0, kNil, kNil}
            if (p.k < sb.n) sb.set(p.k);
            std::uint32_t& best = l.s.best[s];
            if (best == 0 || (s == 0 ? price > best : price < best)) {
                best = price;
                moved_ = true;  // (watch, below)
            }
        }
        MarketOrder& o = orders_[i];
        o.ref = ref;
        o.shares = shares;
        o.price = price;
        o.next = kNil;
        o.prev = lv.tail;
        o.locate = locate;
        o.side = static_cast<std::uint8_t>(s);
        if (lv.tail != kNil) orders_[lv.tail].next = i; else lv.head = i;
        lv.tail = i;
        lv.total += shares;
        ++sb.orders;
        refs_.insert(ref, i);
    }

    // Take 1..its shares off order i (it keeps its place), removing it at zero.
    [[gnu::always_inline]] void take(Locate& l, SideBook& sb, int s, std::uint32_t i,
                                     std::uint32_t shares) {
        MarketOrder& o = orders_[i];
        if (shares == o.shares) {
            refs_.erase(o.ref);
            return unlink(l, sb, s, i);
        }
        o.shares -= shares;
        level_of(l, sb, o.price).total -= shares;
    }

    // Unlink order i from its queue and free its node (its reference is the caller's);
    // an emptied level leaves the window's bitset (or the far map).
    [[gnu::always_inline]] void unlink(Locate& l, SideBook& sb, int s, std::uint32_t i) {
        const std::uint32_t k = sb.slot(orders_[i].price);
        unlink_at(l, sb, s, i, k < sb.n ? sb.lv[k] : far_level(l, sb, orders_[i].price), k);
    }
    [[gnu::always_inline]] void unlink_at(Locate& l, SideBook& sb, int s, std::uint32_t i,
                                          PriceLevel& lv, std::uint32_t k) {
        MarketOrder& o = orders_[i];
        if (lv.head == i) {
            // The head leaves (a fill, most executions): the next order becomes the head,
            // and its `prev` is left as it is. No one reads the head's prev (this test
            // is on the level, not on prev), so the next order's line is not touched.
            lv.head = o.next;
            if (o.next == kNil) lv.tail = kNil;
        } else {
            orders_[o.prev].next = o.next;
            if (o.next != kNil) orders_[o.next].prev = o.prev; else lv.tail = o.prev;
        }
        lv.total -= o.shares;
        if (lv.head == kNil) {  // the level is empty: it goes
            if (k < sb.n) sb.clear(k); else sb.far->erase(o.price);
            if (l.s.best[s] == o.price) {
                l.s.best[s] = next_best(sb, s, k);
                moved_ = true;  // (watch, below)
            }
        }
        if (--sb.orders == 0 && sb.n > kMinWindow) [[unlikely]] pending_ = &l;  // give it back
        orders_.release(i);
    }

    // The best level of a side just emptied (k: its window slot, or n if it was far):
    // the new best is the better of the window's best (bids: scan down from k, nothing
    // is above the old best; asks: up) and the far map's (its last / first key).
    [[gnu::noinline]] std::uint32_t next_best(const SideBook& sb, int s, std::uint32_t k) const {
        std::uint32_t w = 0;  // 0: none (no level has price 0)
        if (sb.n != 0) {
            const std::int64_t j = s == 0 ? sb.highest_at_or_below(k < sb.n ? k : sb.n - 1)
                                          : sb.lowest_at_or_above(k < sb.n ? k : 0);
            if (j >= 0) w = sb.price_at(static_cast<std::uint32_t>(j));
        }
        std::uint32_t f = 0;
        if (sb.far != nullptr && !sb.far->empty())
            f = s == 0 ? sb.far->rbegin()->first : sb.far->begin()->first;
        if (w == 0 || f == 0) return w | f;
        return s == 0 ? std::max(w, f) : std::min(w, f);
    }
    // --8<-- [end:levels]

    // --8<-- [start:window_moves]
    static constexpr std::uint32_t kMagic1 = std::uint32_t(1) << 31;
    static constexpr std::uint32_t kMagic100 = 21'474'837;  // ceil(2^31 / 100)
    static std::uint32_t tick_for(std::uint32_t price) {
        return price >= 10'000 && price % 100 == 0 ? 100 : 1;  // NASDAQ: cents from $1 up
    }
    // The base that puts `price` three quarters of the way up a bid window (bids rest
    // below the best) or a quarter up an ask window, on the price's tick grid, with the
    // whole window inside 0..2^32-1.
    static std::uint32_t place(std::uint32_t price, std::uint32_t n, std::uint32_t tick, int s) {
        const std::int64_t below = std::int64_t(s == 0 ? n - n / 4 : n / 4) * tick;
        const std::int64_t top = (std::int64_t(1) << 32) - std::int64_t(n) * tick;
        std::int64_t base = std::int64_t(price) - below;
        if (base < 0) base = price % tick;
        if (base > top) base = top - (((top - price) % tick) + tick) % tick;
        return static_cast<std::uint32_t>(base);
    }
    void set_grid(SideBook& sb, std::uint32_t n, std::uint32_t tick, std::uint32_t base) {
        sb.n = n;
        sb.tick = tick;
        sb.magic = tick == 100 ? kMagic100 : kMagic1;
        sb.span = n * tick;
        sb.base = base;
    }
    // n levels and their bitset (zeroed), in one allocation. May throw.
    std::pair<PriceLevel*, std::uint64_t*> alloc_window(std::uint32_t n) {
        budget_.spend();
        const std::size_t words = SideBook::words(n) + SideBook::summary_words(n);
        auto* lv = static_cast<PriceLevel*>(alloc_big(std::size_t(n) * sizeof(PriceLevel) + words * 8));
        auto* bits = reinterpret_cast<std::uint64_t*>(lv + n);
        std::fill(lv, lv + n, PriceLevel{0, kNil, kNil});  // every level empty
        std::memset(bits, 0, words * 8);
        return {lv, bits};
    }

    // The first order of a side with no order: a window (the smallest) around its price.
    // Nothing rests on the side, so re-basing moves nothing. May throw (nothing changed).
    [[gnu::noinline]] void fresh_window(SideBook& sb, int s, std::uint32_t price) {
        if (sb.n == 0) {
            auto [lv, bits] = alloc_window(kMinWindow);
            sb.lv = lv;
            sb.bits = bits;
            sb.n = kMinWindow;
            window_levels_ += kMinWindow;
        }
        const std::uint32_t tick = tick_for(price);
        set_grid(sb, sb.n, tick, place(price, sb.n, tick, s));
        sb.far_ops = 0;
        sb.off_grid = 0;
    }

    // A far level was used: count it; enough of them and the window moves (between events).
    // A far price better than the whole window (a bid above it, an ask below it) counts
    // 16 times: the side's best has left the window, and every order at the top of the
    // book now pays the far map's price, so the window follows it after n / 64 of them.
    void note_far(Locate& l, SideBook& sb, std::uint32_t price) {
        if (sb.tick != 1 && price % sb.tick != 0) sb.off_grid = 1;
        const bool better = &sb == &l.side[0]
                                ? std::uint64_t(price) >= std::uint64_t(sb.base) + sb.span  // above it
                                : price < sb.base;                                          // below it
        sb.far_ops += better ? 16 : 1;
        if (sb.far_ops >= far_limit(sb)) pending_ = &l;
    }
    // Far operations that pay for one window move: a move costs O(n / 64 + levels moved),
    // so a side waits for n / 4 of them (a far operation costs several times a level
    // moved), which bounds what a side whose prices jump about can spend on moves. A
    // window that may still double is different: a side can grow at most log2(cap / 32)
    // times before it empties, and each growth costs O(the orders resting), so it grows
    // after 16 far operations instead of waiting for n / 4 of them at every size.
    std::uint32_t far_limit(const SideBook& sb) const {
        if (can_grow(sb)) return 16;
        return std::max<std::uint32_t>(16, sb.n / 4);
    }
    bool can_grow(const SideBook& sb) const { return sb.n < window_cap_ && may_hold(sb, 2 * std::uint64_t(sb.n)); }
    // May this side's window have m levels (m > sb.n)? By its orders, or from the free levels.
    bool may_hold(const SideBook& sb, std::uint64_t m) const {
        return m <= kLevelsPerOrder * std::uint64_t(sb.orders) || window_levels_ + m - sb.n <= kFreeLevels;
    }

    // Between events: windows whose side emptied go back to the allocator (memory follows
    // the live orders); a side that keeps using far levels gets its window moved to its
    // best price, doubled while it has fewer than kLevelsPerOrder levels per resting order,
    // and on the 1/10,000 grid if off-cent prices were seen.
    [[gnu::noinline]] void maintain() {
        Locate& l = *pending_;
        pending_ = nullptr;
        for (int s : {0, 1}) {
            SideBook& sb = l.side[s];
            if (sb.n == 0) continue;
            if (sb.orders == 0) {
                if (sb.n > kMinWindow) {
                    window_levels_ -= sb.n;
                    std::free(sb.lv);
                    sb.lv = nullptr;
                    sb.bits = nullptr;
                    set_grid(sb, 0, 1, 0);
                    ++moves_;
                }
                continue;
            }
            if (sb.far_ops >= far_limit(sb)) rebuild(sb, s, l.s.best[s]);
        }
    }

    // Move (and maybe grow) a side's window so that its best price sits where place()
    // puts it. Every level stays where exactly one lookup finds it: in the new window if
    // it can hold the price, else in the far map. If memory runs out, nothing moves.
    [[gnu::noinline]] void rebuild(SideBook& sb, int s, std::uint32_t best) {
        sb.far_ops = 0;
        std::uint32_t n = sb.n;
        // Off-cent prices seen (or a best price off the cent grid): the 1/10,000 grid.
        const std::uint32_t tick = sb.off_grid || best % sb.tick != 0 ? 1 : sb.tick;
        sb.off_grid = 0;
        // Double while the side has the orders for it (kLevelsPerOrder levels each at most)
        // and the window placed at the best would still leave a far level out: one move then
        // takes in the whole range the side trades over, not one doubling per move.
        auto covers = [&](std::uint32_t m) {
            if (sb.far == nullptr || sb.far->empty()) return true;
            const std::uint32_t b = place(best, m, tick, s);
            const std::uint32_t lo = sb.far->begin()->first, hi = sb.far->rbegin()->first;
            return lo - b < m * tick && hi - b < m * tick;
        };
        while (n < window_cap_ && may_hold(sb, 2 * std::uint64_t(n)) &&
               (n == sb.n || !covers(n)))
            n *= 2;
        const std::uint32_t base = place(best, n, tick, s);
        if (n == sb.n && tick == sb.tick && base == sb.base) return;  // already in place
        SideBook nw = sb;
        try {
            auto [lv, bits] = alloc_window(n);
            nw.lv = lv;
            nw.bits = bits;
        } catch (const std::bad_alloc&) {
            return;
        }
        set_grid(nw, n, tick, base);
        auto each_old = [&](auto&& fn) {
            for (std::int64_t k = sb.lowest_at_or_above(0); k >= 0;
                 k = sb.lowest_at_or_above(static_cast<std::uint32_t>(k + 1)))
                if (!fn(static_cast<std::uint32_t>(k))) return;
        };
        try {  // 1. the old window's levels: into the new window, or the far map
            each_old([&](std::uint32_t k) {
                const std::uint32_t price = sb.price_at(k);
                const std::uint32_t j = nw.slot(price);
                if (j < n) {
                    nw.lv[j] = sb.lv[k];
                    nw.set(j);
                } else {
                    if (sb.far == nullptr) {
                        budget_.spend();
                        sb.far = new FarMap(&pool_);
                    }
                    budget_.spend();
                    sb.far->emplace(price, sb.lv[k]);
                }
                return true;
            });
        } catch (const std::bad_alloc&) {
            // Undo: no price of the old window was in the far map before, so every one the
            // new window cannot hold is one this loop copied (or had not reached yet).
            if (sb.far != nullptr)
                each_old([&](std::uint32_t k) {
                    const std::uint32_t price = sb.price_at(k);
                    if (nw.slot(price) == n) sb.far->erase(price);
                    return true;
                });
            std::free(nw.lv);
            return;
        }
        if (sb.far != nullptr) {  // 2. far levels the new window can hold move in
            for (auto it = sb.far->lower_bound(nw.base);
                 it != sb.far->end() && it->first - nw.base < nw.span;) {
                const std::uint32_t j = nw.slot(it->first);
                if (j < n) {
                    nw.lv[j] = it->second;
                    nw.set(j);
                    it = sb.far->erase(it);
                } else {
                    ++it;
                }
            }
        }
        std::free(sb.lv);
        window_levels_ += std::uint64_t(n) - sb.n;
        nw.far = sb.far;
        sb = nw;
        ++moves_;
    }
    // --8<-- [end:window_moves]

    // Every non-empty level of a side in price order (ascending or descending): the
    // window's and the far map's, merged. fn(price, level) returns false to stop.
    template <class Fn>
    void for_each_level(const SideBook& sb, bool ascending, Fn&& fn) const {
        std::int64_t k = -1;
        if (sb.n != 0) k = ascending ? sb.lowest_at_or_above(0) : sb.highest_at_or_below(sb.n - 1);
        auto step = [&](std::int64_t j) -> std::int64_t {
            if (ascending) return sb.lowest_at_or_above(static_cast<std::uint32_t>(j + 1));
            return j == 0 ? -1 : sb.highest_at_or_below(static_cast<std::uint32_t>(j - 1));
        };
        auto window = [&]() {
            const bool go = fn(sb.price_at(static_cast<std::uint32_t>(k)),
                               sb.lv[static_cast<std::size_t>(k)]);
            k = step(k);
            return go;
        };
        if (sb.far == nullptr || sb.far->empty()) {
            while (k >= 0 && window()) {}
            return;
        }
        if (ascending) {
            for (auto it = sb.far->begin();;) {
                const bool far = it != sb.far->end();
                if (k < 0 && !far) return;
                if (k >= 0 && (!far || sb.price_at(static_cast<std::uint32_t>(k)) < it->first)) {
                    if (!window()) return;
                } else {
                    if (!fn(it->first, it->second)) return;
                    ++it;
                }
            }
        }
        for (auto it = sb.far->rbegin();;) {
            const bool far = it != sb.far->rend();
            if (k < 0 && !far) return;
            if (k >= 0 && (!far || sb.price_at(static_cast<std::uint32_t>(k)) > it->first)) {
                if (!window()) return;
            } else {
                if (!fn(it->first, it->second)) return;
                ++it;
            }
        }
    }

    // ------------------------------------------------------------ book mode

    // --8<-- [start:feed]
    // The per-message steps below are always_inline: inlined into both message loops
    // (run, run_itch) whatever the compiler's size budget for this file says. Called out
    // of line, they would need the decoded event stored to memory and read back, and a
    // call and return, on every message; the rare steps (a far level, a new window, a
    // window move) are noinline, so that the loop stays small.
    [[gnu::always_inline]] void feed(const ItchEvent& e, std::uint32_t idx,
                                     std::vector<FillRecord>& fills) {
        if (e.type == 'A' || e.type == 'F') return feed_add(e);
        if (e.type == 'U' && e.price == 0) return anomaly(Anomaly::BadPrice);
        if (e.type != 'D' && e.shares == 0) return anomaly(Anomaly::BadShares);
        const std::uint32_t i = refs_.find(e.order_ref);
        if (i == RefIndex::kAbsent) return anomaly(Anomaly::UnknownRef);
        MarketOrder& o = orders_[i];
        if (o.locate != e.locate) anomaly(Anomaly::LocateMismatch);  // the order wins
        Locate& l = loc_[o.locate];
        const int s = o.side;
        SideBook& sb = l.side[s];
        switch (e.type) {
            case 'E': case 'C': {
                if (e.shares > o.shares) return anomaly(Anomaly::OverExecution);
                reserve_fills(fills, 1);
                // E trades at the resting price; C at its own Execution Price, whatever
                // it is (0 included): the spec says the print is at that price.
                const std::uint32_t price = e.type == 'C' ? e.price : o.price;
                emit(fills, e.order_ref, 0, price, e.shares, Side(s ^ 1), idx);
                take(l, sb, s, i, e.shares);  // keeps its place in the queue
                break;
            }
            case 'X':
                if (e.shares > o.shares) return anomaly(Anomaly::OverCancel);
                take(l, sb, s, i, e.shares);
                break;
            case 'D':
                refs_.erase(e.order_ref);
                unlink(l, sb, s, i);
                break;
            default:  // 'U'
                if (e.new_order_ref != e.order_ref &&
                    refs_.find(e.new_order_ref) != RefIndex::kAbsent)
                    return anomaly(Anomaly::DuplicateRef);
                feed_replace(l, sb, s, i, e);
                break;
        }
        if (moved_) watch(l.s, e.timestamp);
    }

    [[gnu::always_inline]] void feed_add(const ItchEvent& e) {
        if (e.side != 'B' && e.side != 'S') return anomaly(Anomaly::BadSide);
        if (e.price == 0) return anomaly(Anomaly::BadPrice);
        if (e.shares == 0) return anomaly(Anomaly::BadShares);
        if (refs_.find(e.order_ref) != RefIndex::kAbsent) return anomaly(Anomaly::DuplicateRef);
        orders_.reserve_one();  // every allocation first: nothing below can fail
        refs_.reserve_for(e.order_ref);
        Locate& l = loc_[e.locate];
        const int s = e.side == 'B' ? 0 : 1;
        SideBook& sb = l.side[s];
        const Prepared p = prepare_level(l, sb, s, e.price);  // may throw: nothing changed
        rest(l, sb, s, p, e.order_ref, e.shares, e.locate, e.price);
        count_book(l);
        if (moved_) watch(l.s, e.timestamp);
    }

    // U: the old order leaves, the new one rests at the back of its price, same side.
    // The new order is linked before the old one leaves: its level then holds at least
    // one order, so the removal cannot drop the level the new order is in.
    [[gnu::noinline]] void feed_replace(Locate& l, SideBook& sb, int s, std::uint32_t i, const ItchEvent& e) {
        orders_.reserve_one();
        refs_.reserve_for(e.new_order_ref);
        const Prepared p = prepare_level(l, sb, s, e.price);  // may throw: nothing changed
        const std::uint16_t locate = orders_[i].locate;
        refs_.erase(e.order_ref);  // first: the new ref may equal the old one
        rest(l, sb, s, p, e.new_order_ref, e.shares, locate, e.price);
        unlink(l, sb, s, i);
    }
    // --8<-- [end:feed]

    void count_book(Locate& l) {
        if (l.s.has_book == 0) [[unlikely]] {
            l.s.has_book = 1;
            ++n_books_;
        }
    }

    // --8<-- [start:watch]
    // After a book-mode message moved a best price of book b (rest and unlink_at set
    // moved_; nothing else can change the answer, so most messages skip this): is it
    // locked or crossed now? Counts the episodes and the time spent in each (a clock
    // going back adds nothing).
    [[gnu::always_inline]] void watch(LocateState& b, std::uint64_t ts) {
        moved_ = false;
        std::uint8_t now = 0;
        std::uint32_t bid = b.best[0], ask = b.best[1];
        if (bid != 0 && ask != 0 && bid >= ask) now = bid == ask ? 1 : 2;
        if (now == b.state) [[likely]] return;
        if (b.state != 0) states_.ns[b.state] += ts > b.since ? ts - b.since : 0;
        if (now != 0) {
            ++states_.episodes[now];
            b.since = ts;
        }
        b.state = now;
    }
    // --8<-- [end:watch]

    // ------------------------------------------------------------ match mode

    // --8<-- [start:match]
    [[gnu::always_inline]] void match(const ItchEvent& e, std::uint32_t idx,
                                      std::vector<FillRecord>& fills) {
        switch (e.type) {
            case 'A': case 'F': return match_add(e, idx, fills);
            case 'E': case 'C': return;  // an engine makes its own executions
            default: break;
        }
        if (e.type == 'U' && e.price == 0) return reject(Reason::BadPrice);
        if (e.type != 'D' && e.shares == 0) return reject(Reason::BadQty);
        const std::uint32_t i = refs_.find(e.order_ref);
        if (i == RefIndex::kAbsent) return reject(Reason::UnknownId);
        MarketOrder& o = orders_[i];
        if (o.locate != e.locate) anomaly(Anomaly::LocateMismatch);  // the order wins
        Locate& l = loc_[o.locate];
        const int s = o.side;
        SideBook& sb = l.side[s];
        if (e.type == 'X') {
            if (e.shares > o.shares) return reject(Reason::OverReduce);
            take(l, sb, s, i, e.shares);
        } else if (e.type == 'D') {
            refs_.erase(e.order_ref);
            unlink(l, sb, s, i);
        } else {  // 'U': the old order leaves, the new one enters (and may match)
            if (e.new_order_ref != e.order_ref && refs_.find(e.new_order_ref) != RefIndex::kAbsent)
                return reject(Reason::DuplicateId);
            match_replace(l, sb, s, i, e, idx, fills);
        }
    }

    [[gnu::always_inline]] void match_add(const ItchEvent& e, std::uint32_t idx,
                                          std::vector<FillRecord>& fills) {
        if (e.side != 'B' && e.side != 'S') return reject(Reason::BadSide);
        if (e.shares == 0) return reject(Reason::BadQty);
        if (refs_.find(e.order_ref) != RefIndex::kAbsent) return reject(Reason::DuplicateId);
        Locate& l = loc_[e.locate];
        const int s = e.side == 'B' ? 0 : 1;
        SideBook& sb = l.side[s];
        // An order fills at most every resting order of the other side: room for that,
        // and (a limit order may rest) for its node, reference and level, first.
        reserve_fills(fills, std::size_t(l.side[s ^ 1].orders) + 1);
        Prepared p{nullptr, 0, false};
        if (e.price != 0) {  // price 0: the CSV convention for a market order, never rests
            orders_.reserve_one();
            refs_.reserve_for(e.order_ref);
            // A far price (or a side with no window yet) that will trade in full needs no
            // level: a far map node made only to be erased after the match would be most
            // of what such an order costs (and a new window would be placed around a
            // price that never rests). The check reads the levels cross() will take.
            const bool near = sb.orders != 0 && sb.slot(e.price) < sb.n;
            if (near || !fills_completely(l, s, e.price, e.shares))
                p = prepare_level(l, sb, s, e.price);  // may throw: nothing changed yet
        }
        count_book(l);
        const std::uint32_t left = cross(l, s, e.price, e.shares, e.order_ref, idx, fills);
        if (e.price != 0) settle(l, sb, s, p, left, e.order_ref, e.locate, e.price);
    }

    // U in match mode: as Book::replace, the old order leaves and a new one (same side)
    // enters at its price and may match. The old one is unlinked last, after the new one
    // rested: only the other side matches, so the order of the two does not change what
    // trades, and the new order's prepared level cannot be dropped under it.
    [[gnu::noinline]] void match_replace(Locate& l, SideBook& sb, int s, std::uint32_t i, const ItchEvent& e,
                       std::uint32_t idx, std::vector<FillRecord>& fills) {
        reserve_fills(fills, std::size_t(l.side[s ^ 1].orders) + 1);
        orders_.reserve_one();
        refs_.reserve_for(e.new_order_ref);
        const Prepared p = prepare_level(l, sb, s, e.price);  // may throw: nothing changed
        const std::uint16_t locate = orders_[i].locate;
        refs_.erase(e.order_ref);  // first: the new ref may equal the old one
        const std::uint32_t left = cross(l, s, e.price, e.shares, e.new_order_ref, idx, fills);
        settle(l, sb, s, p, left, e.new_order_ref, locate, e.price);
        unlink(l, sb, s, i);
    }

    // Would an incoming limit order of `qty` at `limit` on side s trade in full? Yes if
    // the other side's levels that it crosses, best first, hold qty shares. Reads only.
    [[gnu::noinline]] bool fills_completely(const Locate& l, int s, std::uint32_t limit,
                                            std::uint32_t qty) const {
        const int o = s ^ 1;
        const std::uint32_t best = l.s.best[o];
        if (best == 0 || (s == 0 ? best > limit : best < limit)) return false;
        // Most often the best level alone is enough (and cross() reads it next anyway);
        // the walk below starts from the window's end, not from the best price.
        if (peek_level(l.side[o], best).total >= qty) return true;
        std::uint64_t need = qty;
        bool all = false;
        for_each_level(l.side[o], o == 1, [&](std::uint32_t price, const PriceLevel& lv) {
            if (s == 0 ? price > limit : price < limit) return false;
            if (lv.total >= need) {
                all = true;
                return false;
            }
            need -= lv.total;
            return true;
        });
        return all;
    }

    // Trade `qty` of an incoming order on side s against the other side, best price
    // first, oldest first, each fill at the resting price; limit 0: a market order.
    // Returns the quantity left.
    [[gnu::always_inline]] std::uint32_t cross(Locate& l, int s, std::uint32_t limit,
                                               std::uint32_t qty, std::uint64_t aggressor,
                                               std::uint32_t idx, std::vector<FillRecord>& fills) {
        const int o = s ^ 1;
        SideBook& ob = l.side[o];
        while (qty != 0) {
            const std::uint32_t best = l.s.best[o];
            if (best == 0) break;
            if (limit != 0 && (s == 0 ? best > limit : best < limit)) break;
            const std::uint32_t k = ob.slot(best);
            PriceLevel& lv = k < ob.n ? ob.lv[k] : far_level(l, ob, best);
            const std::uint32_t i = lv.head;
            MarketOrder& r = orders_[i];
            // Ask for the lines this fill will need next while it does the rest: the
            // reference's slot (erased if the order fills) and the order behind it.
            refs_.prefetch(r.ref);
            if (r.next != kNil) orders_.prefetch(r.next);
            const std::uint32_t t = std::min(qty, r.shares);
            emit(fills, r.ref, aggressor, best, t, Side(s), idx);
            qty -= t;
            if (t == r.shares) {
                refs_.erase(r.ref);
                unlink_at(l, ob, o, i, lv, k);
            } else {
                r.shares -= t;
                lv.total -= t;
            }
        }
        return qty;
    }

    // After an incoming limit order matched: what is left rests; if nothing is, a far
    // level made for it goes again (a window level was never marked).
    [[gnu::always_inline]] void settle(Locate& l, SideBook& sb, int s, const Prepared& p,
                                       std::uint32_t left,
                std::uint64_t ref, std::uint16_t locate, std::uint32_t price) {
        if (left != 0) return rest(l, sb, s, p, ref, left, locate, price);
        if (p.fresh && p.k == sb.n) sb.far->erase(price);
    }
    // --8<-- [end:match]

    // --------------------------------------------- match mode: the batch engine

    // --8<-- [start:batch_plan]
    // run() in match mode can match a whole batch in flat arrays sized from the batch
    // itself (the student engine's layout: a level per price, an order slot per
    // reference), then hand what rests to the general structures above. It applies when
    // the market holds no order and the batch names one locate, has no U (a replace may
    // move between the two tables: the general path keeps it), and its prices and
    // references are dense: the levels span at most kBatchLevels prices, the references
    // at most twice the adds (plus a margin). Anything else takes the general path, so
    // the batch engine is a shortcut, never a cap. One pass over the events decides.
    static constexpr std::uint32_t kBatchLevels = std::uint32_t(1) << 18;
    static constexpr std::size_t kBatchMin = 4096;  // events: smaller batches loop
    struct BatchPlan {
        std::array<std::uint64_t, 256> types{};  // events by type byte
        std::uint64_t rlo = ~std::uint64_t(0), rhi = 0;  // references of A/F
        std::uint64_t adds = 0, book = 0;  // A/F events; book events (activity)
        std::uint64_t clock = 0;           // the latest timestamp
        std::size_t named_end = 0;         // 1 + the index of the last R or H
        std::uint32_t plo = ~std::uint32_t(0), phi = 0;  // prices of limit orders
        std::uint16_t locate = 0;
        bool rising = true;  // every A/F's reference above the one before it
    };
    // --8<-- [end:batch_plan]

    // --8<-- [start:plan_batch]
    static bool plan_batch(const ItchEvent* ev, std::size_t n, BatchPlan& p) {
        // Locals, not p's fields: the compiler keeps them in registers (a store to p
        // could alias the events as far as it knows, and would be reloaded each time).
        std::uint64_t rlo = ~std::uint64_t(0), rhi = 0, adds = 0, book = 0, clock = 0;
        std::uint32_t plo = ~std::uint32_t(0), phi = 0;
        std::uint32_t locate = 0x1'0000;  // none yet
        bool rising = true, one_locate = true;
        for (std::size_t k = 0; k < n; ++k) {
            const ItchEvent& e = ev[k];
            ++p.types[e.type];
            clock = std::max(clock, e.timestamp);
            const std::uint8_t kind = kKind[e.type];  // 1: E C X D U, 2: A F
            if (kind == 0) {
                if (e.type == 'R' || e.type == 'H') p.named_end = k + 1;
                continue;
            }
            if (e.type == 'U') return false;
            locate = locate == 0x1'0000 ? e.locate : locate;
            one_locate &= e.locate == locate;
            ++book;
            if (kind != 2) continue;
            rising &= adds == 0 || e.order_ref > rhi;
            ++adds;
            if (e.price != 0) {
                plo = std::min(plo, e.price);
                phi = std::max(phi, e.price);
            }
            rlo = std::min(rlo, e.order_ref);
            rhi = std::max(rhi, e.order_ref);
        }
        if (adds == 0 || !one_locate) return false;
        if (phi < plo) plo = phi = 1;  // market orders only: one unused level
        p.rlo = rlo, p.rhi = rhi, p.adds = adds, p.book = book, p.clock = clock;
        p.plo = plo, p.phi = phi, p.rising = rising;
        p.locate = static_cast<std::uint16_t>(locate);
        return phi - plo < kBatchLevels && rhi - rlo < 2 * adds + 1024;
    }
    // --8<-- [end:plan_batch]

    // --8<-- [start:batch_book]
    // The batch's book. An order's slot is its reference minus the lowest one: 16 bytes
    // (shares, its queue links, and its level with the side in the top bit); shares 0
    // is an empty slot. A side is a SideBook over flat levels (one per price from plo,
    // tick 1), for its bitset walks, and its best level (-1 / INT64_MAX: none).
    struct BatchOrder {
        std::uint32_t shares, next, prev, k;  // k: level | side << 31
    };
    static_assert(sizeof(BatchOrder) == 16, "four order slots per cache line");
    struct BatchBook {
        // The slots from calloc: a batch's range of references is megabytes, which the
        // allocator maps from the kernel's zero pages; only the slots used are written
        // (an empty slot needs only shares 0; the rest is written when an order rests).
        struct Free {
            void operator()(BatchOrder* p) const { std::free(p); }
        };
        std::unique_ptr<BatchOrder[], Free> slots;
        std::uint64_t refs = 0;  // slots
        std::vector<PriceLevel> lv[2];
        std::vector<std::uint64_t> bits[2];
        SideBook side[2];
        std::int64_t best[2] = {-1, INT64_MAX};  // bid: highest level; ask: lowest
        std::uint64_t rlo = 0;
        std::uint32_t plo = 0;
        // May throw std::bad_alloc (nothing has changed yet).
        explicit BatchBook(const BatchPlan& p)
            : refs(p.rhi - p.rlo + 1), rlo(p.rlo), plo(p.plo) {
            void* mem = std::calloc(refs, sizeof(BatchOrder));
            slots.reset(static_cast<BatchOrder*>(mem));
            if (slots == nullptr) throw std::bad_alloc();
            const std::uint32_t n = p.phi - p.plo + 1;
            for (int s : {0, 1}) {
                lv[s].assign(n, PriceLevel{0, kNil, kNil});
                bits[s].assign(SideBook::words(n) + SideBook::summary_words(n), 0);
                side[s].bits = bits[s].data();
                side[s].n = n;
            }
        }
        BatchOrder* orders() { return slots.get(); }
    };
    // What the batch adds to the market's counts, kept apart until the batch commits.
    struct BatchTally {
        std::array<std::uint64_t, kReasons> rejects{};
        std::uint64_t fills = 0, volume = 0;
        bool booked = false;  // a valid add named the locate (what `books` counts)
    };
    // --8<-- [end:batch_book]

    // The batch's loop: A/F with match_add's checks in its order, then the cross and
    // the rest; X/D with match()'s. Its state sits in locals (the best levels, the
    // order counts, the volume), which the compiler keeps in registers; the book's
    // arrays are reached through pointers taken once. The common case (a valid order)
    // pays one test for the three checks.
    static void batch_loop(const ItchEvent* ev, std::size_t n, BatchBook& b,
                           BatchTally& t, std::vector<FillRecord>& fills) {
        BatchOrder* const ord = b.orders();
        const std::uint64_t rlo = b.rlo;
        const std::uint32_t plo = b.plo;
        std::int64_t best[2] = {-1, INT64_MAX};  // bid: highest level; ask: lowest
        std::uint32_t count[2] = {0, 0};         // resting orders per side
        std::uint64_t volume = 0;
        for (std::size_t k = 0; k < n; ++k) {
            const ItchEvent& e = ev[k];
            if (e.type != 'A' && e.type != 'F') [[unlikely]] {
                if (e.type == 'X' || e.type == 'D') batch_cancel(b, t, e, best, count);
                continue;  // E C: counted; R H: at the hand-over; the rest: counted
            }
            BatchOrder& me = ord[e.order_ref - rlo];  // in range: the plan saw it
            const bool buy = e.side == 'B';
            const bool side_ok = buy || e.side == 'S';
            const bool bad = !side_ok | (e.shares == 0) | (me.shares != 0);
            if (bad) [[unlikely]] {
                const Reason r = !side_ok        ? Reason::BadSide
                                 : e.shares == 0 ? Reason::BadQty
                                                 : Reason::DuplicateId;
                ++t.rejects[static_cast<std::size_t>(r)];
                continue;
            }
            t.booked = true;
            // --8<-- [start:batch_cross]
            const int s = buy ? 0 : 1, o = s ^ 1;  // fills: room made for the batch
            std::uint32_t qty = e.shares;
            // The limit as a level; a market order (price 0) crosses every level.
            std::int64_t lim = std::int64_t(e.price) - plo;
            if (e.price == 0) [[unlikely]] lim = buy ? INT64_MAX - 1 : 0;
            PriceLevel* const olv = b.lv[o].data();
            while (qty != 0 && (buy ? best[o] <= lim : best[o] >= lim)) {
                PriceLevel& lv = olv[best[o]];
                const std::uint32_t i = lv.head;
                BatchOrder& r = ord[i];
                const std::uint32_t take = std::min(qty, r.shares);
                const auto at = static_cast<std::uint32_t>(best[o]);
                fills.push_back(FillRecord{rlo + i, e.order_ref, plo + at, take,
                                           std::uint32_t(k), std::uint8_t(s), {}});
                volume += take;
                qty -= take;
                lv.total -= take;
                if ((r.shares -= take) == 0) {
                    --count[o];
                    lv.head = r.next;
                    if (r.next == kNil) best[o] = batch_emptied(b, o, lv, best[o]);
                }
            }
            if (qty != 0 && e.price != 0) {  // the remainder rests, at the back
                const std::uint32_t lk = e.price - plo;
                const auto i = static_cast<std::uint32_t>(e.order_ref - rlo);
                PriceLevel& lv = b.lv[s][lk];
                me = BatchOrder{qty, kNil, lv.tail, lk | std::uint32_t(s) << 31};
                if (lv.tail != kNil) {
                    ord[lv.tail].next = i;
                } else {
                    lv.head = i;
                    b.side[s].set(lk);
                    const std::int64_t at = lk;
                    if (buy ? at > best[0] : at < best[1]) best[s] = at;
                }
                lv.tail = i;
                lv.total += qty;
                ++count[s];
            }
            // --8<-- [end:batch_cross]
        }
        for (int s : {0, 1}) {
            b.best[s] = best[s];
            b.side[s].orders = count[s];
        }
        t.volume += volume;
    }

    // --8<-- [start:batch_levels]
    // A level of side s emptied: out of the bitset; the side's new best if it was the
    // best (-1 / INT64_MAX: none), else the old one.
    [[gnu::noinline]] static std::int64_t batch_emptied(BatchBook& b, int s,
                                                        PriceLevel& lv,
                                                        std::int64_t best) {
        const auto k = static_cast<std::uint32_t>(&lv - b.lv[s].data());
        lv.tail = kNil;
        SideBook& sb = b.side[s];
        sb.clear(k);
        if (std::int64_t(k) != best) return best;
        const std::int64_t j =
            s == 0 ? sb.highest_at_or_below(k) : sb.lowest_at_or_above(k);
        return j >= 0 ? j : (s == 0 ? -1 : INT64_MAX);
    }
    // X and D, with match()'s checks in its order: take shares off a resting order (it
    // keeps its place), or all of it.
    [[gnu::noinline]] static void batch_cancel(BatchBook& b, BatchTally& t,
                                               const ItchEvent& e, std::int64_t* best,
                                               std::uint32_t* count) {
        auto reject = [&](Reason r) { ++t.rejects[static_cast<std::size_t>(r)]; };
        if (e.type == 'X' && e.shares == 0) return reject(Reason::BadQty);
        const std::uint64_t i = e.order_ref - b.rlo;
        BatchOrder* const ord = b.orders();
        if (i >= b.refs || ord[i].shares == 0) return reject(Reason::UnknownId);
        BatchOrder& r = ord[i];
        if (e.type == 'X' && e.shares > r.shares) return reject(Reason::OverReduce);
        const std::uint32_t shares = e.type == 'X' ? e.shares : r.shares;
        const int s = static_cast<int>(r.k >> 31);
        PriceLevel& lv = b.lv[s][r.k & 0x7FFF'FFFFu];
        lv.total -= shares;
        if ((r.shares -= shares) != 0) return;
        --count[s];
        if (lv.head == i) {  // as unlink_at: the head's prev is never read
            lv.head = r.next;
            if (r.next == kNil) best[s] = batch_emptied(b, s, lv, best[s]);
        } else {
            ord[r.prev].next = r.next;
            if (r.next != kNil) ord[r.next].prev = r.prev; else lv.tail = r.prev;
        }
    }
    // --8<-- [end:batch_levels]

    // --8<-- [start:batch_run]
    // The batch engine's loop, then the hand-over (commit_batch). Returns false, having
    // changed nothing, when the batch does not qualify or its arrays cannot be had.
    // Until the hand-over has succeeded the market itself is untouched, so if anything
    // fails (out of memory in the fills or the hand-over) the batch is undone whole:
    // applied() is 0 and the market is as before it (the strong guarantee, at event 0).
    bool run_batch(const ItchEvent* ev, std::size_t n, std::vector<FillRecord>& fills) {
        BatchPlan p;
        if (!plan_batch(ev, n, p)) return false;
        std::optional<BatchBook> made;
        try {
            made.emplace(p);
        } catch (const std::bad_alloc&) {
            return false;  // the general path needs no such arrays
        }
        BatchBook& b = *made;
        BatchTally t;
        const std::size_t start = fills.size();
        // Room for every fill the batch can make, first: a fill either ends the order
        // it trades against (which an add of this batch put there: the market was
        // empty) or ends the incoming order, so at most two per add. Pages are only
        // committed as fills are written.
        try {
            fills.reserve(start + 2 * p.adds);
        } catch (const std::bad_alloc&) {
            return false;
        } catch (const std::length_error&) {
            return false;
        }
        try {
            batch_loop(ev, n, b, t, fills);
            t.fills = fills.size() - start;
            commit_batch(ev, p, b, t);
        } catch (...) {
            fills.resize(start);
            applied_ = 0;
            throw;
        }
        applied_ = n;
        ++batch_runs_;
        return true;
    }
    // --8<-- [end:batch_run]

    // --8<-- [start:batch_commit]
    // What rests goes into the general structures through the same steps an add takes,
    // each level's queue oldest first (so the books and their priorities are what the
    // general path would have built); then the counts. When the adds' references rose
    // through the batch, a queue's order is its references' order, and the orders go
    // over by reference (the order table and the pool are then written in sequence);
    // else level by level. If a growth fails, the orders already moved are unlinked
    // again and the error goes on.
    void commit_batch(const ItchEvent* ev, const BatchPlan& p, BatchBook& b,
                      const BatchTally& t) {
        Locate& l = loc_[p.locate];
        std::uint64_t moved = 0;
        auto each = [&](auto&& fn) {  // every resting order, in hand-over order
            if (p.rising) {
                for (std::size_t i = 0; i < b.refs; ++i) {
                    const BatchOrder& r = b.orders()[i];
                    const std::uint32_t price = b.plo + (r.k & 0x7FFF'FFFFu);
                    const int s = int(r.k >> 31);
                    if (r.shares != 0 && !fn(s, b.rlo + i, r.shares, price)) return;
                }
                return;
            }
            for (int s : {0, 1}) {
                const SideBook& sb = b.side[s];
                for (std::int64_t k = b.best[s]; k >= 0 && k < sb.n;
                     k = s == 1 ? sb.lowest_at_or_above(std::uint32_t(k + 1))
                         : k == 0 ? -1
                                  : sb.highest_at_or_below(std::uint32_t(k - 1)))
                    for (std::uint32_t i = b.lv[s][std::size_t(k)].head; i != kNil;
                         i = b.orders()[i].next)
                        if (!fn(s, b.rlo + i, b.orders()[i].shares,
                                b.plo + static_cast<std::uint32_t>(k)))
                            return;
            }
        };
        try {
            each([&](int s, std::uint64_t ref, std::uint32_t shares, std::uint32_t px) {
                orders_.reserve_one();
                refs_.reserve_for(ref);
                SideBook& sb = l.side[s];
                const Prepared pr = prepare_level(l, sb, s, px);
                rest(l, sb, s, pr, ref, shares, p.locate, px);
                ++moved;
                if (pending_ != nullptr) maintain();
                return true;
            });
        } catch (...) {
            each([&](int s, std::uint64_t ref, std::uint32_t, std::uint32_t) {
                if (moved == 0) return false;
                --moved;
                const std::uint32_t i = refs_.find(ref);
                refs_.erase(ref);
                unlink(l, l.side[s], s, i);
                return true;
            });
            if (pending_ != nullptr) maintain();
            throw;
        }
        // Nothing below can fail.
        for (std::size_t k = 0; k < p.named_end; ++k) name_or_state(ev[k]);
        for (std::size_t c = 0; c < 256; ++c) counts_.events[c] += p.types[c];
        for (std::size_t r = 0; r < kReasons; ++r) counts_.rejects[r] += t.rejects[r];
        counts_.fills += t.fills;
        counts_.volume += t.volume;
        if (p.book != 0) {
            loc_.touch(p.locate);
            l.s.activity += p.book;
        }
        if (t.booked) count_book(l);
        clock_ = std::max(clock_, p.clock);
    }
    // --8<-- [end:batch_commit]

    Mode mode_;
    std::uint32_t window_cap_ = kDefaultWindow;
    std::uint64_t window_levels_ = 0;   // levels of every window now (kFreeLevels' account)
    GrowthBudget budget_;
    RefIndex refs_;                                // reference -> order node, all books
    OrderPool orders_;                             // every resting order of the market
    std::pmr::unsynchronized_pool_resource pool_;  // the far maps' nodes
    LocateTable loc_;                              // by locate: state and both sides
    Locate* pending_ = nullptr;                    // a locate whose windows need a look
    unsigned lookahead_ = kAuto;                   // look-ahead stages that run (0: none)
    std::uint64_t cache_bytes_ = last_level_cache();
    std::size_t n_books_ = 0;
    std::uint64_t moves_ = 0;
    BookStates states_;
    std::uint64_t clock_ = 0;                      // the latest timestamp seen
    std::size_t applied_ = 0;
    std::uint64_t refused_ = 0;  // see refused()
    bool moved_ = false;         // a best price moved since the last watch()
    std::size_t batch_min_ = kBatchMin;  // see set_match_batch
    std::uint64_t batch_runs_ = 0;
    MarketCounts counts_;
};

}  // namespace twinmatch
