// The optimized order book: one symbol, price-time priority.
//
// Where the naive twin uses a dict of price -> list of orders, this book uses
//   * a window of price levels stored in one flat array (index = price - base),
//   * two hierarchical bitsets (bids, asks) saying which levels are non-empty, so
//     the best price is a handful of count-leading/trailing-zero instructions,
//   * 32-byte order nodes in a pre-allocated pool, linked into one FIFO per level,
//   * an open-addressing hash table from the (arbitrary uint64) order id to its node.
// Prices outside the window live in a std::map per side (the slow path). The window
// re-centres when it holds no orders, or when the market has moved out of it (neither
// side's best price is inside): its levels go to the far map, and the far levels around
// the new centre move in.
//
// Nothing on the hot path allocates once the pool and hash have reached their
// steady-state size; both grow by doubling *before* an operation mutates anything,
// so running out of memory raises an error and never loses half an operation.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtypes.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace twinmatch {

// Test-only allocation failure: tests/test_native_book_internals.py sets a countdown
// (optimized._native._fail_allocation_after) and the allocation point it reaches zero
// at throws std::bad_alloc, as if memory had run out there. Every allocation point
// of the books calls alloc_checkpoint() first; all of them are on slow paths (growth,
// a far level, a window move, a sink running out of room), so the load and the branch
// on a counter that is -1 (off) never run on the hot path.
inline std::atomic<std::int64_t> g_alloc_countdown{-1};
inline void alloc_checkpoint() {
    if (g_alloc_countdown.load(std::memory_order_relaxed) < 0) [[likely]] return;
    if (g_alloc_countdown.fetch_sub(1, std::memory_order_relaxed) == 0) throw std::bad_alloc();
}

// malloc for the big arrays (the node pool, the id hash), aligned to a 64-byte cache
// line, so that a 32-byte node never straddles two lines. From 2 MB up, aligned to
// 2 MB and Linux is asked for 2 MB pages ("transparent huge pages"), so that a random
// probe does not also miss the TLB (a 4 KB page covers only 128 nodes or 512 slots).
// Freed with std::free.
inline constexpr std::size_t kPoolAlign = 64;
inline constexpr std::size_t kHugePage = std::size_t(2) << 20;
inline void* alloc_big(std::size_t bytes) {
    alloc_checkpoint();
    std::size_t align = bytes >= kHugePage ? kHugePage : kPoolAlign;
    // aligned_alloc wants a size that is a multiple of the alignment.
    void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
    return p;
}

// The largest power of two (up to 2 MB) that divides an address: for the tests that
// check the alignment promised above.
inline std::uint64_t address_alignment(const void* p) {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    return std::min<std::uint64_t>(a & (~a + 1), kHugePage);
}

inline constexpr std::uint32_t kNil = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::int64_t kMaxPrice = 0xFFFF'FFFFll;  // prices are uint32 1..2^32-1
inline constexpr std::int64_t kMaxQty = 0xFFFF'FFFFll;

inline Side opposite(Side s) { return s == Side::Buy ? Side::Sell : Side::Buy; }

// The book cannot take one more resting order: it holds max_orders already (2^31 at
// most: the id table's limit), or memory ran out. Thrown before the operation
// changes anything. A std::bad_alloc, so Python sees a MemoryError (as it does when
// memory itself runs out while growing), never the ValueError of a rejected order.
class BookFull : public std::bad_alloc {
public:
    explicit BookFull(const char* why) : why_(why) {}
    const char* what() const noexcept override { return why_; }

private:
    const char* why_;
};

// --8<-- [start:steps]
// Chapter 1 grows the book one decision at a time and measures each (its "ablation"):
// every decision below is a bit of BasicBook's template parameter, and `if constexpr`
// picks the code for it at compile time, so each step is this same source compiled
// with some decisions left out, not a copy. `Book`, the one every other part of the
// project uses, has them all; the steps in between exist for the chapter's benchmark
// and run the same test suite.
namespace step {
inline constexpr std::uint32_t kBitset = 1;       // best price by bitset descent (else a scan)
inline constexpr std::uint32_t kWarmReuse = 2;    // reuse the node freed last (else the oldest)
inline constexpr std::uint32_t kFingerprint = 4;  // a probe checks the slot's fingerprint first
inline constexpr std::uint32_t kBranchFree = 8;   // side and link choices without branches
inline constexpr std::uint32_t kPrefetch = 16;    // the batch loop's prefetch hints
inline constexpr std::uint32_t kAll = 31;
}  // namespace step

// The steps in the order the chapter adds them; each has the decisions of the one
// before.
struct BookStep {
    const char* name;
    std::uint32_t steps;
    const char* adds;
};
inline constexpr BookStep kBookSteps[] = {
    {"flat", 0, "a flat array of levels, the best price found by scanning it"},
    {"bitset", step::kBitset, "the best price found by descending a bitset"},
    {"warm-nodes", step::kBitset | step::kWarmReuse,
     "the node freed last is the next one handed out"},
    {"fingerprints", step::kBitset | step::kWarmReuse | step::kFingerprint,
     "id-hash probes compare a fingerprint before reading a node"},
    {"branch-free", step::kAll & ~step::kPrefetch,
     "side keys and queue unlinking without branches"},
    {"prefetch", step::kAll, "the batch loop prefetches hash slots and nodes (= Book)"},
};
inline constexpr std::size_t kBookStepCount = std::size(kBookSteps);
static_assert(kBookSteps[kBookStepCount - 1].steps == step::kAll);
// --8<-- [end:steps]

// One trade, as both the per-call API (Python Fill) and the batch API see it.
struct Fill {
    std::uint64_t resting_id;
    std::uint64_t aggressor_id;
    std::uint32_t price;
    std::uint32_t qty;
    Side aggressor_side;
};

// --8<-- [start:node]
// One resting order. 32 bytes, so two fit in a 64-byte cache line (the pool is
// allocated line-aligned, so none straddles two); links are 32-bit pool indices
// instead of 64-bit pointers, which is what makes it fit.
struct Node {
    std::uint64_t id;     // the order id (any uint64)
    std::uint32_t qty;    // quantity still resting
    std::uint32_t price;  // its level's price
    std::uint32_t next;   // next (younger) order at this price, or kNil
    std::uint32_t prev;   // previous (older) order at this price, or kNil
    std::uint32_t fp;     // the id table's fingerprint of id, kept so removal need not rehash
    Side side;
    std::uint8_t pad_[3];
};
static_assert(sizeof(Node) == 32, "an order node must stay 32 bytes");

// One price level: a FIFO of nodes (oldest at head) and its totals.
struct Level {
    std::uint64_t total;  // sum of qty; can exceed 2^32 with many orders
    std::uint32_t head;   // oldest order (matched first)
    std::uint32_t tail;   // youngest order (new arrivals join here)
    std::uint32_t count;  // number of orders; 0 means the level is empty
    std::uint32_t pad_;
};
static_assert(sizeof(Level) == 24);
// --8<-- [end:node]

