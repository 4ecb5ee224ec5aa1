// Many books: one book per stock locate, driven by decoded ITCH events.
//
// The naive twin is naive/market.py; every decision below is written there first, in
// plain Python, and both twins must count every message, fill, anomaly and reject alike.
//
// Two modes:
//   * book  (a feed handler): rebuild NASDAQ's books from A F E C X D U, never matching.
//     Each locate's book is a FeedBook: orders rest where the feed puts them, even
//     through the other side (NASDAQ's book does lock and cross, e.g. in a halt's
//     quotation period), and the market reports how often and how long books were
//     locked or crossed. H messages set a symbol's trading state; it never gates an
//     update. Something the feed should never say (an unknown reference, an
//     over-execution) is counted as an anomaly and changes nothing.
//   * match (a matching engine): one twinmatch::Book per locate. A/F are incoming
//     limit orders that match when they cross (price 0: a market order), X reduces,
//     D cancels, U replaces (and may match); E/C/P/Q are the exchange's own executions
//     and are only counted.
//
// Order references are unique for the whole day, across symbols, so one global map
// (RefIndex) finds each live reference: in book mode it gives the order itself, in match
// mode the locate whose Book holds it. Every ITCH message carries a stock locate too;
// when the map and the message disagree, the map wins and the message counts as a
// `locate_mismatch` anomaly.
//
// What a failed allocation leaves: every growth an event may need (pools, the order
// table, a new book, a map node, a fill slot) happens before the event changes anything,
// so an out-of-memory error leaves the market exactly as it was after the previous event
// (run() then raises and says which event; the events before it are applied, it and
// later ones are not). In match mode the Book gives the same guarantee for its part
// (book.hpp, prepare(): room for the fills, the window's move and a spare map node for
// a new far-price level are all made before the order matches), and the market reserves
// room for every fill an add or replace can make (one per resting order) before it.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "book.hpp"
#include "dtypes.hpp"
#include "feed_text.hpp"
#include "itch.hpp"

