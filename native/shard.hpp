// Sharding by symbol: one decoder thread (the writer) feeding N book workers, each owning
// a Market (native/market.hpp) for its share of the stock locates. The optimized twin of
// naive/shard.py (multiprocessing workers joined by queues). Chapter 10 teaches it.
//
// Two ways to hand the decoded events over, both lock-free:
//   broadcast  one ring that every worker reads (one writer, N readers, in the style of
//              the LMAX disruptor): every worker sees every event and keeps the ones of
//              its locates; an order reference (E C X D U name no symbol that can be
//              trusted) is kept by the worker whose market holds the order.
//   routed     one SPSC ring (native/ring.hpp) per worker: the writer hashes the locate
//              and pushes each event to one ring only; for E C X D U it first looks the
//              reference up in its own reference -> locate map.
// Both give the books, fills and counts of one Market fed the whole stream, for any
// number of workers. References are unique across all symbols, so an add (or a U's new
// reference) naming one that is live on another worker's symbol is one Market's
// duplicate, which no worker can see alone: in both designs the writer keeps a
// reference -> locate map, and when it says "maybe live over there" (never, on a feed
// that keeps ITCH's rule) the writer waits for that worker to catch up, looks, and marks
// the event as a duplicate for its worker to count. `conflicts` counts those looks.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dtypes.hpp"
#include "itch.hpp"
#include "market.hpp"
#include "pipeline.hpp"  // Backoff, WaitKind, usable_cpus
#include "ring.hpp"

namespace twinmatch {

inline constexpr std::size_t kMaxShardWorkers = 64;  // contract/shard.py says the same

// --8<-- [start:owner]
// Which worker owns a locate: Fibonacci hashing (multiply by 2^16 / golden ratio, keep
// 16 bits) spreads neighbouring locates, then a multiply-shift maps 0..65535 onto
// 0..n-1 without a division. contract/shard.py has the same formula for the naive twin.
inline std::size_t shard_owner(std::uint16_t locate, std::size_t n) {
    const std::uint32_t h = (std::uint32_t{locate} * 40503u) & 0xFFFFu;
    return (std::size_t{h} * n) >> 16;
}
// --8<-- [end:owner]

// --8<-- [start:broadcast_ring]
// One writer, N readers; every reader sees every item, in order. The writer publishes
// item k by writing slot k & mask and then storing published_ = k + 1 (release); reader
// r reads up to published_ (acquire) and then stores its own sequence (release): "I have
// finished with every slot below this". Backpressure: the writer may reuse slot k & mask
// only once every reader's sequence has passed k - capacity, so it tracks the slowest
// reader; without that check a fast writer laps a slow reader and the reader silently
// reads items of the next lap (chapter 10's exercise makes that test fail, then pass).
template <class T>
class BroadcastRing {
    static_assert(std::is_trivially_copyable_v<T>, "items are copied with plain stores");

public:
    BroadcastRing(std::size_t capacity, std::size_t readers)
        : mask_(checked_ring_capacity(capacity, "capacity") - 1), n_(readers),
          readers_(std::make_unique<Reader[]>(readers)), slots_(allocate(capacity)) {
        if (readers == 0 || readers > kMaxShardWorkers)
            throw std::invalid_argument("readers must be 1..64");
        if (reinterpret_cast<std::uintptr_t>(slots_.get()) % kCacheLine != 0)
            throw std::logic_error("broadcast ring slots not line aligned");  // never: new aligns
    }

    std::size_t capacity() const { return mask_ + 1; }
    std::size_t readers() const { return n_; }

    // Writer only. False when the slowest reader is a whole ring behind.
    bool try_publish(const T& item) {
        const std::uint64_t seq = next_;
        if (seq - min_cache_ > mask_) {  // looks full: find the slowest reader now
            min_cache_ = slowest();
            if (seq - min_cache_ > mask_) return false;
        }
        slots_[seq & mask_] = item;
        next_ = seq + 1;
        published_.store(seq + 1, std::memory_order_release);  // the item, then the sequence
        return true;
    }

    // Reader r only. False when r has read everything published.
    bool try_read(std::size_t r, T& item) {
        Reader& me = readers_[r];
        const std::uint64_t seq = me.seq.load(std::memory_order_relaxed);  // ours
        if (seq == me.published_cache) {
            me.published_cache = published_.load(std::memory_order_acquire);
            if (seq == me.published_cache) return false;
        }
        item = slots_[seq & mask_];
        // release: our read of the slot happens before the writer may overwrite it.
        me.seq.store(seq + 1, std::memory_order_release);
        return true;
    }