// --8<-- [start:pool]
// A growable array of nodes addressed by uint32 index, with a free list threaded
// through the `next` field of free nodes. The array starts on a cache-line boundary
// (alloc_big), so with 32-byte nodes every node lies inside one line. Growing copies
// the nodes into a new array: Node is trivially copyable, and everyone holds indices,
// never pointers, across a growth.
// WarmReuse (chapter 1's warm-nodes step): the free list is a stack, so the node freed
// last, likely still in cache, is handed out next; without it, a queue hands out the
// node freed longest ago.
template <bool WarmReuse = true>
class BasicNodePool {
public:
    // At most `limit` nodes (kNil is reserved as "no node", so 2^32-1 at most).
    BasicNodePool(std::uint32_t capacity, std::uint32_t limit) : limit_(std::max<std::uint32_t>(limit, 1)) {
        reserve(std::clamp<std::uint32_t>(capacity, std::min<std::uint32_t>(16, limit_), limit_));
        // Node 0 is what the batch loop's hints read when they find no order (see
        // Book::prefetch_node): give it defined links before it is ever handed
        // out.
        nodes_[0] = Node{0, 0, 0, kNil, kNil, 0, Side::Buy, {}};
    }
    ~BasicNodePool() { std::free(nodes_); }
    BasicNodePool(const BasicNodePool&) = delete;
    BasicNodePool& operator=(const BasicNodePool&) = delete;

    Node& operator[](std::uint32_t i) { return nodes_[i]; }
    const Node& operator[](std::uint32_t i) const { return nodes_[i]; }

    // Called before an operation changes anything: afterwards alloc() cannot fail.
    void ensure_one() {
        if (free_head_ == kNil && used_ == cap_) [[unlikely]] grow();
    }
    std::uint32_t alloc() {  // precondition: ensure_one() since the last alloc
        if (free_head_ != kNil) [[likely]] {  // in steady state, a freed node is reused
            std::uint32_t i = free_head_;
            free_head_ = nodes_[i].next;
            return i;
        }
        return used_++;
    }
    void release(std::uint32_t i) {
        if constexpr (WarmReuse) {  // push: the next alloc() takes this node
            nodes_[i].next = free_head_;
            free_head_ = i;
        } else {  // append: every node freed before it is taken first
            nodes_[i].next = kNil;
            if (free_head_ == kNil) free_head_ = i;
            else nodes_[free_tail_].next = i;
            free_tail_ = i;
        }
    }
    void clear() {
        used_ = 0;
        free_head_ = kNil;
        if constexpr (!WarmReuse) free_tail_ = kNil;
    }
    std::uint32_t capacity() const { return cap_; }
    std::uint32_t high_water() const { return used_; }
    const Node* data() const { return nodes_; }

private:
    void grow() {
        if (cap_ >= limit_) throw BookFull("book full: it holds max_orders resting orders");
        std::uint64_t want = std::min<std::uint64_t>(std::uint64_t(cap_) * 2, limit_);
        reserve(static_cast<std::uint32_t>(want));
    }
    void reserve(std::uint32_t n) {
        auto* p = static_cast<Node*>(alloc_big(std::size_t(n) * sizeof(Node)));  // may throw
        if (nodes_ != nullptr)  // node 0 too, even before it is handed out
            std::memcpy(p, nodes_, std::size_t(std::max<std::uint32_t>(used_, 1)) * sizeof(Node));
        std::free(nodes_);
        nodes_ = p;
        cap_ = n;
    }
    Node* nodes_ = nullptr;
    std::uint32_t cap_ = 0;
    std::uint32_t limit_;
    std::uint32_t used_ = 0;  // nodes ever handed out (the rest are untouched)
    std::uint32_t free_head_ = kNil;
    // The queue's back, only without WarmReuse: in Book it takes no room, so Book's
    // layout (and the code that addresses its members) is what it was before the steps
    // existed.
    struct NoTail {};
    [[no_unique_address]] std::conditional_t<WarmReuse, NoTail, std::uint32_t> free_tail_{};
};
using NodePool = BasicNodePool<>;
// --8<-- [end:pool]

// --8<-- [start:hash_table]
// Order id -> node index. Open addressing with linear probing in a power-of-two
// table kept at most half full. A slot is 8 bytes: the node index and a 32-bit
// fingerprint of the id (see fingerprint()). The id itself is not stored: a
// fingerprint match is confirmed against the node's id, which the caller is about to
// read anyway. Small slots mean the table of a busy book stays in cache. The home
// slot is the fingerprint's top bits, so growing or shifting entries never needs the
// id. Any uint64 is a valid id (0 and 2^64-1 too): emptiness is marked by
// node == kNil, never by a special id. Deletion shifts later entries of the probe
// run back ("backward shift"), so there are no tombstones.
class IdHash {
public:
    explicit IdHash(std::uint32_t expected) {
        std::uint64_t cap = 16;
        while (cap < std::uint64_t(expected) * 2) cap <<= 1;
        alloc_table(std::min(cap, kMaxSlots));
    }
    ~IdHash() { std::free(slots_); }
    IdHash(const IdHash&) = delete;
    IdHash& operator=(const IdHash&) = delete;
    // --8<-- [end:hash_table]

    // --8<-- [start:hash_fingerprint]
    // 2^64 / golden ratio, made odd: Fibonacci hashing's multiplier.
    static constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
    // Fibonacci hashing (used as is by the market's reference map): fold the high half
    // into the low half (so ids differing only in their high bits still differ), then
    // multiply by 2^64 / golden ratio; the top bits of the product are the hash.
    static std::uint64_t mix(std::uint64_t k) {
        k ^= k >> 32;
        return k * kGolden;
    }
    // The fingerprint: the top 32 bits of the folded id times this table's multiplier.
    // Exchanges number orders in sequence, and with the golden-ratio multiplier the top
    // bits of consecutive ids' products are spread as evenly as points can be (each new
    // one falls in the largest gap left), so a run of sequential ids as long as 45% of
    // the table gets distinct home slots (a test checks several sizes and starts). The
    // fold adds the high half to the id, where mix() XORs it: adding keeps a run of
    // consecutive ids consecutive, XOR would scatter it into pieces. (Adding maps some
    // pairs of ids to one number, k and k + 2^64 - 2^32 + 1 for k < 2^32 - 1, never
    // more than two: they share a fingerprint, and the id comparison tells them apart.)
    std::uint32_t fingerprint(std::uint64_t k) const {
        k += k >> 32;
        k ^= salt_;  // 0 until the table is re-keyed (see rebuild_if_needed)
        return static_cast<std::uint32_t>((k * mul_) >> 32);
    }
    // The home slot: the fingerprint's top log2(capacity) bits, i.e. the product's top
    // bits (its low bits depend only on the id's low bits, and would collide).
    std::uint64_t home(std::uint32_t fp) const { return fp >> shift_; }
    // --8<-- [end:hash_fingerprint]

