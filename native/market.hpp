// Many books: one twinmatch::Book per stock locate, driven by decoded ITCH events.
//
// The naive twin is naive/market.py; every decision below is written there first, in
// plain Python, and both twins must count every message, fill, anomaly and reject alike.
//
// Two modes:
//   * book  (a feed handler): rebuild NASDAQ's books from A F E C X D U, never matching.
//     Something the feed should never say (an unknown reference, an over-execution, an
//     add that would cross the book) is counted as an anomaly and changes nothing.
//   * match (a matching engine): A/F are incoming limit orders that match when they
//     cross (price 0: a market order), X reduces, D cancels, U replaces (and may match);
//     E/C/P/Q are the exchange's own executions and are only counted.
//
// Order references are unique for the whole day, across symbols, so one global map
// (RefMap) says which book holds each live reference. Every ITCH message carries a stock
// locate too; when the map and the message disagree, the map wins and the message counts
// as a `locate_mismatch` anomaly.
//
// Memory grows with live orders, never with the price range or the number of symbols:
// a symbol's book is created at its first order, with a small price window (calloc'd,
// so untouched pages cost nothing) and a small pool; far prices use the Book's std::map.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "book.hpp"
#include "dtypes.hpp"

namespace twinmatch {

// --8<-- [start:anomalies]
// Anomaly kinds (book mode); the numbers are ANOMALIES' indices in twinmatch/dtypes.py.
enum class Anomaly : std::uint8_t {
    UnknownRef = 0,     // E C X D U name no live order
    DuplicateRef = 1,   // A F U add a reference that is already live
    OverExecution = 2,  // E C execute more shares than rest
    OverCancel = 3,     // X cancels more shares than rest
    Crossed = 4,        // A F U would cross the opposite side: not added
    BadPrice = 5,       // A F U with price 0
    BadShares = 6,      // A F E C X U with 0 shares
    BadSide = 7,        // A F with a side other than 'B' / 'S'
    LocateMismatch = 8, // the reference lives in another locate's book (handled there)
};
inline constexpr std::size_t kAnomalyKinds = 9;
// --8<-- [end:anomalies]

enum class Mode : std::uint8_t { Book = 0, Match = 1 };

// --8<-- [start:refmap]
// Order reference -> stock locate, for every live order of the day. Open addressing
// with linear probing, at most half full, backward-shift deletion (no tombstones).
// Like the Book's id hash, references in blocks of 8 share a cache line of slots: NASDAQ
// numbers orders in sequence, so neighbouring references land on neighbouring slots.
class RefMap {
public:
    RefMap() { alloc(1024); }
    ~RefMap() { std::free(slots_); }
    RefMap(const RefMap&) = delete;
    RefMap& operator=(const RefMap&) = delete;

    static constexpr std::uint32_t kAbsent = 0xFFFF'FFFFu;

    std::uint32_t find(std::uint64_t ref) const {  // the locate, or kAbsent
        for (std::uint64_t i = home(ref);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (!s.used) return kAbsent;
            if (s.ref == ref) return s.locate;
        }
    }
    void insert(std::uint64_t ref, std::uint16_t locate) {  // ref must be absent
        if ((size_ + 1) * 2 > mask_ + 1) rehash((mask_ + 1) * 2);
        std::uint64_t i = home(ref);
        while (slots_[i].used) i = (i + 1) & mask_;
        slots_[i] = Slot{ref, locate, 1, {}};
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
        std::uint16_t locate;
        std::uint8_t used;
        std::uint8_t pad_[5];
    };
    static_assert(sizeof(Slot) == 16);

    std::uint64_t home(std::uint64_t ref) const {
        return ((IdHash::mix(ref >> 3) >> 32) + (ref & 7)) & mask_;
    }
    void alloc(std::uint64_t cap) {
        // calloc: used = 0 everywhere, and fresh pages come zeroed from the OS.
        auto* p = static_cast<Slot*>(std::calloc(cap, sizeof(Slot)));
        if (p == nullptr) throw std::bad_alloc();
        slots_ = p;
        mask_ = cap - 1;
        size_ = 0;
    }
    void rehash(std::uint64_t cap) {
        if (cap > (std::uint64_t(1) << 40)) throw std::length_error("reference map full");
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
};
// --8<-- [end:refmap]

// Message counts, fills, anomalies and rejects: what a replay reports.
struct MarketCounts {
    std::array<std::uint64_t, 256> events{};             // by ITCH type byte
    std::array<std::uint64_t, kAnomalyKinds> anomalies{};
    std::array<std::uint64_t, 8> rejects{};              // by Reason (match mode)
    std::uint64_t fills = 0;
    std::uint64_t volume = 0;                            // shares in all fills
};

class Market {
public:
    static constexpr std::uint64_t kNoLocate = 0x1'0000;  // locates are uint16
    // A symbol's price window: 4096 levels of 1/10,000 dollar. Small on purpose: with
    // thousands of symbols a big window per book would cost more than the orders.
    static constexpr std::uint64_t kDefaultWindow = 4096;
    static constexpr std::uint32_t kDefaultOrders = 64;