    const void* slots_address() const { return slots_.get(); }  // tests check alignment

    std::uint64_t read_count(std::size_t r) const {  // items reader r has finished with
        return readers_[r].seq.load(std::memory_order_acquire);
    }
    // --8<-- [end:broadcast_ring]
    // --8<-- [start:broadcast_slots]

private:
    std::uint64_t slowest() const {
        std::uint64_t low = next_;
        for (std::size_t r = 0; r < n_; ++r)
            low = std::min(low, readers_[r].seq.load(std::memory_order_acquire));
        return low;
    }
    // Each reader's sequence on its own cache line, beside the reader's private copy of
    // published_: a reader's store never takes a line away from another reader.
    struct alignas(kCacheLine) Reader {
        std::atomic<std::uint64_t> seq{0};  // written by this reader only
        std::uint64_t published_cache = 0;  // this reader's copy of published_
    };
    static_assert(sizeof(Reader) == kCacheLine, "one reader per line");

    alignas(kCacheLine) std::atomic<std::uint64_t> published_{0};  // set by the writer
    alignas(kCacheLine) std::uint64_t next_ = 0;  // writer's private copies
    std::uint64_t min_cache_ = 0;                 // writer's copy of the slowest seq
    alignas(kCacheLine) const std::uint64_t mask_;
    const std::size_t n_;
    std::unique_ptr<Reader[]> readers_;
    // The slots start on a cache line (operator new with an alignment, as SpscRing's):
    // a std::vector's started 16 bytes into one, so each 64-byte slot spanned two lines
    // and the writer filling slot k shared a line with readers still reading slot k-1.
    struct AlignedDelete {
        void operator()(T* p) const {
            ::operator delete[](p, std::align_val_t{kCacheLine});
        }
    };
    static T* allocate(std::size_t n) {
        void* raw = ::operator new[](n * sizeof(T), std::align_val_t{kCacheLine});
        T* p = static_cast<T*>(raw);
        // Zeroed; T is trivially copyable, so there is nothing to destroy.
        std::uninitialized_value_construct_n(p, n);
        return p;
    }
    std::unique_ptr<T[], AlignedDelete> slots_;
};
// --8<-- [end:broadcast_slots]

enum class ShardDesign : std::uint8_t { Broadcast = 0, Routed = 1 };

struct ShardConfig {
    Mode mode = Mode::Book;
    ShardDesign design = ShardDesign::Broadcast;
    std::size_t workers = 1;
    std::size_t capacity = 4096;
    WaitKind wait = WaitKind::Auto;
    bool writer_only = false;  // decode (and route) only: the writer's ceiling, no workers
};

// One ring slot: the event, its place in the stream (fills carry it as op_index) and,
// for an add or U the writer found to be a duplicate, the worker that counts it.
struct ShardSlot {
    ItchEvent ev;
    std::uint64_t seq : 56;  // 2^56 events: more than any buffer holds
    std::uint64_t dup : 8;   // 0: apply it; w + 1: worker w counts a duplicate
};
static_assert(sizeof(ShardSlot) == 64, "one event per cache line");

struct ShardWorkerStats {
    std::uint64_t received = 0;  // events this worker read off its ring
    std::uint64_t applied = 0;   // events it applied to its market
    std::uint64_t foreign = 0;   // broadcast: applied by reference, another worker's locate
    std::uint64_t waits = 0;     // times it found its ring empty
    std::uint64_t dups = 0;      // duplicates the writer found, counted here (not applied)
    std::uint64_t dup_mismatch = 0;  // of those, U's under a locate not their order's
    std::array<std::uint64_t, 256> foreign_by_type{};
    std::array<std::uint64_t, 256> dup_by_type{};
};

struct ShardWriterStats {
    std::uint64_t records = 0, events = 0, consumed = 0;
    std::uint64_t stalls = 0;     // times a ring was full (the writer waited)
    std::uint64_t conflicts = 0;  // events the writer had to ask a worker about
    std::uint64_t map_peak = 0;   // the most references the map held
    std::vector<std::uint64_t> routed;  // events handed to each worker
    itch::Error error = itch::Error::Ok;
    std::uint8_t error_type = 0;
    std::uint16_t error_length = 0;
    std::uint64_t seconds_ns = 0;
};

class Shard {
public:
    explicit Shard(const ShardConfig& cfg) : cfg_(cfg) {
        if (cfg.workers == 0 || cfg.workers > kMaxShardWorkers)
            throw std::invalid_argument("workers must be 1..64, got " + std::to_string(cfg.workers));
        checked_ring_capacity(cfg.capacity, "capacity");
        if (cfg.writer_only) return;
        for (std::size_t w = 0; w < cfg.workers; ++w)
            workers_.push_back(std::make_unique<Worker>(cfg.mode));
        if (cfg.design == ShardDesign::Broadcast) {
            broadcast_ = std::make_unique<BroadcastRing<ShardSlot>>(cfg.capacity, cfg.workers);
        } else {
            for (std::size_t w = 0; w < cfg.workers; ++w)
                routes_.push_back(std::make_unique<SpscRing<ShardSlot>>(cfg.capacity, "capacity"));
        }
    }
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;