    // --8<-- [start:hash_lookup]
    // Every lookup takes the fingerprint as well as the id: the caller computed it once
    // per operation and hands it down, instead of rehashing. The answer is a slot: the
    // one holding the id, or the empty slot that ends its probe run (node_at() is then
    // kNil). Keeping the slot lets a cancel erase it directly. CheckFp (chapter 1's
    // fingerprints step): compare the slot's fingerprint before reading its node's id,
    // so that walking past another id's slot reads no node.
    template <bool CheckFp = true, class Pool>
    std::uint64_t slot_of(std::uint64_t key, std::uint32_t fp, const Pool& pool) const {
        for (std::uint64_t i = home(fp);; i = (i + 1) & mask_) {
            Slot s = slots_[i];
            if (s.node == kNil || ((!CheckFp || s.fp == fp) && pool[s.node].id == key))
                return i;
        }
    }
    std::uint32_t node_at(std::uint64_t slot) const { return slots_[slot].node; }
    template <bool CheckFp = true, class Pool>
    std::uint32_t find(std::uint64_t key, std::uint32_t fp, const Pool& pool) const {
        return node_at(slot_of<CheckFp>(key, fp, pool));
    }
    // --8<-- [end:hash_lookup]
    // --8<-- [start:hash_insert]
    // Called before an operation changes anything: afterwards insert_at() cannot fail.
    // Returns true if the table was rebuilt (grown or re-keyed), which moves every
    // entry and may change every fingerprint: earlier slots and fingerprints are stale.
    template <class Pool>
    bool ensure_one(Pool& pool) {
        // Room for one more, the table staying at most half full: the common case.
        if (size_ < grow_at_) [[likely]] return false;
        return rebuild_if_needed(pool, true);
    }
    // The same, for an operation that frees a slot before it takes one (replace):
    // only a pending re-key (see insert_at) is done, never a growth.
    template <class Pool>
    bool ensure_keyed(Pool& pool) {
        if (!long_run_) [[likely]] return false;
        return rebuild_if_needed(pool, false);
    }
    // Put an absent id in `slot`: the empty slot that slot_of() returned for it, with
    // no insert or erase since (so the lookup that rejected duplicates places the id).
    void insert_at(std::uint64_t slot, std::uint32_t fp, std::uint32_t node) {
        slots_[slot] = Slot{fp, node};
        ++size_;
        // Far from home: ids that collide (crafted ones do: the multiplier is public)
        // pile up in one probe run, and every operation on them walks it. Have the next
        // ensure_one() re-key the table with a random multiplier instead.
        if (((slot - home(fp)) & mask_) > kLongRun) [[unlikely]] {
            long_run_ = true;
            grow_at_ = 0;  // sends the next ensure_one() to the slow path
        }
    }
    // --8<-- [end:hash_insert]
    // --8<-- [start:hash_erase]
    // Forget the entry with fingerprint fp that maps to `node` (no id comparison).
    void erase(std::uint32_t fp, std::uint32_t node) {
        std::uint64_t i = home(fp);
        while (slots_[i].node != node) i = (i + 1) & mask_;
        erase_at(i);
    }
    // Forget the entry in slot i (a slot_of() answer, with no insert or erase since).
    void erase_at(std::uint64_t i) {
        // Backward shift: walk the rest of the run; an entry may move into the hole
        // at i only if i lies between its home slot and where it sits now.
        std::uint64_t j = (i + 1) & mask_;
        for (; slots_[j].node != kNil; j = (j + 1) & mask_) {
            std::uint64_t h = home(slots_[j].fp);
            if (((j - h) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].node = kNil;
        --size_;
    }
    // --8<-- [end:hash_erase]
    void clear() {
        for (std::uint64_t i = 0; i <= mask_; ++i) slots_[i].node = kNil;
        size_ = 0;
    }
    std::uint64_t capacity() const { return mask_ + 1; }
    std::uint64_t size() const { return size_; }
    // Batch hint: start loading the home slot of a fingerprint.
    void prefetch(std::uint32_t fp) const { __builtin_prefetch(&slots_[home(fp)]); }
    // The node in a fingerprint's home slot (kNil if empty): for the node prefetch.
    std::uint32_t home_node(std::uint32_t fp) const { return slots_[home(fp)].node; }

    // Internals, for tests: how far entries sit from their home slot, and re-keys.
    std::uint64_t rekeys() const { return rekeys_; }
    bool keyed() const { return mul_ != kGolden; }
    std::uint64_t max_displacement() const { return displacement(true); }
    std::uint64_t total_displacement() const { return displacement(false); }
    const void* data() const { return slots_; }

private:
    // --8<-- [start:hash_slot]
    struct Slot {
        std::uint32_t fp;    // fingerprint(id); its top bits are the home slot
        std::uint32_t node;  // node index, or kNil when the slot is empty
    };
    static_assert(sizeof(Slot) == 8);
    // The home slot comes from the 32-bit fingerprint, so at most 2^32 slots.
    static constexpr std::uint64_t kMaxSlots = std::uint64_t(1) << 32;
    // An entry this far from home is a sign of collisions, not of bad luck: at most
    // half full, linear probing with a random-like hash puts an entry > 128 slots from
    // home with a probability that decays exponentially in the distance (e^-24 or so).
    static constexpr std::uint64_t kLongRun = 128;
    // --8<-- [end:hash_slot]

    void alloc_table(std::uint64_t cap) {
        // alloc_big throws before anything changes
        auto* p = static_cast<Slot*>(alloc_big(cap * sizeof(Slot)));
        for (std::uint64_t i = 0; i < cap; ++i) p[i].node = kNil;
        slots_ = p;
        mask_ = cap - 1;
        shift_ = 32 - static_cast<std::uint32_t>(std::countr_zero(cap));
        grow_at_ = cap / 2;
        size_ = 0;
    }

    // --8<-- [start:hash_rekey]
    // The slow path of ensure_one() / ensure_keyed(): grow the table if it is half full
    // (and `grow`), re-key it if an entry landed far from home. Re-keying picks a
    // random salt, XORed into the folded id, and a random odd multiplier.
    // Multiply-shift with a random odd multiplier puts two given ids in one home slot
    // with probability at most 2 / capacity, whatever the ids (but for the fold's
    // pairs, above), yet it maps an arithmetic progression of ids (crafted ids are one)
    // to a progression of products, whose top bits bunch for an unlucky multiplier:
    // without the salt, 1 table in 100 of a test's re-keyed tables averaged 10 or more
    // probes per id. The XOR breaks the progression. At most one re-key per table size,
    // so re-keys cost O(1) per insert in total. Fills and books never depend on the
    // hash: only speed.
    template <class Pool>
    [[gnu::noinline]] bool rebuild_if_needed(Pool& pool, bool grow) {
        std::uint64_t cap = mask_ + 1;
        bool rekey = long_run_ && rekeyed_at_ != cap;
        grow = grow && size_ >= cap / 2;
        if (grow && cap >= kMaxSlots)
            throw BookFull("book full: the order id table holds 2^31 ids");
        if (!rekey && !grow) {
            long_run_ = false;  // this size was re-keyed already: live with it
            grow_at_ = cap / 2;
            return false;
        }
        rebuild(grow ? cap * 2 : cap, rekey ? random_multiplier() : mul_,
                rekey ? random_multiplier() : salt_, pool);
        if (rekey) {
            rekeyed_at_ = mask_ + 1;
            ++rekeys_;
        }
        long_run_ = false;
        return true;
    }
    // --8<-- [end:hash_rekey]
    // --8<-- [start:hash_rebuild]
    static std::uint64_t random_multiplier() {
        std::uint64_t m;
        try {
            std::random_device rd;
            m = (std::uint64_t(rd()) << 32) ^ rd();
        } catch (const std::exception&) {  // no entropy source: the clock will do
            m = static_cast<std::uint64_t>(
                std::chrono::steady_clock::now().time_since_epoch().count());
            m = mix(m ^ (m >> 29));
        }
        return m | 1;  // odd, so multiplying is a bijection
    }
    // Move every entry into a new table of `cap` slots hashed with multiplier `mul`.
    // A new multiplier changes every fingerprint, so each is recomputed from the node's
    // id and written back to the node.
    template <class Pool>
    void rebuild(std::uint64_t cap, std::uint64_t mul, std::uint64_t salt, Pool& pool) {
        Slot* old = slots_;
        std::uint64_t old_cap = mask_ + 1;
        std::uint64_t old_size = size_;
        alloc_table(cap);  // throws before anything is lost
        bool rekey = mul != mul_ || salt != salt_;
        mul_ = mul;
        salt_ = salt;
        for (std::uint64_t i = 0; i < old_cap; ++i) {
            Slot s = old[i];
            if (s.node == kNil) continue;
            if (rekey) s.fp = pool[s.node].fp = fingerprint(pool[s.node].id);
            std::uint64_t j = home(s.fp);
            while (slots_[j].node != kNil) j = (j + 1) & mask_;
            slots_[j] = s;
        }
        size_ = old_size;
        std::free(old);
    }
    // --8<-- [end:hash_rebuild]
    std::uint64_t displacement(bool max) const {
        std::uint64_t most = 0, total = 0;
        for (std::uint64_t i = 0; i <= mask_; ++i) {
            if (slots_[i].node == kNil) continue;
            std::uint64_t d = (i - home(slots_[i].fp)) & mask_;
            most = std::max(most, d);
            total += d;
        }
        return max ? most : total;
    }
    Slot* slots_ = nullptr;
    std::uint64_t mask_ = 0;
    std::uint64_t size_ = 0;
    std::uint64_t grow_at_ = 0;  // capacity / 2: the size at which ensure_one() grows
    std::uint64_t mul_ = kGolden;  // the multiplier; random once re-keyed
    std::uint64_t salt_ = 0;       // XORed into the folded id; random once re-keyed
    std::uint32_t shift_ = 0;      // 32 - log2(capacity): fingerprint >> shift_ is home
    bool long_run_ = false;        // an insert landed > kLongRun from home
    std::uint64_t rekeyed_at_ = 0;  // the capacity the last re-key was made at
    std::uint64_t rekeys_ = 0;
};

// --8<-- [start:bitset]
// Which levels of the window are non-empty, as a tree of 64-bit words: bit i of
// layer 0 is level i; bit j of layer k+1 says "word j of layer k is non-zero".
// The top layer is a single word, so the highest (or lowest) set bit is found by
// descending the layers with one countl_zero (countr_zero) each: three steps for a
// window of 2^18 levels, however many levels are set.
class LevelBitset {
public:
    static constexpr std::uint64_t npos = ~std::uint64_t(0);

    explicit LevelBitset(std::uint64_t nbits) {
        std::uint64_t n = nbits;
        do {
            n = (n + 63) / 64;  // words in this layer
            layers_.emplace_back(n, 0);
        } while (n > 1);
    }
    bool empty() const { return layers_.back()[0] == 0; }
    bool test(std::uint64_t i) const { return (layers_[0][i >> 6] >> (i & 63)) & 1; }

    void set(std::uint64_t i) {
        for (auto& layer : layers_) {
            std::uint64_t& w = layer[i >> 6];
            bool was_empty = (w == 0);
            w |= std::uint64_t(1) << (i & 63);
            if (!was_empty) return;  // the layers above already know
            i >>= 6;
        }
    }
    void reset(std::uint64_t i) {
        for (auto& layer : layers_) {
            std::uint64_t& w = layer[i >> 6];
            w &= ~(std::uint64_t(1) << (i & 63));
            if (w != 0) return;  // the word still has bits: the layers above stay
            i >>= 6;
        }
    }
    std::uint64_t highest() const {  // precondition: !empty()
        std::uint64_t i = 0;
        for (std::size_t k = layers_.size(); k-- > 0;)
            i = i * 64 + (63 - std::countl_zero(layers_[k][i]));
        return i;
    }
    std::uint64_t lowest() const {  // precondition: !empty()
        std::uint64_t i = 0;
        for (std::size_t k = layers_.size(); k-- > 0;)
            i = i * 64 + std::countr_zero(layers_[k][i]);
        return i;
    }
    // The highest set bit strictly below i, or npos.
    std::uint64_t prev_below(std::uint64_t i) const {
        for (std::size_t k = 0; k < layers_.size(); ++k) {
            std::uint64_t b = i & 63;
            std::uint64_t w = layers_[k][i >> 6] & ((std::uint64_t(1) << b) - 1);
            if (w != 0) {
                std::uint64_t j = (i >> 6) * 64 + (63 - std::countl_zero(w));
                while (k-- > 0) j = j * 64 + (63 - std::countl_zero(layers_[k][j]));
                return j;
            }
            i >>= 6;
        }
        return npos;
    }
    // The lowest set bit strictly above i, or npos.
    std::uint64_t next_above(std::uint64_t i) const {
        for (std::size_t k = 0; k < layers_.size(); ++k) {
            std::uint64_t b = i & 63;
            std::uint64_t w = b == 63 ? 0 : layers_[k][i >> 6] & (~std::uint64_t(0) << (b + 1));
            if (w != 0) {
                std::uint64_t j = (i >> 6) * 64 + std::countr_zero(w);
                while (k-- > 0) j = j * 64 + std::countr_zero(layers_[k][j]);
                return j;
            }
            i >>= 6;
        }
        return npos;
    }
    void clear() {
        for (auto& layer : layers_) std::fill(layer.begin(), layer.end(), 0);
    }

private:
    std::vector<std::vector<std::uint64_t>> layers_;
};
// --8<-- [end:bitset]

// An order id together with its hash fingerprint, which each operation computes once
// (Book::key_of) and hands down to every lookup it makes. The batch loop computes it a
// few operations early, for its prefetch, and passes Keys to add_limit and cancel.
struct Key {
    std::uint64_t id;
    std::uint32_t fp;
};

// The result of depth(): (price, total qty, order count), best first.
struct DepthRow {
    std::uint32_t price;
    std::uint64_t qty;
    std::uint32_t count;
};

// --8<-- [start:basic_book]
// Steps: which of chapter 1's decisions this book is compiled with (see step::).
template <std::uint32_t Steps = step::kAll>
class BasicBook {
    static constexpr bool has(std::uint32_t s) { return (Steps & s) != 0; }
    // --8<-- [end:basic_book]

public:
    static constexpr std::uint32_t kSteps = Steps;
    static constexpr std::uint64_t kDefaultWindow = std::uint64_t(1) << 18;
    static constexpr std::uint32_t kDefaultOrders = std::uint32_t(1) << 16;
    // The most resting orders a book can hold: the id table (at most 2^32 slots, at
    // most half full) holds 2^31 ids.
    static constexpr std::uint32_t kMaxOrders = std::uint32_t(1) << 31;

    // max_orders caps the resting orders (a memory budget): an add that would need one
    // more throws BookFull, before it changes anything.
    explicit BasicBook(std::uint64_t window_levels = kDefaultWindow,
                  std::uint32_t initial_orders = kDefaultOrders,
                  std::uint32_t max_orders = kMaxOrders)
        : window_(check_window(window_levels)),
          bits_{LevelBitset(window_), LevelBitset(window_)},
          pool_(initial_orders, check_max_orders(max_orders)),
          ids_(std::min(initial_orders, max_orders)) {
        // calloc: the OS hands out zero pages lazily, so untouched levels cost nothing.
        levels_ = static_cast<Level*>(std::calloc(window_, sizeof(Level)));
        if (levels_ == nullptr) throw std::bad_alloc();
    }
    ~BasicBook() { std::free(levels_); }
    BasicBook(const BasicBook&) = delete;
    BasicBook& operator=(const BasicBook&) = delete;

    // ---- operations: each returns Reason::Ok or the reject reason (book unchanged)
    // ----

    // --8<-- [start:add_limit]
    template <class Sink>
    Reason add_limit(Key key, Side side, std::int64_t price, std::int64_t qty, Sink&& sink) {
        if (price < 1 || price > kMaxPrice) return Reason::BadPrice;
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        std::uint64_t slot = slot_of(key);  // where the id is, or where it would go
        if (ids_.node_at(slot) != kNil) return Reason::DuplicateId;
        // Everything that can fail (allocate) happens here, before anything changes.
        pool_.ensure_one();
        if (ids_.ensure_one(pool_)) {  // the table was rebuilt: hash, find the place again
            key = key_of(key.id);
            slot = slot_of(key);
        }
        auto p = static_cast<std::uint32_t>(price);
        auto q = static_cast<std::uint32_t>(qty);
        bool cross = crosses(side, p);  // one comparison against the cached best
        if (cross || std::uint64_t(p) - base_ >= window_) [[unlikely]]
            prepare(side, p, q, cross, sink);  // room for fills, a far level: see prepare()
        enter(key, slot, side, p, q, cross, sink);  // cannot fail
        return Reason::Ok;
    }
    // --8<-- [end:add_limit]
    template <class Sink>
    Reason add_limit(std::uint64_t id, Side side, std::int64_t price, std::int64_t qty,
                     Sink&& sink) {
        return add_limit(key_of(id), side, price, qty, sink);
    }

    // The rarer operations (market, reduce, execute, replace) are not inlined: the
    // batch loop, with only add and cancel inlined, stays small enough for the compiler
    // to keep its values in registers, and each rare op pays for a call instead.
    template <class Sink>
    [[gnu::noinline]] Reason add_market(std::uint64_t id, Side side, std::int64_t qty,
                                        std::uint64_t& unfilled, Sink&& sink) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        if (find(key_of(id)) != kNil) return Reason::DuplicateId;
        // The loosest limits a price can cross: any ask is <= kMaxPrice, any bid >= 1.
        std::uint64_t limit = side == Side::Buy ? kMaxPrice : 1;
        auto q = static_cast<std::uint32_t>(qty);
        reserve_fills(sink, side, limit, q);  // may throw, before anything changes
        unfilled = match(id, side, limit, q, sink);
        return Reason::Ok;  // the remainder is cancelled, never rests
    }

    Reason cancel(std::uint64_t id, std::uint64_t& removed) { return cancel(key_of(id), removed); }
    Reason cancel(Key key, std::uint64_t& removed) {
        std::uint64_t slot = slot_of(key);
        std::uint32_t i = ids_.node_at(slot);
        if (i == kNil) return Reason::UnknownId;
        removed = pool_[i].qty;
        remove(i, slot);
        return Reason::Ok;
    }

    // --8<-- [start:reduce]
    [[gnu::noinline]] Reason reduce(std::uint64_t id, std::int64_t qty, std::uint64_t& left) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        std::uint64_t slot = slot_of(key_of(id));
        std::uint32_t i = ids_.node_at(slot);
        if (i == kNil) return Reason::UnknownId;
        if (std::uint64_t(qty) > pool_[i].qty) return Reason::OverReduce;
        left = take(i, slot, static_cast<std::uint32_t>(qty));
        return Reason::Ok;
    }