    explicit Market(Mode mode, std::uint64_t window_levels = kDefaultWindow,
                    std::uint32_t initial_orders = kDefaultOrders)
        : mode_(mode), window_(window_levels), initial_orders_(initial_orders),
          books_(kNoLocate), names_(kNoLocate * 8, ' '), activity_(kNoLocate, 0) {
        Book probe(window_levels, 16);  // validates window_levels now, not at the first order
    }

    Mode mode() const { return mode_; }
    const MarketCounts& counts() const { return counts_; }
    std::size_t live_orders() const { return refs_.size(); }
    std::size_t books() const { return n_books_; }
    const std::vector<std::uint64_t>& activity() const { return activity_; }
    const char* stock(std::uint16_t locate) const { return &names_[std::size_t(locate) * 8]; }
    Book* book(std::uint16_t locate) { return books_[locate].get(); }
    const Book* book(std::uint16_t locate) const { return books_[locate].get(); }
    std::uint32_t ref_locate(std::uint64_t ref) const { return refs_.find(ref); }

    // --8<-- [start:run]
    // Apply n events in order. Every fill is appended to `fills` with op_index = its
    // event's index. No allocation once the books, map and fills vector have grown.
    void run(const ItchEvent* ev, std::size_t n, std::vector<FillRecord>& fills) {
        for (std::size_t k = 0; k < n; ++k) {
            const ItchEvent& e = ev[k];
            ++counts_.events[e.type];
            auto idx = static_cast<std::uint32_t>(k);
            switch (e.type) {
                case 'R': std::memcpy(&names_[std::size_t(e.locate) * 8], e.stock, 8); break;
                case 'A': case 'F': add(e, idx, fills); break;
                case 'E': case 'C': execute(e, idx, fills); break;
                case 'X': cancel(e); break;
                case 'D': del(e); break;
                case 'U': replace(e, idx, fills); break;
                default: break;  // S H P Q B ...: counted only
            }
        }
    }
    // --8<-- [end:run]

    // --8<-- [start:books_csv]
    // The books CSV (DESIGN.md): one row per resting order, by locate, side (B first),
    // price ascending, then priority (place in the level's queue, 0 = next to trade).
    std::string books_csv() const {
        std::string s = "locate,stock,side,price,priority,order_ref,shares\n";
        struct Row {
            std::uint32_t price;
            std::uint64_t priority, ref;
            std::uint32_t shares;
        };
        std::vector<Row> rows;
        char buf[24];
        auto num = [&](std::uint64_t v) {
            auto r = std::to_chars(buf, buf + sizeof buf, v);
            s.append(buf, r.ptr);
        };
        for (std::size_t loc = 0; loc < kNoLocate; ++loc) {
            const Book* b = books_[loc].get();
            if (b == nullptr || b->size() == 0) continue;
            std::string stock(&names_[loc * 8], 8);
            stock.erase(stock.find_last_not_of(' ') + 1);
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
                for (const Row& r : rows) {
                    num(loc);
                    s += ',';
                    s += stock;
                    s += side == Side::Buy ? ",B," : ",S,";
                    num(r.price);
                    s += ',';
                    num(r.priority);
                    s += ',';
                    num(r.ref);
                    s += ',';
                    num(r.shares);
                    s += '\n';
                }
            }
        }
        return s;
    }
    // --8<-- [end:books_csv]

private:
    void anomaly(Anomaly a) { ++counts_.anomalies[static_cast<std::size_t>(a)]; }
    void reject(Reason r) { ++counts_.rejects[static_cast<std::size_t>(r)]; }