    void run(const std::uint8_t* buf, std::size_t n);

    std::size_t workers() const { return cfg_.workers; }
    std::size_t built() const { return workers_.size(); }  // 0 when writer_only
    const ShardWriterStats& writer() const { return ws_; }
    const ShardWorkerStats& worker_stats(std::size_t w) const { return workers_.at(w)->st; }
    const Market& market(std::size_t w) const { return workers_.at(w)->market; }
    WaitKind wait_kind() const { return wait_; }
    const std::vector<int>& cpus() const { return cpus_; }

    // The workers' fills in stream order (each worker's are in order already: a k-way merge).
    std::vector<FillRecord> merged_fills() const {
        std::vector<FillRecord> out;
        std::size_t total = 0;
        for (const auto& w : workers_) total += w->fills.size();
        out.reserve(total);
        std::vector<std::size_t> at(workers_.size(), 0);
        for (;;) {
            std::size_t best = workers_.size();
            std::uint64_t key = ~std::uint64_t{0};
            for (std::size_t w = 0; w < workers_.size(); ++w)
                if (at[w] < workers_[w]->fills.size() && workers_[w]->fill_seq[at[w]] < key) {
                    key = workers_[w]->fill_seq[at[w]];
                    best = w;
                }
            if (best == workers_.size()) return out;
            out.push_back(workers_[best]->fills[at[best]++]);
        }
    }

    // The workers' counts added up, then (broadcast) the double count taken out: an event
    // kept by reference by a worker that does not own its locate was also applied, as an
    // unknown reference, by the owner of its locate (see keep() below).
    MarketCounts merged_counts() const {
        MarketCounts c;
        for (const auto& w : workers_) {
            const MarketCounts& m = w->market.counts();
            for (std::size_t t = 0; t < 256; ++t)
                c.events[t] += m.events[t] - w->st.foreign_by_type[t] + w->st.dup_by_type[t];
            for (std::size_t k = 0; k < kAnomalyKinds; ++k) c.anomalies[k] += m.anomalies[k];
            for (std::size_t k = 0; k < c.rejects.size(); ++k) c.rejects[k] += m.rejects[k];
            c.fills += m.fills;
            c.volume += m.volume;
            c.anomalies[static_cast<std::size_t>(Anomaly::LocateMismatch)] += w->st.dup_mismatch;
            if (cfg_.mode == Mode::Book) {
                c.anomalies[static_cast<std::size_t>(Anomaly::UnknownRef)] -= w->st.foreign;
                c.anomalies[static_cast<std::size_t>(Anomaly::DuplicateRef)] += w->st.dups;
            } else {
                c.rejects[static_cast<std::size_t>(Reason::UnknownId)] -= w->st.foreign;
                c.rejects[static_cast<std::size_t>(Reason::DuplicateId)] += w->st.dups;
            }
        }
        return c;
    }

private:
    struct Worker {
        explicit Worker(Mode mode) : market(mode) { fills.reserve(1 << 12); }
        Market market;
        std::vector<FillRecord> fills;
        std::vector<std::uint64_t> fill_seq;  // the stream position of each fill's event
        ShardWorkerStats st;
        // Events this worker has finished with (release, after each): when the writer
        // sees it reach what it has sent (acquire), the market is idle and up to date,
        // and the writer may read it.
        alignas(kCacheLine) std::atomic<std::uint64_t> processed{0};
    };

    // E C X D U (book mode) and X D U (match mode) that get as far as looking their
    // reference up: Market checks a U's price and a non-D's shares first, and those
    // rejects depend on nothing but the event, so they stay with the locate's owner.
    bool by_reference(const ItchEvent& e) const {
        switch (e.type) {
            case 'E': case 'C':
                if (cfg_.mode == Mode::Match) return false;  // an engine only counts them
                [[fallthrough]];
            case 'X': case 'U': return e.shares != 0 && !(e.type == 'U' && e.price == 0);
            case 'D': return true;
            default: return false;
        }
    }