namespace twinmatch {


// --8<-- [start:anomalies]
// Anomaly kinds (book mode); the numbers are ANOMALIES' indices in twinmatch/dtypes.py.
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
        std::uint64_t hi = ref >> (kSlotBits + kPageBits);
        if (hi >= top_.size()) return kAbsent;
        const Block* b = top_[hi];
        if (b == nullptr) return kAbsent;
        const Page* p = b->pages[(ref >> kSlotBits) & (kPages - 1)];
        if (p == nullptr) return kAbsent;
        return p->slot[ref & (kSlots - 1)] - 1;  // 0 - 1 wraps to kAbsent
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

// --8<-- [start:feedbook]
// Book mode's storage. All orders of all symbols live in one pool of 32-byte nodes, all
// price levels in one pool of 32-byte levels; a symbol's FeedBook keeps its prices in
// order (one ordered map per side: the best bid is the last key, the best ask the first).
// A node knows its level, so E C X D touch one order and one level and never look a
// price up. A F U find the level of their price in one hash table for the whole market
// (the market's `level_of_`, keyed by locate, side and price): one probe, where a walk
// down the map takes a cache miss and a hard-to-predict branch at every node. The map
// is touched only when a level comes or goes, and a level knows its own map node, so
// removing it (and finding the next best price) needs no search either.
using LevelMap = std::pmr::map<std::uint32_t, std::uint32_t>;  // price -> level index

struct FeedOrder {
    std::uint64_t ref;
    std::uint32_t shares;
    std::uint32_t level;  // index in the level pool
    std::uint32_t next;   // younger order at the same price, or kNil (free list: next free)
    std::uint32_t prev;   // older order, or kNil
    std::uint16_t locate;
    std::uint8_t side;    // 0 buy, 1 sell
    std::uint8_t pad_[5];
};
static_assert(sizeof(FeedOrder) == 32, "two order nodes per cache line");

struct FeedLevel {
    std::uint64_t total;  // shares at this price (can exceed 2^32)
    std::uint32_t head;   // oldest order
    std::uint32_t tail;   // youngest order
    std::uint32_t count;  // orders at this price (free list: next free level)
    std::uint32_t price;
    LevelMap::iterator node;  // this level's entry in its book's map
};
static_assert(sizeof(FeedLevel) == 32, "two levels per cache line");

// A growable array addressed by uint32 index with a free list threaded through one
// field of the free items (Link). reserve_one() grows it before an operation changes
// anything; alloc() then cannot fail. std::vector::reserve leaves the array unchanged
// if it throws.
template <class T, std::uint32_t T::*Link>
class Slab {
public:
    explicit Slab(GrowthBudget* budget) : budget_(budget) {}
    void reserve_one() {
        if (free_ == kNil && items_.size() == items_.capacity()) [[unlikely]] grow();
    }
    std::uint32_t alloc() {
        ++live_;
        if (free_ != kNil) {
            std::uint32_t i = free_;
            free_ = items_[i].*Link;
            return i;
        }
        items_.emplace_back();  // no reallocation: reserve_one() made room
        return static_cast<std::uint32_t>(items_.size() - 1);
    }
    void release(std::uint32_t i) {
        items_[i].*Link = free_;
        free_ = i;
        --live_;
    }
    T& operator[](std::uint32_t i) { return items_[i]; }
    const T& operator[](std::uint32_t i) const { return items_[i]; }
    std::size_t live() const { return live_; }

private:
    void grow() {
        constexpr std::size_t kMax = kNil;  // indices 0..2^32-2; kNil means "none"
        if (items_.size() >= kMax) throw std::length_error("more than 2^32-1 live items");
        budget_->spend();
        items_.reserve(std::min(kMax, std::max<std::size_t>(16, items_.capacity() * 2)));
    }
    std::vector<T> items_;
    std::uint32_t free_ = kNil;
    std::size_t live_ = 0;
    GrowthBudget* budget_;
};

struct FeedBook {
    // price -> level index, per side (levels(0) bids, levels(1) asks). The map nodes come from the
    // market's pool resource: freed nodes are reused, not returned to malloc.
    LevelMap bids, asks;
    explicit FeedBook(std::pmr::memory_resource* r) : bids(r), asks(r) {}
    LevelMap& levels(int side) { return side == 0 ? bids : asks; }
    const LevelMap& levels(int side) const { return side == 0 ? bids : asks; }
};

// Everything a message reads about its locate besides the book's maps, in one 64-byte
// line per locate: an E or a D touches this line, its order and its level, nothing else.
struct alignas(64) LocateState {
    std::unique_ptr<FeedBook> feed;  // book mode; null until the locate's first order
    std::uint64_t activity = 0;      // book messages (A F E C X D U), both modes
    std::uint64_t since = 0;         // when the book became locked or crossed (ITCH ns)
    std::uint32_t best[2] = {0, 0};  // best bid, best ask (0: none), kept as levels come
                                     // and go, so watch() needs no map walk
    char name[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};  // raw bytes of the R message
    std::uint16_t trading = 0;       // 0x100 | trading state of the last H, or 0
    std::uint8_t state = 0;          // 0 normal, 1 locked (bid = ask), 2 crossed (bid > ask)
};
static_assert(sizeof(LocateState) == 64, "one cache line per locate");
// --8<-- [end:feedbook]

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

class Market {
public:
    static constexpr std::uint64_t kNoLocate = 0x1'0000;  // locates are uint16
    // Match mode: a symbol's Book starts with the smallest window (64 levels) and a tiny
    // pool, and moves to a Book with window_levels levels once it holds kGrowAt orders:
    // memory follows the live orders, and busy symbols get the fast window.
    static constexpr std::uint64_t kDefaultWindow = 4096;
    static constexpr std::uint32_t kDefaultOrders = 64;
    static constexpr std::uint64_t kStartWindow = 64;
    static constexpr std::uint32_t kStartOrders = 4;
    static constexpr std::size_t kGrowAt = 64;

    explicit Market(Mode mode, std::uint64_t window_levels = kDefaultWindow,
                    std::uint32_t initial_orders = kDefaultOrders)
        : mode_(mode), window_(window_levels), initial_orders_(initial_orders),
          loc_(kNoLocate), refs_(&budget_), level_of_(&budget_), orders_(&budget_),
          levels_(&budget_) {
        Book probe(window_levels, 16);  // validates window_levels now, not at the first order
        if (mode_ == Mode::Match) books_.resize(kNoLocate);
    }