    // The book of a locate, created at its first order.
    Book& book_for(std::uint16_t locate) {
        std::unique_ptr<Book>& b = books_[locate];
        if (!b) [[unlikely]] {
            b = std::make_unique<Book>(window_, initial_orders_);
            ++n_books_;
        }
        return *b;
    }

    // The locate whose book holds `ref` (the map wins over the message), or kAbsent.
    std::uint32_t locate_of(const ItchEvent& e, std::uint64_t ref) {
        std::uint32_t loc = refs_.find(ref);
        if (loc != RefMap::kAbsent && loc != e.locate) anomaly(Anomaly::LocateMismatch);
        return loc;
    }

    // Would a `side` order at `price` trade against the opposite side of `b`?
    static bool crosses(Book& b, Side side, std::uint32_t price) {
        std::uint64_t qty;
        std::uint32_t best = b.best(opposite(side), qty);
        if (best == 0) return false;
        return side == Side::Buy ? best <= price : best >= price;
    }

    // Match mode: after an order entered `b`, forget the resting orders its fills (from
    // index `first` on) removed, and remember the order itself if a remainder rests.
    void settle(Book& b, std::uint64_t ref, std::uint16_t locate,
                std::vector<FillRecord>& fills, std::size_t first) {
        Side s;
        std::uint32_t p, q;
        for (std::size_t i = first; i < fills.size(); ++i) {
            ++counts_.fills;
            counts_.volume += fills[i].qty;
            if (!b.order(fills[i].resting_id, s, p, q)) refs_.erase(fills[i].resting_id);
        }
        if (b.order(ref, s, p, q)) refs_.insert(ref, locate);
    }

    void emit(std::vector<FillRecord>& fills, std::uint64_t resting, std::uint64_t aggressor,
              std::uint32_t price, std::uint32_t qty, Side side, std::uint32_t idx) {
        fills.push_back(FillRecord{resting, aggressor, price, qty, idx,
                                   static_cast<std::uint8_t>(side), {}});
    }

    // --8<-- [start:add]
    void add(const ItchEvent& e, std::uint32_t idx, std::vector<FillRecord>& fills) {
        ++activity_[e.locate];
        if (e.side != 'B' && e.side != 'S') {
            return mode_ == Mode::Book ? anomaly(Anomaly::BadSide) : reject(Reason::BadSide);
        }
        Side side = e.side == 'B' ? Side::Buy : Side::Sell;
        if (mode_ == Mode::Book) {
            if (e.price == 0) return anomaly(Anomaly::BadPrice);
            if (e.shares == 0) return anomaly(Anomaly::BadShares);
            if (refs_.find(e.order_ref) != RefMap::kAbsent) return anomaly(Anomaly::DuplicateRef);
            Book& b = book_for(e.locate);
            // NASDAQ's own book never crosses: an add that would trade here means this
            // book has missed a message. The feed handler never matches; it drops the add.
            if (crosses(b, side, e.price)) return anomaly(Anomaly::Crossed);
            b.add_limit(e.order_ref, side, e.price, e.shares, [](const Fill&) {});
            refs_.insert(e.order_ref, e.locate);
            return;
        }
        // Match mode: the same checks, in the Book's order, then the Book matches.
        if (e.shares == 0) return reject(Reason::BadQty);
        if (refs_.find(e.order_ref) != RefMap::kAbsent) return reject(Reason::DuplicateId);
        Book& b = book_for(e.locate);
        std::size_t first = fills.size();
        auto sink = [&](const Fill& f) {
            emit(fills, f.resting_id, f.aggressor_id, f.price, f.qty, f.aggressor_side, idx);
        };
        if (e.price == 0) {  // the CSV convention: price 0 is a market order
            std::uint64_t unfilled;
            b.add_market(e.order_ref, side, e.shares, unfilled, sink);
        } else {
            b.add_limit(e.order_ref, side, e.price, e.shares, sink);
        }
        settle(b, e.order_ref, e.locate, fills, first);
    }
    // --8<-- [end:add]

