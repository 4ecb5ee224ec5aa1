// A capped flat-array matching engine, written the way a student writes one: the speed
// ceiling that the real market's safety is measured against (benchmark group "engine").
// Benchmark-only: not a twin, not part of any replay, no naive counterpart.
//
// "Capped" because every size is fixed by the workload, not by the feed: one array slot per
// raw price 0..kLevels-1 (no window, no far map), one order slot per raw order reference
// 0..max_ref (no hash), one symbol, only add orders. "No checks" because the matching loop
// trusts its input completely: no duplicate-id test, no side test, no price range test.
// The real market pays for all of those on every message; this file shows what they cost.
//
// The loop itself checks nothing, so the input must be checked before it runs: CappedRef's
// constructor refuses anything outside the caps (a throw, before any matching) and keeps a
// copy of the checked events. run() then reads the same 56-byte EVENT_DTYPE records the
// market's run() reads (type, side, price, shares, reference), so both sides of the
// comparison pay for reading their input and differ only in what they check and how they
// store the book.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtypes.hpp"

namespace twinmatch {

class CappedRef {
public:
    static constexpr std::uint32_t kLevels = 100'001;  // raw prices 0..100,000
    static constexpr std::uint32_t kNone = 0xFFFF'FFFFu;

    // The input: ITCH events; R and S events are skipped, every other one must be an A
    // add for locate 1 with side 'B'/'S', 1 <= price < kLevels, shares >= 1, and a
    // reference <= max_refs seen once. Throws std::invalid_argument naming the event.
    CappedRef(const ItchEvent* ev, std::size_t n, std::uint64_t max_refs) {
        if (max_refs >= kNone) throw std::invalid_argument("max_refs too large");
        std::vector<bool> seen(max_refs + 1, false);
        for (std::size_t i = 0; i < n; ++i) {
            const ItchEvent& e = ev[i];
            if (e.type == 'R' || e.type == 'S') continue;
            std::string at = "event " + std::to_string(i) + ": ";
            if (e.type != 'A' || e.locate != 1)
                throw std::invalid_argument(at + "only A adds for locate 1");
            if (e.side != 'B' && e.side != 'S') throw std::invalid_argument(at + "bad side");
            if (e.price == 0 || e.price >= kLevels)
                throw std::invalid_argument(at + "price outside 1..100,000");
            if (e.shares == 0) throw std::invalid_argument(at + "zero shares");
            if (e.order_ref == 0 || e.order_ref > max_refs || seen[e.order_ref])
                throw std::invalid_argument(at + "order reference outside the cap or reused");
            seen[e.order_ref] = true;
            ++adds_;
        }
        ev_.assign(ev, ev + n);
        max_refs_ = max_refs;
    }

    std::size_t adds() const { return adds_; }

    // --8<-- [start:capped_run]
    // Match every add in order, from an empty book; fills appended to `out`. The state is
    // made fresh here (it is part of what one run costs, as a new Market is for the market).
    void run(std::vector<FillRecord>& out) {
        // Per price level: the FIFO queue as first/last order slot, and nothing else.
        for (int s = 0; s < 2; ++s) {
            head[s].assign(kLevels, kNone);
            tail[s].assign(kLevels, kNone);
        }
        // Per order slot (indexed by the raw reference): shares left and the next in queue.
        left.assign(max_refs_ + 1, 0);
        next.assign(max_refs_ + 1, kNone);
        std::uint32_t best_bid = 0, best_ask = kLevels;  // sentinels: no bid, no ask
        out.reserve(out.size() + 2 * adds_);  // a fill ends an order or an add: <= 2n

        for (std::size_t k = 0; k < ev_.size(); ++k) {
            const ItchEvent& e = ev_[k];
            if (e.type != 'A') continue;  // R, S: checked, nothing else occurs
            const auto id = static_cast<std::uint32_t>(e.order_ref);
            std::uint32_t price = e.price, qty = e.shares;
            const bool sell = e.side == 'S';
            const auto index = static_cast<std::uint32_t>(k);
            if (sell) {
                // A sell trades against bids at or above its price, best (highest) first.
                while (qty > 0 && best_bid >= price) {  // price >= 1: no bid (0) never crosses
                    std::uint32_t r = head[0][best_bid];
                    std::uint32_t take = left[r] < qty ? left[r] : qty;
                    out.push_back(FillRecord{r, id, best_bid, take, index, 1, {}});
                    left[r] -= take;
                    qty -= take;
                    if (left[r] == 0) {
                        head[0][best_bid] = next[r];
                        if (head[0][best_bid] == kNone) {  // level empty: walk down to the next
                            tail[0][best_bid] = kNone;
                            while (best_bid > 0 && head[0][best_bid] == kNone) --best_bid;
                        }
                    }
                }
            } else {
                while (qty > 0 && best_ask <= price) {  // price < kLevels: no ask never crosses
                    std::uint32_t r = head[1][best_ask];
                    std::uint32_t take = left[r] < qty ? left[r] : qty;
                    out.push_back(FillRecord{r, id, best_ask, take, index, 0, {}});
                    left[r] -= take;
                    qty -= take;
                    if (left[r] == 0) {
                        head[1][best_ask] = next[r];
                        if (head[1][best_ask] == kNone) {
                            tail[1][best_ask] = kNone;
                            while (best_ask < kLevels && head[1][best_ask] == kNone) ++best_ask;
                        }
                    }
                }
            }
            if (qty == 0) continue;
            // The remainder rests at the back of its level's queue.
            int s = sell ? 1 : 0;
            left[id] = qty;
            if (tail[s][price] == kNone) head[s][price] = id;
            else next[tail[s][price]] = id;
            tail[s][price] = id;
            if (sell && price < best_ask) best_ask = price;
            if (!sell && price > best_bid) best_bid = price;
        }
    }
    // --8<-- [end:capped_run]

    // Orders resting after the last run(): every level's queue walked (not timed).
    std::uint64_t resting() const {
        std::uint64_t n = 0;
        for (int s = 0; s < 2; ++s)
            for (std::size_t p = 0; p < head[s].size(); ++p)
                for (std::uint32_t r = head[s][p]; r != kNone; r = next[r]) ++n;
        return n;
    }

private:
    std::vector<ItchEvent> ev_;  // the checked input
    std::size_t adds_ = 0;
    std::uint64_t max_refs_ = 0;
    std::vector<std::uint32_t> head[2], tail[2], left, next;  // the book, made by run()
};

}  // namespace twinmatch