    [[gnu::noinline]] Reason execute(std::uint64_t id, std::int64_t qty, Fill& fill) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        std::uint64_t slot = slot_of(key_of(id));
        std::uint32_t i = ids_.node_at(slot);
        if (i == kNil) return Reason::UnknownId;
        const Node& n = pool_[i];
        if (std::uint64_t(qty) > n.qty) return Reason::OverReduce;
        fill = Fill{id, 0, n.price, static_cast<std::uint32_t>(qty), opposite(n.side)};
        take(i, slot, static_cast<std::uint32_t>(qty));
        return Reason::Ok;
    }

    // --8<-- [end:reduce]

    // --8<-- [start:replace]
    // old_id leaves; new_id (same side) enters at price/qty with fresh time priority
    // and may match. new_id may equal old_id.
    template <class Sink>
    [[gnu::noinline]] Reason replace(std::uint64_t old_id, std::uint64_t new_id,
                                     std::int64_t price, std::int64_t qty, Sink&& sink) {
        if (price < 1 || price > kMaxPrice) return Reason::BadPrice;
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        ids_.ensure_keyed(pool_);  // a pending re-key, before any fingerprint is taken
        Key old_key = key_of(old_id), new_key = key_of(new_id);
        std::uint64_t slot = slot_of(old_key);
        std::uint32_t i = ids_.node_at(slot);
        if (i == kNil) return Reason::UnknownId;
        if (new_id != old_id && find(new_key) != kNil) return Reason::DuplicateId;
        Side side = pool_[i].side;
        auto p = static_cast<std::uint32_t>(price);
        auto q = static_cast<std::uint32_t>(qty);
        bool cross = crosses(side, p);  // the old order, on the same side, does not matter
        prepare(side, p, q, cross, sink);  // may throw: before the old order leaves
        remove(i, slot);  // frees a node and a hash slot, so enter() below cannot need growth
        // (and may move entries: the new id's place is looked up after it)
        enter(new_key, slot_of(new_key), side, p, q, cross, sink);
        return Reason::Ok;
    }
    // --8<-- [end:replace]

    // ---- queries ----

    std::size_t size() const { return ids_.size(); }  // every resting order has one id entry
    // Best price (0 if none) and its level.
    std::uint32_t best(Side side, std::uint64_t& qty) {
        qty = 0;
        if (best_[idx(side)] == kNoKey) return 0;
        std::uint32_t price = key_price(side, best_[idx(side)]);
        qty = level_of(price, side)->total;
        return price;
    }
    bool order(std::uint64_t id, Side& side, std::uint32_t& price, std::uint32_t& qty) const {
        std::uint32_t i = find(key_of(id));
        if (i == kNil) return false;
        const Node& n = pool_[i];
        side = n.side;
        price = n.price;
        qty = n.qty;
        return true;
    }

    // Levels of one side, best first: the window's levels (walked with the bitset)
    // merged with the far levels of the std::map, which may lie on either side of it.
    // Calls f(price, level) until it returns false.
    template <class F>
    void for_each_level(Side side, F&& f) const {
        const LevelBitset& bits = bits_[idx(side)];
        const auto& far = far_[idx(side)];
        std::uint64_t w = LevelBitset::npos;
        if (!bits.empty()) w = side == Side::Buy ? bits.highest() : bits.lowest();
        // Far levels in best-first order: descending for bids, ascending for asks.
        auto fa = far.begin();
        auto fd = far.rbegin();
        for (;;) {
            bool have_w = w != LevelBitset::npos;
            bool have_f = side == Side::Buy ? fd != far.rend() : fa != far.end();
            if (!have_w && !have_f) return;
            std::uint32_t fp = have_f ? (side == Side::Buy ? fd->first : fa->first) : 0;
            std::uint32_t wp = have_w ? static_cast<std::uint32_t>(base_ + w) : 0;
            if (have_w && (!have_f || (side == Side::Buy ? wp > fp : wp < fp))) {
                if (!f(wp, levels_[w])) return;
                w = side == Side::Buy ? bits.prev_below(w) : bits.next_above(w);
            } else if (side == Side::Buy) {
                if (!f(fp, fd->second)) return;
                ++fd;
            } else {
                if (!f(fp, fa->second)) return;
                ++fa;
            }
        }
    }

    // The result of depth(): up to max_levels rows (price, total qty, order count).
    template <class Out>
    void depth(Side side, std::int64_t max_levels, Out&& out) const {
        if (max_levels <= 0) return;
        std::int64_t emitted = 0;
        for_each_level(side, [&](std::uint32_t price, const Level& l) {
            out(DepthRow{price, l.total, l.count});
            return ++emitted < max_levels;
        });
    }

    // Empty the book, keeping the pool, hash table and window allocated.
    void clear() {
        for (int s = 0; s < 2; ++s) {
            LevelBitset& bits = bits_[s];
            while (!bits.empty()) {
                std::uint64_t i = bits.lowest();
                levels_[i] = Level{};
                bits.reset(i);
            }
            far_[s].clear();
            best_[s] = kNoKey;
        }
        pool_.clear();
        ids_.clear();
        far_adds_ = evicted_ = 0;
    }

    // --8<-- [start:prefetch]
    // The fingerprint of an id, for the hints below (it changes if the table re-keys,
    // and a hint computed before that is only a wasted load).
    std::uint32_t fingerprint(std::uint64_t id) const { return ids_.fingerprint(id); }
    // A batch-only hint: apply() knows the next operations, so it asks the memory
    // system for an id's hash slot several ops ahead (given its fingerprint). It
    // changes nothing; in a big book it turns a cache miss per new id into a hit.
    // (A book compiled without the prefetch step has no prefetch_slot(), and the batch
    // loop, which looks for it, then gives no hints at all.)
    void prefetch_slot(std::uint32_t fp) const
        requires(has(step::kPrefetch))
    {
        ids_.prefetch(fp);
    }
    // The second hint, a few ops later, once that slot is in cache: start loading the
    // node it points to, which a cancel is about to unlink. Only the home slot is
    // looked at, without checking the id: usually it is the id's own order; if not, or
    // if the slot is empty (a new id), the hint loads a node nobody needs, no harm
    // done.
    void prefetch_node(std::uint32_t fp) const {
        std::uint32_t i = ids_.home_node(fp);
        __builtin_prefetch(&pool_[i == kNil ? 0 : i]);  // node 0, not a branch, if empty
    }
    // (An earlier version had a third hint, two ops ahead, for the node's queue
    // neighbours. GCC 12 at -O3 left both of its prefetches out of the batch loop, so
    // it measured nothing; it was removed rather than credited.)
    // --8<-- [end:prefetch]

    // --8<-- [start:for_each_order]
    // Every resting order of one side: levels best first (highest bid, lowest ask), the
    // window's levels merged with the far map's as in depth(), and each level's queue
    // oldest first. Calls f(price, priority, id, qty), priority being the 0-based place
    // in the level's queue. Read-only; the market uses it to write the books CSV.
    template <class F>
    void for_each_order(Side side, F&& f) const {
        const LevelBitset& bits = bits_[idx(side)];
        const auto& far = far_[idx(side)];
        std::uint64_t w = LevelBitset::npos;
        if (!bits.empty()) w = side == Side::Buy ? bits.highest() : bits.lowest();
        auto fa = far.begin();
        auto fd = far.rbegin();
        auto walk = [&](std::uint32_t price, const Level& l) {
            std::uint64_t priority = 0;
            for (std::uint32_t i = l.head; i != kNil; i = pool_[i].next)
                f(price, priority++, pool_[i].id, pool_[i].qty);
        };
        for (;;) {
            bool have_w = w != LevelBitset::npos;
            bool have_f = side == Side::Buy ? fd != far.rend() : fa != far.end();
            if (!have_w && !have_f) return;
            std::uint32_t fp = have_f ? (side == Side::Buy ? fd->first : fa->first) : 0;
            std::uint32_t wp = have_w ? static_cast<std::uint32_t>(base_ + w) : 0;
            if (have_w && (!have_f || (side == Side::Buy ? wp > fp : wp < fp))) {
                walk(wp, levels_[w]);
                w = side == Side::Buy ? bits.prev_below(w) : bits.next_above(w);
            } else if (side == Side::Buy) {
                walk(fp, fd->second);
                ++fd;
            } else {
                walk(fp, fa->second);
                ++fa;
            }
        }
    }
    // --8<-- [end:for_each_order]

    // Changes when the id table re-keys, which changes every fingerprint (batch loop).
    std::uint64_t hash_epoch() const { return ids_.rekeys(); }

    // Internals, for tests and the book's layout table.
    static std::int64_t side_key(Side side, std::uint64_t price) { return price_key(side, price); }
    std::uint64_t window_levels() const { return window_; }
    std::uint64_t window_base() const { return base_; }
    std::uint64_t recentres() const { return recentres_; }
    std::size_t far_levels() const { return far_[0].size() + far_[1].size(); }
    std::uint32_t pool_capacity() const { return pool_.capacity(); }
    std::uint32_t pool_high_water() const { return pool_.high_water(); }
    std::uint64_t hash_capacity() const { return ids_.capacity(); }
    std::uint64_t hash_home(std::uint64_t id) const { return ids_.home(ids_.fingerprint(id)); }
    std::uint64_t hash_rekeys() const { return ids_.rekeys(); }
    bool hash_keyed() const { return ids_.keyed(); }
    std::uint64_t hash_max_displacement() const { return ids_.max_displacement(); }
    std::uint64_t hash_total_displacement() const { return ids_.total_displacement(); }
    std::uint64_t pool_alignment() const { return address_alignment(pool_.data()); }
    std::uint64_t hash_alignment() const { return address_alignment(ids_.data()); }