    Mode mode() const { return mode_; }
    const MarketCounts& counts() const { return counts_; }
    std::size_t live_orders() const { return refs_.size(); }
    std::size_t books() const { return n_books_; }
    std::uint64_t activity(std::uint16_t locate) const { return loc_[locate].activity; }
    std::string stock(std::uint16_t locate) const { return show_stock(loc_[locate].name); }
    // 0 if no H message named the locate, else 0x100 | the trading state byte.
    std::uint16_t trading_state(std::uint16_t locate) const { return loc_[locate].trading; }
    std::size_t applied() const { return applied_; }  // events of the last run() applied
    void set_growth_budget(std::int64_t steps) { budget_.left = steps; }

    // Match mode's Book of a locate, or nullptr.
    const Book* book(std::uint16_t locate) const {
        return mode_ == Mode::Match ? books_[locate].get() : nullptr;
    }

    // --8<-- [start:run]
    // Apply n events in order. Every fill is appended to `fills` with op_index = its
    // event's index. An event either applies entirely or (out of memory) not at all.
    void run(const ItchEvent* ev, std::size_t n, std::vector<FillRecord>& fills) {
        applied_ = 0;
        for (std::size_t k = 0; k < n; ++k) {
            apply(ev[k], static_cast<std::uint32_t>(k), fills);
            applied_ = k + 1;
        }
    }
    // --8<-- [end:run]

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
        while (n - off >= 2) {
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
    // --8<-- [end:run]

    // ---- queries (both modes) ----

    // Best price and its total shares of one side of a locate's book; price 0 if none.
    std::uint32_t best(std::uint16_t locate, Side side, std::uint64_t& qty) {
        qty = 0;
        if (mode_ == Mode::Match) {
            Book* b = books_[locate].get();
            return b == nullptr ? 0 : b->best(side, qty);
        }
        const FeedBook* b = loc_[locate].feed.get();
        if (b == nullptr) return 0;
        const auto& m = b->levels(int(side));
        if (m.empty()) return 0;
        std::uint32_t lv = side == Side::Buy ? m.rbegin()->second : m.begin()->second;
        qty = levels_[lv].total;
        return levels_[lv].price;
    }

    template <class Out>
    void depth(std::uint16_t locate, Side side, std::int64_t max_levels, Out&& out) const {
        if (mode_ == Mode::Match) {
            if (const Book* b = books_[locate].get()) b->depth(side, max_levels, out);
            return;
        }
        const FeedBook* b = loc_[locate].feed.get();
        if (b == nullptr || max_levels <= 0) return;
        std::int64_t emitted = 0;
        auto row = [&](std::uint32_t lv) {
            const FeedLevel& l = levels_[lv];
            out(DepthRow{l.price, l.total, l.count});
            return ++emitted < max_levels;
        };
        const auto& m = b->levels(int(side));
        if (side == Side::Buy) {
            for (auto it = m.rbegin(); it != m.rend() && row(it->second); ++it) {}
        } else {
            for (auto it = m.begin(); it != m.end() && row(it->second); ++it) {}
        }
    }

    // (locate, side, price, shares) of a live order.
    bool order(std::uint64_t ref, std::uint16_t& locate, Side& side, std::uint32_t& price,
               std::uint32_t& shares) const {
        std::uint32_t v = refs_.find(ref);
        if (v == RefMap::kAbsent) return false;
        if (mode_ == Mode::Match) {
            locate = static_cast<std::uint16_t>(v);
            return books_[v]->order(ref, side, price, shares);
        }
        const FeedOrder& o = orders_[v];
        locate = o.locate;
        side = Side(o.side);
        price = levels_[o.level].price;
        shares = o.shares;
        return true;
    }

    BookStates book_states() const {
        BookStates s;
        for (int k = 1; k < 3; ++k) {
            s.episodes[k] = states_.episodes[k];
            s.ns[k] = states_.ns[k];
        }
        for (const LocateState& b : loc_) {
            if (b.state == 0) continue;
            ++s.now[b.state];
            s.ns[b.state] += clock_ > b.since ? clock_ - b.since : 0;  // still open
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
        auto row = [&](std::size_t loc, const std::string& stock, Side side, std::uint32_t p,
                       std::uint64_t prio, std::uint64_t id, std::uint32_t q) {
            num(loc);
            s += ',';
            s += stock;
            s += side == Side::Buy ? ",B," : ",S,";
            num(p);
            s += ',';
            num(prio);
            s += ',';
            num(id);
            s += ',';
            num(q);
            s += '\n';
        };
        struct Row {
            std::uint32_t price;
            std::uint64_t priority, ref;
            std::uint32_t shares;
        };
        std::vector<Row> rows;
        for (std::size_t loc = 0; loc < kNoLocate; ++loc) {
            std::string stock = show_stock(loc_[loc].name);
            if (mode_ == Mode::Book) {
                const FeedBook* b = loc_[loc].feed.get();
                if (b == nullptr) continue;
                for (Side side : {Side::Buy, Side::Sell}) {
                    for (const auto& [price, lv] : b->levels(int(side))) {  // price ascending
                        std::uint64_t prio = 0;
                        for (std::uint32_t i = levels_[lv].head; i != kNil; i = orders_[i].next)
                            row(loc, stock, side, price, prio++, orders_[i].ref, orders_[i].shares);
                    }
                }
                continue;
            }
            const Book* b = books_[loc].get();
            if (b == nullptr || b->size() == 0) continue;
            for (Side side : {Side::Buy, Side::Sell}) {
                rows.clear();
                b->for_each_order(side, [&](std::uint32_t p, std::uint64_t prio,
                                            std::uint64_t id, std::uint32_t q) {
                    rows.push_back(Row{p, prio, id, q});
                });
                // Levels come best first: bids descending, so re-sort by price (stable:
                // each level's queue order is kept).
                std::stable_sort(rows.begin(), rows.end(),
                                 [](const Row& a, const Row& c) { return a.price < c.price; });
                for (const Row& r : rows) row(loc, stock, side, r.price, r.priority, r.ref, r.shares);
            }
        }
        return s;
    }
    // --8<-- [end:books_csv]

private:
    void anomaly(Anomaly a) { ++counts_.anomalies[static_cast<std::size_t>(a)]; }
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
        switch (e.type) {
            case 'R': std::memcpy(loc_[e.locate].name, e.stock, 8); break;
            case 'H':  // the trading state: recorded, never gates an update
                loc_[e.locate].trading = static_cast<std::uint16_t>(0x100 | e.side);
                break;
            case 'A': case 'F': case 'E': case 'C': case 'X': case 'D': case 'U':
                if (mode_ == Mode::Book) feed(e, idx, fills); else match(e, idx, fills);
                ++loc_[e.locate].activity;  // counted once the event has applied
                break;
            default: break;  // S P Q B ...: counted only
        }
        ++counts_.events[e.type];
        clock_ = std::max(clock_, e.timestamp);
    }

    // ------------------------------------------------------------ book mode

    // --8<-- [start:feed]
    // The per-message steps below are always_inline: inlined into both message loops
    // (run, run_itch) whatever the compiler's size budget for this file says. Called out
    // of line, they would need the decoded event stored to memory and read back, and a
    // call and return, on every message; the rare steps (a new level, an emptied one,
    // growth) are noinline, so that the loop stays small.
    [[gnu::always_inline]] void feed(const ItchEvent& e, std::uint32_t idx,
                                     std::vector<FillRecord>& fills) {
        if (e.type == 'A' || e.type == 'F') return feed_add(e);
        if (e.type == 'U' && e.price == 0) return anomaly(Anomaly::BadPrice);
        if (e.type != 'D' && e.shares == 0) return anomaly(Anomaly::BadShares);
        std::uint32_t i = refs_.find(e.order_ref);
        if (i == RefMap::kAbsent) return anomaly(Anomaly::UnknownRef);
        FeedOrder& o = orders_[i];
        if (o.locate != e.locate) anomaly(Anomaly::LocateMismatch);  // the map wins
        LocateState& b = loc_[o.locate];
        switch (e.type) {
            case 'E': case 'C': {
                if (e.shares > o.shares) return anomaly(Anomaly::OverExecution);
                reserve_fills(fills, 1);
                // E trades at the resting price; C at its own Execution Price, whatever
                // it is (0 included): the spec says the print is at that price.
                std::uint32_t price = e.type == 'C' ? e.price : levels_[o.level].price;
                emit(fills, e.order_ref, 0, price, e.shares, Side(o.side ^ 1), idx);
                take(b, i, e.shares);  // keeps its place in the queue
                break;
            }
            case 'X':
                if (e.shares > o.shares) return anomaly(Anomaly::OverCancel);
                take(b, i, e.shares);
                break;
            case 'D':
                remove(b, i);
                break;
            default:  // 'U'
                if (e.new_order_ref != e.order_ref && refs_.find(e.new_order_ref) != RefMap::kAbsent)
                    return anomaly(Anomaly::DuplicateRef);
                replace(b, i, e);
                break;
        }
        watch(b, e.timestamp);
    }

    [[gnu::always_inline]] void feed_add(const ItchEvent& e) {
        if (e.side != 'B' && e.side != 'S') return anomaly(Anomaly::BadSide);
        if (e.price == 0) return anomaly(Anomaly::BadPrice);
        if (e.shares == 0) return anomaly(Anomaly::BadShares);
        if (refs_.find(e.order_ref) != RefMap::kAbsent) return anomaly(Anomaly::DuplicateRef);
        // Every allocation first; nothing below the level lookup can fail.
        orders_.reserve_one();
        levels_.reserve_one();
        level_of_.reserve_one();
        refs_.reserve_for(e.order_ref);
        LocateState& b = loc_[e.locate];
        std::unique_ptr<FeedBook>& slot = b.feed;
        bool created = false;
        if (!slot) [[unlikely]] {
            budget_.spend();
            slot = std::make_unique<FeedBook>(&pool_);
            created = true;
            ++n_books_;
        }
        int side = e.side == 'B' ? 0 : 1;
        std::uint32_t lv;
        try {
            lv = level_at(b, e.locate, side, e.price);
        } catch (...) {
            if (created) {  // the book this add created goes again: nothing changed
                slot.reset();
                --n_books_;
            }
            throw;
        }
        rest(lv, e.order_ref, e.shares, e.locate, side);
        watch(b, e.timestamp);
    }

    // --8<-- [end:feed]

    // --8<-- [start:feed_ops]
    // The key of a price level in level_of_: locate, side and price (49 bits; RefMap's
    // hash is keyed per market, so no stream can pile its levels onto one probe run).
    static std::uint64_t level_key(std::uint16_t locate, int side, std::uint32_t price) {
        return (std::uint64_t(locate) << 33) | (std::uint64_t(side) << 32) | price;
    }

    // The level of a price on one side, created (empty) if absent. May throw (a map
    // node); level_of_ must have room for one more (reserve_one) before.
    [[gnu::always_inline]] std::uint32_t level_at(LocateState& b, std::uint16_t locate, int side,
                                                  std::uint32_t price) {
        const std::uint64_t key = level_key(locate, side, price);
        std::uint32_t lv = level_of_.find(key);
        if (lv != RefMap::kAbsent) [[likely]] return lv;
        return new_level(b, key, side, price);
    }
    [[gnu::noinline]] std::uint32_t new_level(LocateState& b, std::uint64_t key, int side,
                                              std::uint32_t price) {
        std::uint32_t lv;
        auto& m = b.feed->levels(side);
        budget_.spend();
        auto it = m.emplace(price, kNil).first;  // may throw; then nothing has changed
        lv = levels_.alloc();                    // reserved: cannot fail
        levels_[lv] = FeedLevel{0, kNil, kNil, 0, price, it};
        it->second = lv;
        level_of_.insert(key, lv);               // reserved: cannot fail
        std::uint32_t& best = b.best[side];
        if (best == 0 || (side == 0 ? price > best : price < best)) best = price;
        return lv;
    }

    // A new order at the back of level lv's queue. Cannot fail (everything reserved).
    [[gnu::always_inline]] void rest(std::uint32_t lv, std::uint64_t ref, std::uint32_t shares,
                                     std::uint16_t locate, int side) {
        std::uint32_t i = orders_.alloc();
        FeedLevel& l = levels_[lv];
        FeedOrder& o = orders_[i];
        o.ref = ref;
        o.shares = shares;
        o.level = lv;
        o.next = kNil;
        o.prev = l.tail;
        o.locate = locate;
        o.side = static_cast<std::uint8_t>(side);
        if (l.tail != kNil) orders_[l.tail].next = i; else l.head = i;
        l.tail = i;
        l.total += shares;
        ++l.count;
        refs_.insert(ref, i);
    }

    // Take 1..its shares off order i (it keeps its place), removing it at zero.
    [[gnu::always_inline]] void take(LocateState& b, std::uint32_t i, std::uint32_t shares) {
        FeedOrder& o = orders_[i];
        if (shares == o.shares) return remove(b, i);
        o.shares -= shares;
        levels_[o.level].total -= shares;
    }

    // Forget order i: unlink it, and its reference.
    [[gnu::always_inline]] void remove(LocateState& b, std::uint32_t i) {
        refs_.erase(orders_[i].ref);
        unlink(b, i);
    }
    // Unlink order i from its queue and free its node; an emptied level leaves its map
    // (through its own node: no search) and the level table.
    [[gnu::always_inline]] void unlink(LocateState& b, std::uint32_t i) {
        FeedOrder& o = orders_[i];
        FeedLevel& l = levels_[o.level];
        if (o.prev != kNil) orders_[o.prev].next = o.next; else l.head = o.next;
        if (o.next != kNil) orders_[o.next].prev = o.prev; else l.tail = o.prev;
        l.total -= o.shares;
        if (--l.count == 0) [[unlikely]] drop_level(b, o.locate, o.side, o.level);
        orders_.release(i);
    }
    [[gnu::noinline]] void drop_level(LocateState& b, std::uint16_t locate, int side,
                                      std::uint32_t lv) {
        FeedLevel& l = levels_[lv];
        auto& m = b.feed->levels(side);
        if (b.best[side] == l.price) {  // the best level goes: the next one is its neighbour
            if (side == 0) b.best[0] = l.node == m.begin() ? 0 : std::prev(l.node)->first;
            else b.best[1] = std::next(l.node) == m.end() ? 0 : std::next(l.node)->first;
        }
        m.erase(l.node);
        level_of_.erase(level_key(locate, side, l.price));
        levels_.release(lv);
    }

    // U: the old order leaves, the new one rests at the back of its price, same side.
    // Everything that can fail (growth, a map node for a new price) comes first. The new
    // order is linked before the old one leaves: its level then holds at least one order,
    // so the removal cannot drop the level the new order is in.
    void replace(LocateState& b, std::uint32_t i, const ItchEvent& e) {
        orders_.reserve_one();
        levels_.reserve_one();
        level_of_.reserve_one();
        refs_.reserve_for(e.new_order_ref);
        int side = orders_[i].side;
        std::uint16_t locate = orders_[i].locate;
        std::uint32_t lv = level_at(b, locate, side, e.price);  // may throw: nothing changed yet
        refs_.erase(e.order_ref);  // first: the new ref may equal the old one
        rest(lv, e.new_order_ref, e.shares, locate, side);
        unlink(b, i);
    }

    // --8<-- [end:feed_ops]

    // --8<-- [start:watch]
    // After a book-mode message changed book b: is it locked or crossed now? Counts the
    // episodes and the time spent in each (a clock going back adds nothing).
    [[gnu::always_inline]] void watch(LocateState& b, std::uint64_t ts) {
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
    void match(const ItchEvent& e, std::uint32_t idx, std::vector<FillRecord>& fills) {
        switch (e.type) {
            case 'A': case 'F': return match_add(e, idx, fills);
            case 'E': case 'C': return;  // an engine makes its own executions
            default: break;
        }
        if (e.type == 'U' && e.price == 0) return reject(Reason::BadPrice);
        if (e.type != 'D' && e.shares == 0) return reject(Reason::BadQty);
        std::uint32_t loc = refs_.find(e.order_ref);
        if (loc == RefMap::kAbsent) return reject(Reason::UnknownId);
        if (loc != e.locate) anomaly(Anomaly::LocateMismatch);
        Book& b = *books_[loc];
        if (e.type == 'X') {
            std::uint64_t left;
            Reason r = b.reduce(e.order_ref, e.shares, left);
            if (r == Reason::OverReduce) return reject(r);
            if (left == 0) refs_.erase(e.order_ref);
        } else if (e.type == 'D') {
            std::uint64_t removed;
            b.cancel(e.order_ref, removed);
            refs_.erase(e.order_ref);
        } else {  // 'U'
            if (e.new_order_ref != e.order_ref && refs_.find(e.new_order_ref) != RefMap::kAbsent)
                return reject(Reason::DuplicateId);
            reserve_fills(fills, b.size() + 1);  // a replace fills at most every resting order
            refs_.reserve_for(e.new_order_ref);
            refs_.erase(e.order_ref);
            std::size_t first = fills.size();
            b.replace(e.order_ref, e.new_order_ref, e.price, e.shares, [&](const Fill& f) {
                emit(fills, f.resting_id, f.aggressor_id, f.price, f.qty, f.aggressor_side, idx);
            });
            settle(b, e.new_order_ref, static_cast<std::uint16_t>(loc), fills, first);
        }
    }

    void match_add(const ItchEvent& e, std::uint32_t idx, std::vector<FillRecord>& fills) {
        if (e.side != 'B' && e.side != 'S') return reject(Reason::BadSide);
        if (e.shares == 0) return reject(Reason::BadQty);
        if (refs_.find(e.order_ref) != RefMap::kAbsent) return reject(Reason::DuplicateId);
        refs_.reserve_for(e.order_ref);  // before the book changes: the insert cannot fail
        std::unique_ptr<Book>& slot = books_[e.locate];
        bool created = false;
        if (!slot) [[unlikely]] {
            budget_.spend();
            slot = std::make_unique<Book>(std::min(kStartWindow, window_), kStartOrders);
            created = true;
            ++n_books_;
        }
        Book& b = *slot;
        Side side = e.side == 'B' ? Side::Buy : Side::Sell;
        std::size_t first = fills.size();
        auto sink = [&](const Fill& f) {
            emit(fills, f.resting_id, f.aggressor_id, f.price, f.qty, f.aggressor_side, idx);
        };
        try {
            reserve_fills(fills, b.size() + 1);  // an add fills at most every resting order
            budget_.spend_if(b.pool_capacity() == b.size());  // the test hook: Book growth
            // The Book grows (if it must) before it changes anything (book.hpp).
            if (e.price == 0) {  // the CSV convention: price 0 is a market order
                std::uint64_t unfilled;
                b.add_market(e.order_ref, side, e.shares, unfilled, sink);
            } else {
                b.add_limit(e.order_ref, side, e.price, e.shares, sink);
            }
        } catch (...) {
            if (created) {  // the book this add created goes again: nothing changed
                slot.reset();
                --n_books_;
            }
            throw;
        }
        settle(b, e.order_ref, e.locate, fills, first);
        if (b.size() >= kGrowAt && b.window_levels() < window_) [[unlikely]] grow(e.locate);
    }

    // After an order entered `b`: forget the resting orders its fills (from index
    // `first` on) removed, and remember the order itself if a remainder rests.
    void settle(Book& b, std::uint64_t ref, std::uint16_t locate,
                std::vector<FillRecord>& fills, std::size_t first) {
        Side s;
        std::uint32_t p, q;
        for (std::size_t i = first; i < fills.size(); ++i)
            if (!b.order(fills[i].resting_id, s, p, q)) refs_.erase(fills[i].resting_id);
        if (b.order(ref, s, p, q)) refs_.insert(ref, locate);  // reserved before
    }

    // A busy symbol's Book moves to the full window: a new Book gets every order, side by
    // side, each level's queue oldest first, so every queue keeps its order (a match-mode
    // book never crosses, so nothing matches). Growth is only an optimisation: if memory
    // runs out, the small Book stays.
    void grow(std::uint16_t locate) {
        std::unique_ptr<Book>& slot = books_[locate];
        try {
            auto big = std::make_unique<Book>(
                window_, static_cast<std::uint32_t>(std::max<std::size_t>(
                             initial_orders_, 2 * slot->size())));
            for (Side side : {Side::Buy, Side::Sell})
                slot->for_each_order(side, [&](std::uint32_t p, std::uint64_t, std::uint64_t id,
                                               std::uint32_t q) {
                    big->add_limit(id, side, p, q, [](const Fill&) {});
                });
            slot = std::move(big);
        } catch (const std::bad_alloc&) {
        }
    }
    // --8<-- [end:match]

    Mode mode_;
    std::uint64_t window_;
    std::uint32_t initial_orders_;
    GrowthBudget budget_;
    std::vector<std::unique_ptr<Book>> books_;     // match mode, by locate; null until used
    std::pmr::unsynchronized_pool_resource pool_;  // book mode: the FeedBooks' map nodes
    std::size_t n_books_ = 0;
    std::vector<LocateState> loc_;              // by locate (the book-mode books in it)
    RefIndex refs_;                             // ref -> order node (book) / locate (match)
    RefMap level_of_;                           // book mode: level_key() -> level index
    Slab<FeedOrder, &FeedOrder::next> orders_;  // book mode's orders, all symbols
    Slab<FeedLevel, &FeedLevel::count> levels_; // book mode's price levels, all symbols
    BookStates states_;
    std::uint64_t clock_ = 0;                   // the latest timestamp seen
    std::size_t applied_ = 0;
    MarketCounts counts_;
};

}  // namespace twinmatch