    // --8<-- [start:apply]
    void apply(Worker& w, const ShardSlot& s) {
        const std::size_t before = w.fills.size();
        w.market.run(&s.ev, 1, w.fills);  // op_index 0: set below
        for (std::size_t i = before; i < w.fills.size(); ++i) {
            // The event's index in the stream, low 32 bits, as Market's.
            w.fills[i].op_index = static_cast<std::uint32_t>(s.seq);
            w.fill_seq.push_back(s.seq);
        }
        ++w.st.applied;
    }
    // --8<-- [end:apply]

    // --8<-- [start:duplicate]
    // An add or U that the writer found to name a reference live on another worker:
    // count what one Market counts (the event, a U's locate_mismatch, the duplicate)
    // and leave the book as it is.
    void duplicate(Worker& w, const ShardSlot& s) {
        const ItchEvent& e = s.ev;
        ++w.st.dup_by_type[e.type];
        ++w.st.dups;
        std::uint16_t loc;
        Side side;
        std::uint32_t price, shares;
        if (e.type == 'U' && w.market.order(e.order_ref, loc, side, price, shares) &&
            loc != e.locate)
            ++w.st.dup_mismatch;
        ++w.st.applied;
    }
    // --8<-- [end:duplicate]

    // --8<-- [start:keep]
    // Broadcast: does worker `me` keep this event? Its locate's owner keeps it, except
    // an event by reference, which the worker whose market holds the order keeps. If no
    // market holds it, the locate's owner applies it and its market counts the unknown
    // reference, as one Market would. If another worker holds it (the message's locate
    // disagrees with the order's: Market's locate_mismatch), both apply it; the holder
    // counts it as `foreign` and merged_counts() takes the owner's unknown back out.
    void keep(std::size_t me, Worker& w, const ShardSlot& s) {
        const ItchEvent& e = s.ev;
        if (s.dup != 0) {  // a duplicate: one worker counts it, none keeps it
            if (s.dup == me + 1) duplicate(w, s);
            return;
        }
        const bool mine = shard_owner(e.locate, cfg_.workers) == me;
        std::uint16_t loc;
        Side side;
        std::uint32_t price, shares;
        if (by_reference(e)) {
            if (w.market.order(e.order_ref, loc, side, price, shares)) {
                if (!mine) {
                    ++w.st.foreign;
                    ++w.st.foreign_by_type[e.type];
                }
                apply(w, s);
            } else if (mine) {
                apply(w, s);
            }
            return;
        }
        if (mine) apply(w, s);
    }
    // --8<-- [end:keep]