private:
    static std::uint32_t check_max_orders(std::uint32_t m) {
        if (m == 0 || m > kMaxOrders)
            throw std::invalid_argument("max_orders must be in 1..2^31");
        return m;
    }
    static std::uint64_t check_window(std::uint64_t w) {
        if (w < 64 || w > (std::uint64_t(1) << 26) || !std::has_single_bit(w))
            throw std::invalid_argument("window_levels must be a power of two in 64..2^26");
        return w;
    }
    static int idx(Side s) { return s == Side::Buy ? 0 : 1; }
    Key key_of(std::uint64_t id) const { return Key{id, ids_.fingerprint(id)}; }
    std::uint32_t find(Key key) const {
        return ids_.find<has(step::kFingerprint)>(key.id, key.fp, pool_);
    }
    std::uint64_t slot_of(Key key) const {
        return ids_.slot_of<has(step::kFingerprint)>(key.id, key.fp, pool_);
    }

    // --8<-- [start:window]
    // The level for a price on one side: the window slot if the price is inside the
    // window (an unsigned subtraction: prices below base wrap to huge offsets), else
    // the far map (slow path), or nullptr if there is no such level.
    Level* level_of(std::uint32_t price, Side side) {
        std::uint64_t off = std::uint64_t(price) - base_;
        if (off < window_) [[likely]] return &levels_[off];
        auto& far = far_[idx(side)];
        auto it = far.find(price);
        return it == far.end() ? nullptr : &it->second;
    }

    // Called only when the window holds no orders: centre it on `price`, then move
    // every far level that now falls inside it into the array.
    void recentre(std::uint32_t price) {
        std::uint64_t half = window_ / 2;
        std::uint64_t base = price > half ? price - half : 1;
        constexpr std::uint64_t top = std::uint64_t(1) << 32;  // one past the last price
        if (base + window_ > top) base = window_ >= top ? 1 : top - window_;
        base_ = base;
        ++recentres_;
        for (int s = 0; s < 2; ++s) {
            auto& far = far_[s];
            auto it = far.lower_bound(static_cast<std::uint32_t>(std::min(base, top - 1)));
            while (it != far.end() && it->first - base_ < window_) {
                std::uint64_t off = it->first - base_;
                levels_[off] = it->second;
                bits_[s].set(off);
                it = far.erase(it);
            }
        }
    }
    // --8<-- [end:window]

    // --8<-- [start:best]
    // The best price of each side is cached in best_ (kNoKey when the side is empty):
    // a new order can only improve it, and it is searched for again (bitset descent
    // plus a look at the far map) only when the best level itself empties. So a
    // passive order checks "does it cross?" with one comparison.
    //
    // It is stored as a key where larger is better on both sides (bids: the price,
    // asks: minus the price), so the code has no `if (side == Buy)` branch: sides
    // arrive in random order, and a branch on them is mispredicted half the time.
    static constexpr std::int64_t kNoKey = -(std::int64_t(1) << 40);  // worse than any price
    static std::int64_t price_key(Side side, std::uint64_t price) {
        if constexpr (has(step::kBranchFree)) {
            auto s = static_cast<std::int64_t>(side);            // 0 buy, 1 sell
            return (static_cast<std::int64_t>(price) ^ -s) + s;  // price, or -price for sell
        } else {  // the obvious spelling: the compiler may or may not make it a branch
            return side == Side::Buy ? static_cast<std::int64_t>(price)
                                     : -static_cast<std::int64_t>(price);
        }
    }
    static std::uint32_t key_price(Side side, std::int64_t key) {
        return static_cast<std::uint32_t>(price_key(side, static_cast<std::uint64_t>(key)));
    }
    // Would an aggressor on `side` with this limit trade against the best opposite
    // level? (the opposite side's best is at least as good, from its own side, as the
    // limit)
    bool crosses(Side side, std::uint64_t limit) const {
        Side rest = opposite(side);
        return best_[idx(rest)] >= price_key(rest, limit);
    }
    void improve_best(Side side, std::uint32_t price) {
        best_[idx(side)] = std::max(best_[idx(side)], price_key(side, price));
    }
    // The best key of one side found from scratch, or kNoKey.
    std::int64_t scan_best(Side side) const {
        const LevelBitset& bits = bits_[idx(side)];
        const auto& far = far_[idx(side)];
        std::int64_t k = kNoKey;
        if (!bits.empty()) {
            if constexpr (has(step::kBitset))
                k = price_key(side, base_ + (side == Side::Buy ? bits.highest() : bits.lowest()));
            else
                k = price_key(side, base_ + scan_levels(side));
        }
        if (!far.empty()) [[unlikely]] {
            std::uint32_t fp = side == Side::Buy ? far.rbegin()->first : far.begin()->first;
            k = std::max(k, price_key(side, fp));
        }
        return k;
    }

    // Without the bitset step: walk the level array from the old best (which just
    // emptied) towards worse prices to the first level with orders. Called only when
    // the side has one in the window (the bitset, kept up to date for depth() and
    // window moves, says so in O(1)), and every level left is worse than the old best,
    // so the walk stops; the bounds are checked all the same.
    std::uint64_t scan_levels(Side side) const {
        std::uint64_t off = std::uint64_t(key_price(side, best_[idx(side)])) - base_;
        if (side == Side::Buy) {
            for (std::uint64_t i = std::min(off, window_ - 1) + 1; i-- > 0;)
                if (levels_[i].count != 0) return i;
        } else {
            for (std::uint64_t i = off < window_ ? off : 0; i < window_; ++i)
                if (levels_[i].count != 0) return i;
        }
        return side == Side::Buy ? bits_[0].highest() : bits_[1].lowest();  // unreachable
    }

    // Drop an emptied level: clear its bit, or erase it from the far map.
    void drop_level(std::uint32_t price, Side side) {
        std::uint64_t off = std::uint64_t(price) - base_;
        if (off < window_) {
            bits_[idx(side)].reset(off);
        } else {
            far_[idx(side)].erase(price);
        }
        if (price_key(side, price) == best_[idx(side)]) best_[idx(side)] = scan_best(side);
    }
    // --8<-- [end:best]

    // --8<-- [start:match]
    // Match an aggressor against the opposite side while it crosses `limit`; returns
    // the quantity left. Each trade is at the resting order's price; within a level
    // the oldest order (the FIFO head) trades first. Not inlined: most orders do not
    // cross, and inlining it would bloat the batch loop.
    template <class Sink>
    [[gnu::noinline]] std::uint32_t match(std::uint64_t id, Side side, std::uint64_t limit,
                                          std::uint32_t qty, Sink& sink) {
        Side rest_side = opposite(side);
        while (qty > 0 && crosses(side, limit)) {
            std::uint32_t price = key_price(rest_side, best_[idx(rest_side)]);
            Level* l = level_of(price, rest_side);  // exists: it is the best level
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
                ids_.erase(n.fp, i);
                pool_.release(i);
                --l->count;
                i = next;
            }
            l->head = i;
            if (i != kNil) pool_[i].prev = kNil;
            if (l->count == 0) drop_level(price, rest_side);
        }
        return qty;
    }
    // --8<-- [end:match]

    // --8<-- [start:prepare]
    // Entering an order does everything that can fail first, before anything changes
    // (the strong guarantee: an operation that throws leaves the book as it was). What
    // can fail is allocation: room in the sink for the fills the order can make, and
    // for a price outside the window, a window move it calls for and a map node for
    // its far level. Passive orders inside the window, most of them, need none of it.
    template <class Sink>
    [[gnu::noinline]] void prepare(Side side, std::uint32_t price, std::uint32_t qty, bool cross,
                                   Sink& sink) {
        if (cross) reserve_fills(sink, side, price, qty);
        if (std::uint64_t(price) - base_ >= window_) prepare_outside(price, side);
    }

    // A sink that can say how much room it has and make more (the batch loop's, the
    // per-call API's) is asked for room for every fill first. An aggressor trades each
    // resting order at most once, and at least one unit each time, so it makes at most
    // min(qty, resting orders) fills; only when the sink has less room than that are
    // they counted exactly (levels wholly taken count in O(1) from their totals).
    template <class Sink>
    void reserve_fills(Sink& sink, Side side, std::uint64_t limit, std::uint32_t qty) {
        if constexpr (requires { sink.room(); sink.reserve(std::size_t{}); }) {
            if (sink.room() >= std::min<std::uint64_t>(qty, ids_.size())) [[likely]] return;
            sink.reserve(count_fills(side, limit, qty));
        }
    }
    // How many fills an aggressor would make, without making them.
    std::size_t count_fills(Side side, std::uint64_t limit, std::uint32_t qty) const {
        Side rest = opposite(side);
        std::size_t fills = 0;
        std::uint64_t left = qty;
        for_each_level(rest, [&](std::uint32_t price, const Level& l) {
            if (price_key(rest, price) < price_key(rest, limit)) return false;  // no cross
            if (l.total < left) {  // the whole level trades, and the order goes on
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
        return fills;
    }
    // --8<-- [end:prepare]

    // Match, then rest any remainder at the back of its level's queue. `slot` is where
    // the new id goes in the hash (slot_of(key)), as it was before matching; `cross`
    // whether the order crosses (crosses(side, price)).
    // Precondition: room for one more node and id (ensure_one(), or a remove()), and
    // prepare() done if the order crosses or its price is outside the window: then
    // nothing here allocates, and nothing can fail.
    // Inlined: it is most of add_limit, and a call would cost a register save and
    // restore on every passive order (the common case), which never calls match().
    template <class Sink>
    [[gnu::always_inline]] void enter(Key key, std::uint64_t slot, Side side, std::uint32_t price,
                                      std::uint32_t qty, bool cross, Sink& sink) {
        if (cross) {
            qty = match(key.id, side, price, qty, sink);
            if (qty == 0) return;
            slot = slot_of(key);  // matched orders left the hash, which can move entries
        }
        std::uint64_t off = std::uint64_t(price) - base_;
        Level* l = off < window_ ? &levels_[off] : outside_level(price, side);
        std::uint32_t i = pool_.alloc();
        Node& n = pool_[i];  // set field by field: the padding need not be written
        n.id = key.id;
        n.qty = qty;
        n.price = price;
        n.next = kNil;
        n.fp = key.fp;
        n.side = side;
        if (l->count != 0) [[likely]] {  // join the back of a level's queue
            n.prev = l->tail;
            pool_[l->tail].next = i;
            l->tail = i;
            l->total += qty;
            ++l->count;
        } else {  // a new level: only a new level can improve the side's best price
            n.prev = kNil;
            *l = Level{qty, i, i, 1, 0};
            off = std::uint64_t(price) - base_;  // recomputed: the window may have moved
            if (off < window_) bits_[idx(side)].set(off);
            improve_best(side, price);
        }
        ids_.insert_at(slot, key.fp, i);
    }

    // --8<-- [start:outside_level]
    // A new order whose price lies outside the window takes the slow path. If the
    // window holds no orders, it re-centres on the order. If it holds orders but
    // neither side's best price (the touch) is among them, the market has moved away
    // and left them behind: the window's levels go to the far map and the window
    // re-centres on the touch, so the orders arriving near it are fast again. Otherwise
    // (the touch is in the window, this price is not) the order goes to the far map.
    //
    // Moving m levels costs m map operations, so a move must be paid for first: by as
    // many orders sent to the far map since the last one moved levels. A stream whose
    // touch jumps back and forth then costs a bounded amount per order, not a whole
    // window's worth each time.
    //
    // The part that allocates runs in prepare(), before the order matches: the move of
    // the window's levels to the far map, and a spare map node for a new far level.
    void prepare_outside(std::uint32_t price, Side side) {
        bool empty = bits_[0].empty() && bits_[1].empty();
        if (!empty && far_adds_ >= evicted_ && !touch_in_window()) {
            evicted_ = evict_window();  // may throw (allocation) before changing anything
            far_adds_ = 0;
            recentre(touch_price(side, price));
            if (std::uint64_t(price) - base_ < window_) return;
        }
        if (spare_.empty()) [[unlikely]] {  // kept until a new far level takes it
            alloc_checkpoint();
            std::map<std::uint32_t, Level> one;
            one.emplace(0, Level{});
            spare_ = one.extract(one.begin());
        }
    }
    // After matching: the level for the order, which cannot fail (no allocation).
    [[gnu::noinline]] Level* outside_level(std::uint32_t price, Side side) {
        if (bits_[0].empty() && bits_[1].empty()) {  // the window holds no orders: move it
            recentre(price);
            return &levels_[std::uint64_t(price) - base_];
        }
        ++far_adds_;
        auto& far = far_[idx(side)];
        auto it = far.lower_bound(price);
        if (it != far.end() && it->first == price) return &it->second;
        spare_.key() = price;  // a new far level, in the node prepare() made
        spare_.mapped() = Level{};
        return &far.insert(it, std::move(spare_))->second;
    }

    bool touch_in_window() const {
        for (int s = 0; s < 2; ++s) {
            if (best_[s] == kNoKey) continue;
            std::uint64_t off = std::uint64_t(key_price(Side(s), best_[s])) - base_;
            if (off < window_) return true;
        }
        return false;
    }
    // Where to centre the window: the best price of the new order's side, else of the
    // other side, else the order's own price. (One side's touch, not the middle of the
    // two: with a spread wider than the window, the middle would hold neither.)
    std::uint32_t touch_price(Side side, std::uint32_t price) const {
        for (Side s : {side, opposite(side)})
            if (best_[idx(s)] != kNoKey) return key_price(s, best_[idx(s)]);
        return price;
    }
    // Move every level of the window into the far maps; returns how many. The map nodes
    // are allocated in a scratch map first: if that throws, the book is unchanged; the
    // splice after it (std::map::merge relinks nodes) cannot fail.
    std::uint64_t evict_window() {
        std::map<std::uint32_t, Level> moved[2];
        for (int s = 0; s < 2; ++s) {
            const LevelBitset& bits = bits_[s];
            for (std::uint64_t i = bits.empty() ? LevelBitset::npos : bits.lowest();
                 i != LevelBitset::npos; i = bits.next_above(i)) {
                alloc_checkpoint();
                moved[s].emplace(static_cast<std::uint32_t>(base_ + i), levels_[i]);
            }
        }
        std::uint64_t count = moved[0].size() + moved[1].size();
        for (int s = 0; s < 2; ++s) {
            for (const auto& [price, level] : moved[s]) {
                std::uint64_t off = price - base_;
                levels_[off] = Level{};
                bits_[s].reset(off);
            }
            far_[s].merge(moved[s]);  // no key is in both: a price lives in one place
        }
        return count;
    }
    // --8<-- [end:outside_level]

    // Take qty (1..its qty) off a resting order: it keeps its place unless it reaches
    // zero and leaves. Returns the quantity left.
    std::uint32_t take(std::uint32_t i, std::uint64_t slot, std::uint32_t qty) {
        Node& n = pool_[i];
        std::uint32_t left = n.qty - qty;
        if (left == 0) {
            remove(i, slot);
        } else {
            n.qty = left;
            level_of(n.price, n.side)->total -= qty;
        }
        return left;
    }

    // --8<-- [start:remove]
    // Unlink a resting order (node i, whose id is in hash slot `slot`) from its level's
    // FIFO and forget it.
    [[gnu::always_inline]] void remove(std::uint32_t i, std::uint64_t slot) {
        Node& n = pool_[i];
        Level* l = level_of(n.price, n.side);
        // Which link points at n: the previous node's `next`, or the level's head when
        // n is the oldest (likewise `prev` / tail). Written as a choice of address and
        // then one store, which a compiler may turn into a conditional move instead of
        // a branch (whether a cancelled order is first or last in its queue is random);
        // whether it does is the compiler's call: chapter 1 shows this build's machine
        // code for it, and its branch-free step measures the difference.
        if constexpr (has(step::kBranchFree)) {
            std::uint32_t& into_prev = n.prev != kNil ? pool_[n.prev].next : l->head;
            std::uint32_t& into_next = n.next != kNil ? pool_[n.next].prev : l->tail;
            into_prev = n.next;
            into_next = n.prev;
        } else {  // two stores to different places: a branch each
            if (n.prev != kNil) pool_[n.prev].next = n.next;
            else l->head = n.next;
            if (n.next != kNil) pool_[n.next].prev = n.prev;
            else l->tail = n.prev;
        }
        l->total -= n.qty;
        if (--l->count == 0) drop_level(n.price, n.side);
        ids_.erase_at(slot);  // the slot the caller's lookup found: no second probe
        pool_.release(i);
    }
    // --8<-- [end:remove]

    std::uint64_t window_;
    std::uint64_t base_ = 0;  // price of levels_[0]; 0 until the first order arrives
    Level* levels_ = nullptr;
    LevelBitset bits_[2];     // [0] bids, [1] asks
    std::map<std::uint32_t, Level> far_[2];  // levels outside the window (slow path)
    BasicNodePool<has(step::kWarmReuse)> pool_;
    IdHash ids_;
    std::int64_t best_[2] = {kNoKey, kNoKey};  // best bid, best ask as keys (see crosses())
    std::uint64_t recentres_ = 0;
    std::uint64_t far_adds_ = 0;  // orders sent to the far map since the last eviction
    std::uint64_t evicted_ = 0;   // levels that eviction moved (the next one waits as long)
    std::map<std::uint32_t, Level>::node_type spare_;  // a map node for the next far level
};

// The book the project uses: every decision of chapter 1's steps.
using Book = BasicBook<>;

}  // namespace twinmatch