    // --8<-- [start:execute]
    void execute(const ItchEvent& e, std::uint32_t idx, std::vector<FillRecord>& fills) {
        ++activity_[e.locate];
        if (mode_ == Mode::Match) return;  // an engine makes its own executions
        if (e.shares == 0) return anomaly(Anomaly::BadShares);
        std::uint32_t loc = locate_of(e, e.order_ref);
        if (loc == RefMap::kAbsent) return anomaly(Anomaly::UnknownRef);
        Book& b = *books_[loc];
        Side side;
        std::uint32_t price, qty;
        b.order(e.order_ref, side, price, qty);
        if (e.shares > qty) return anomaly(Anomaly::OverExecution);
        std::uint64_t left;
        b.reduce(e.order_ref, e.shares, left);  // keeps its place in the queue
        if (left == 0) refs_.erase(e.order_ref);
        // C carries its own execution price; E trades at the resting price.
        emit(fills, e.order_ref, 0, e.type == 'C' ? e.price : price, e.shares, opposite(side),
             idx);
        ++counts_.fills;
        counts_.volume += e.shares;
    }
    // --8<-- [end:execute]

    void cancel(const ItchEvent& e) {  // X: a partial cancel
        ++activity_[e.locate];
        if (e.shares == 0) {
            return mode_ == Mode::Book ? anomaly(Anomaly::BadShares) : reject(Reason::BadQty);
        }
        std::uint32_t loc = locate_of(e, e.order_ref);
        if (loc == RefMap::kAbsent) {
            return mode_ == Mode::Book ? anomaly(Anomaly::UnknownRef) : reject(Reason::UnknownId);
        }
        std::uint64_t left;
        Reason r = books_[loc]->reduce(e.order_ref, e.shares, left);
        if (r == Reason::OverReduce) {
            return mode_ == Mode::Book ? anomaly(Anomaly::OverCancel) : reject(r);
        }
        if (left == 0) refs_.erase(e.order_ref);
    }

    void del(const ItchEvent& e) {  // D
        ++activity_[e.locate];
        std::uint32_t loc = locate_of(e, e.order_ref);
        if (loc == RefMap::kAbsent) {
            return mode_ == Mode::Book ? anomaly(Anomaly::UnknownRef) : reject(Reason::UnknownId);
        }
        std::uint64_t removed;
        books_[loc]->cancel(e.order_ref, removed);
        refs_.erase(e.order_ref);
    }

    // --8<-- [start:replace]
    void replace(const ItchEvent& e, std::uint32_t idx, std::vector<FillRecord>& fills) {
        ++activity_[e.locate];
        const bool book_mode = mode_ == Mode::Book;
        if (e.price == 0) return book_mode ? anomaly(Anomaly::BadPrice) : reject(Reason::BadPrice);
        if (e.shares == 0) return book_mode ? anomaly(Anomaly::BadShares) : reject(Reason::BadQty);
        std::uint32_t loc = locate_of(e, e.order_ref);
        if (loc == RefMap::kAbsent) {
            return book_mode ? anomaly(Anomaly::UnknownRef) : reject(Reason::UnknownId);
        }
        if (e.new_order_ref != e.order_ref && refs_.find(e.new_order_ref) != RefMap::kAbsent) {
            return book_mode ? anomaly(Anomaly::DuplicateRef) : reject(Reason::DuplicateId);
        }
        Book& b = *books_[loc];
        auto locate = static_cast<std::uint16_t>(loc);
        refs_.erase(e.order_ref);
        if (book_mode) {
            Side side;
            std::uint32_t price, qty;
            b.order(e.order_ref, side, price, qty);
            if (crosses(b, side, e.price)) {  // the old order leaves; the new one is dropped
                std::uint64_t removed;
                b.cancel(e.order_ref, removed);
                return anomaly(Anomaly::Crossed);
            }
            b.replace(e.order_ref, e.new_order_ref, e.price, e.shares, [](const Fill&) {});
            refs_.insert(e.new_order_ref, locate);
            return;
        }
        std::size_t first = fills.size();
        b.replace(e.order_ref, e.new_order_ref, e.price, e.shares, [&](const Fill& f) {
            emit(fills, f.resting_id, f.aggressor_id, f.price, f.qty, f.aggressor_side, idx);
        });
        settle(b, e.new_order_ref, locate, fills, first);
    }
    // --8<-- [end:replace]

    Mode mode_;
    std::uint64_t window_;
    std::uint32_t initial_orders_;
    std::vector<std::unique_ptr<Book>> books_;  // by locate; null until the first order
    std::size_t n_books_ = 0;
    std::vector<char> names_;                   // 8 space-padded bytes per locate (from R)
    std::vector<std::uint64_t> activity_;       // book messages (A F E C X D U) per locate
    RefMap refs_;
    MarketCounts counts_;
};

}  // namespace twinmatch