    // --8<-- [start:route]
    // The worker for an event, and whether it is a duplicate that worker only counts.
    // E C X D U carry a locate, but the order's own locate is what Market goes by, so
    // the writer keeps a reference -> locate map. Invariant: every live reference is
    // in it, under a locate its order's worker owns. Stale entries (an order executed
    // away, a U's old reference the worker may still refuse) are harmless: they send
    // an unknown reference where it is counted as unknown, or cost a "no" answer.
    std::size_t route(const ItchEvent& e, bool& dup) {
        const std::size_t home = shard_owner(e.locate, cfg_.workers);
        dup = false;
        if (e.type == 'A' || e.type == 'F') {
            // Refused for its own fields (bad side, no shares, book mode's price 0):
            // no reference is looked up. Match mode's price 0 is a market order.
            if ((e.side != 'B' && e.side != 'S') || e.shares == 0 ||
                (e.price == 0 && cfg_.mode == Mode::Book))
                return home;
            const std::uint32_t had = refs_->find(e.order_ref);
            if (had != RefMap::kAbsent && owner_of(had) != home) {
                ++ws_.conflicts;
                if (live(owner_of(had), e.order_ref)) {
                    dup = true;  // live on another worker's symbol
                    return home;
                }
            }
            if (e.price != 0) put(e.order_ref, e.locate);  // a market order never rests
            return home;
        }
        if (!by_reference(e)) return home;
        const std::uint32_t had = refs_->find(e.order_ref);
        if (had == RefMap::kAbsent) return home;  // unknown: its locate's owner counts it
        const std::size_t holder = owner_of(had);
        if (e.type == 'D') {
            refs_->erase(e.order_ref);  // gone now, wherever it was
        } else if (e.type == 'U' && e.new_order_ref != e.order_ref) {
            const std::uint32_t other = refs_->find(e.new_order_ref);
            if (other != RefMap::kAbsent && owner_of(other) != holder) {
                ++ws_.conflicts;
                if (!live(holder, e.order_ref)) return holder;  // unknown: no change
                if (live(owner_of(other), e.new_order_ref)) {
                    dup = true;  // the new reference is live on another worker
                    return holder;
                }
            }
            put(e.new_order_ref, had);  // the old one stays: the U may still be refused
        }
        return holder;
    }
    // --8<-- [end:route]
    std::size_t owner_of(std::uint32_t locate) const {
        return shard_owner(static_cast<std::uint16_t>(locate), cfg_.workers);
    }
    void put(std::uint64_t ref, std::uint32_t locate) {
        if (std::uint32_t* v = refs_->value_of(ref)) {
            *v = locate;
            return;
        }
        refs_->reserve_one();
        refs_->insert(ref, locate);
        ws_.map_peak = std::max<std::uint64_t>(ws_.map_peak, refs_->size());
    }
    // --8<-- [start:live]
    // Is `ref` live on worker w, after every event sent before this one? Wait until w
    // has finished with all of them (its market is then idle: w waits for the next
    // event, which the writer publishes only after this look), then ask its market. A
    // worker that failed stops the wait (abort_); the run then ends with its error.
    bool live(std::size_t w, std::uint64_t ref) {
        if (cfg_.writer_only) return false;  // no workers: the writer's ceiling only
        Worker& wk = *workers_[w];
        const std::uint64_t sent =
            cfg_.design == ShardDesign::Broadcast ? now_ : ws_.routed[w];
        Backoff backoff(wait_, /*may_sleep=*/true);
        while (wk.processed.load(std::memory_order_acquire) < sent) {
            if (abort_.load(std::memory_order_relaxed)) return false;
            backoff.wait();
        }
        std::uint16_t loc;
        Side side;
        std::uint32_t price, shares;
        return wk.market.order(ref, loc, side, price, shares);
    }
    // --8<-- [end:live]

    // The next event of the buffer (false at the end, an error or a partial record).
    bool next_event(const std::uint8_t* buf, std::size_t n, std::size_t& off, ItchEvent& ev,
                    bool& has_event) {
        if (n - off < 2) {
            if (off < n) ws_.error = itch::Error::TruncatedPrefix;
            return false;
        }
        const std::size_t record = std::min<std::size_t>(n - off, 2 + itch::be16(buf + off));
        const itch::ScanResult r = itch::decode_one(buf + off, record, &ev, by_type_.data());
        if (r.error != itch::Error::Ok) {
            ws_.error = r.error;
            ws_.error_type = r.error_type;
            ws_.error_length = r.error_length;
            return false;
        }
        if (r.consumed == 0) {
            ws_.error = itch::Error::TruncatedBody;
            return false;
        }
        off += r.consumed;
        ws_.consumed = off;
        ++ws_.records;
        has_event = r.events != 0;
        return true;
    }

    // --8<-- [start:writer]
    void writer_loop(const std::uint8_t* buf, std::size_t n) {
        Backoff backoff(wait_, /*may_sleep=*/true);  // a full ring: the writer is ahead
        std::size_t off = 0;
        ShardSlot s{};
        bool has_event = false;
        while (next_event(buf, n, off, s.ev, has_event)) {
            if (!has_event) continue;
            now_ = ws_.events;
            s.seq = ws_.events++;
            bool dup = false;
            if (cfg_.design == ShardDesign::Routed) {
                const std::size_t w = route(s.ev, dup);
                s.dup = dup ? w + 1 : 0;
                ++ws_.routed[w];
                if (cfg_.writer_only || routes_[w]->try_push(s)) continue;
                ++ws_.stalls;
                backoff.reset();
                while (!routes_[w]->try_push(s)) {
                    if (abort_.load(std::memory_order_relaxed)) return;
                    backoff.wait();
                }
                continue;
            }
            // Broadcast: only A F U D can change the map or be a duplicate.
            const std::uint8_t t = s.ev.type;
            std::size_t w = 0;
            if (t == 'A' || t == 'F' || t == 'U' || t == 'D') w = route(s.ev, dup);
            s.dup = dup ? w + 1 : 0;
            if (cfg_.writer_only) continue;
            if (broadcast_->try_publish(s)) continue;
            ++ws_.stalls;  // the slowest reader is a whole ring behind: wait for it
            backoff.reset();
            while (!broadcast_->try_publish(s)) {
                if (abort_.load(std::memory_order_relaxed)) return;
                backoff.wait();
            }
        }
    }
    // --8<-- [end:writer]

    template <class Pop, class Use>
    void worker_loop(Worker& w, Pop&& pop, Use&& use) {
        Backoff backoff(wait_, /*may_sleep=*/true);
        ShardSlot s;
        for (;;) {
            if (pop(s)) {
                ++w.st.received;
                use(s);
                w.processed.store(w.st.received, std::memory_order_release);
                backoff.reset();
                continue;
            }
            // Empty. Done only when the writer has finished and a last look finds nothing:
            // the acquire pairs with the writer's release of done_.
            if (done_.load(std::memory_order_acquire)) {
                if (pop(s)) {
                    ++w.st.received;
                    use(s);
                    w.processed.store(w.st.received, std::memory_order_release);
                    continue;
                }
                return;
            }
            if (abort_.load(std::memory_order_relaxed)) return;
            ++w.st.waits;
            backoff.wait();
        }
    }

    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (...) {
            {
                std::lock_guard<std::mutex> lock(error_mu_);
                if (!error_) error_ = std::current_exception();
            }
            abort_.store(true, std::memory_order_relaxed);
        }
    }

    ShardConfig cfg_;
    WaitKind wait_ = WaitKind::Yield;
    std::vector<int> cpus_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::unique_ptr<BroadcastRing<ShardSlot>> broadcast_;
    std::vector<std::unique_ptr<SpscRing<ShardSlot>>> routes_;
    GrowthBudget map_budget_;
    std::unique_ptr<RefMap> refs_;  // reference -> locate (the writer's)
    std::uint64_t now_ = 0;         // the writer: events published before this one
    alignas(kCacheLine) ShardWriterStats ws_;
    std::array<std::uint64_t, 256> by_type_{};
    alignas(kCacheLine) std::atomic<bool> done_{false};
    alignas(kCacheLine) std::atomic<bool> abort_{false};
    std::mutex error_mu_;
    std::exception_ptr error_;
    bool ran_ = false;

public:
    const std::array<std::uint64_t, 256>& by_type() const { return by_type_; }
};

// --8<-- [start:run]
inline void Shard::run(const std::uint8_t* buf, std::size_t n) {
    if (ran_) throw std::logic_error("a Shard runs once");
    ran_ = true;
    cpus_ = usable_cpus();
    // Spin only if every thread (writer + workers) can have a CPU of its own with one
    // left over for everything else (the caller, the OS); otherwise a spinning thread
    // would burn the time slice of the very thread it waits for.
    const std::size_t threads = cfg_.writer_only ? 1 : cfg_.workers + 1;
    wait_ = cfg_.wait;
    if (wait_ == WaitKind::Auto) wait_ = threads < cpus_.size() ? WaitKind::Spin : WaitKind::Yield;
    ws_.routed.assign(cfg_.workers, 0);
    refs_ = std::make_unique<RefMap>(&map_budget_);  // both designs (see route())
    const auto t0 = steady_ns();
    {
        std::vector<std::jthread> threads_;  // joined on every path out of this block
        try {
            for (std::size_t i = 0; i < workers_.size(); ++i) {
                Worker& w = *workers_[i];
                if (cfg_.design == ShardDesign::Broadcast)
                    threads_.emplace_back([this, i, &w] {
                        guarded([&] {
                            worker_loop(w, [&](ShardSlot& s) { return broadcast_->try_read(i, s); },
                                        [&](const ShardSlot& s) { keep(i, w, s); });
                        });
                    });
                else
                    threads_.emplace_back([this, i, &w] {
                        guarded([&] {
                            worker_loop(w, [&](ShardSlot& s) { return routes_[i]->try_pop(s); },
                                        [&](const ShardSlot& s) {
                                            if (s.dup != 0) duplicate(w, s);
                                            else apply(w, s);
                                        });
                        });
                    });
            }
        } catch (...) {
            abort_.store(true, std::memory_order_relaxed);
            throw;
        }
        // The writer is this thread (the caller released the GIL).
        guarded([&] { writer_loop(buf, n); });
        done_.store(true, std::memory_order_release);  // everything published before it
    }
    ws_.seconds_ns = steady_ns() - t0;
    if (error_) std::rethrow_exception(error_);
}
// --8<-- [end:run]

}  // namespace twinmatch
