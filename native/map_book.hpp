// The baseline: the same book written the way a competent C++ programmer would
// write it first, with the standard containers. std::map keeps each side sorted by
// price, a std::list per level keeps arrival order, and an unordered_map finds an
// order by id. Same matching and same rejects as twinmatch::Book; the difference
// between the two measures the data structure, not the language. Like Book, every
// operation allocates what it needs before it changes anything (see enter()).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "book.hpp"

namespace twinmatch {

// --8<-- [start:map_book]
class MapBook {
public:
    explicit MapBook(std::uint32_t initial_orders = Book::kDefaultOrders,
                     std::uint32_t max_orders = Book::kMaxOrders)
        : max_orders_(max_orders) {
        if (max_orders == 0 || max_orders > Book::kMaxOrders)
            throw std::invalid_argument("max_orders must be in 1..2^31");
        ids_.reserve(std::min(initial_orders, max_orders));
    }

    template <class Sink>
    Reason add_limit(std::uint64_t id, Side side, std::int64_t price, std::int64_t qty, Sink&& sink) {
        if (price < 1 || price > kMaxPrice) return Reason::BadPrice;
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        if (ids_.contains(id)) return Reason::DuplicateId;
        // Like Book: room for the order to rest is checked before it may match.
        if (ids_.size() >= max_orders_) throw BookFull("book full: it holds max_orders resting orders");
        enter(id, side, static_cast<std::uint32_t>(price), static_cast<std::uint32_t>(qty), sink);
        return Reason::Ok;
    }

    template <class Sink>
    Reason add_market(std::uint64_t id, Side side, std::int64_t qty, std::uint64_t& unfilled,
                      Sink&& sink) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        if (ids_.contains(id)) return Reason::DuplicateId;
        std::uint32_t q = static_cast<std::uint32_t>(qty);
        if (side == Side::Buy) reserve_fills(sink, side, asks_, ~std::uint64_t(0), q);
        else reserve_fills(sink, side, bids_, 0, q);
        unfilled = side == Side::Buy ? match(id, side, asks_, ~std::uint64_t(0), q, sink)
                                     : match(id, side, bids_, 0, q, sink);
        return Reason::Ok;
    }

    Reason cancel(std::uint64_t id, std::uint64_t& removed) {
        auto it = ids_.find(id);
        if (it == ids_.end()) return Reason::UnknownId;
        removed = it->second.order->qty;
        remove(it);
        return Reason::Ok;
    }

    Reason reduce(std::uint64_t id, std::int64_t qty, std::uint64_t& left) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        auto it = ids_.find(id);
        if (it == ids_.end()) return Reason::UnknownId;
        Order& o = *it->second.order;
        if (std::uint64_t(qty) > o.qty) return Reason::OverReduce;
        left = o.qty - std::uint64_t(qty);
        if (left == 0) {
            remove(it);
        } else {
            o.qty = static_cast<std::uint32_t>(left);
            it->second.level->total -= std::uint64_t(qty);
        }
        return Reason::Ok;
    }

    Reason execute(std::uint64_t id, std::int64_t qty, Fill& fill) {
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        auto it = ids_.find(id);
        if (it == ids_.end()) return Reason::UnknownId;
        const Loc& loc = it->second;
        if (std::uint64_t(qty) > loc.order->qty) return Reason::OverReduce;
        fill = Fill{id, 0, loc.price, static_cast<std::uint32_t>(qty), opposite(loc.side)};
        std::uint64_t left;
        reduce(id, qty, left);
        return Reason::Ok;
    }

    template <class Sink>
    Reason replace(std::uint64_t old_id, std::uint64_t new_id, std::int64_t price,
                   std::int64_t qty, Sink&& sink) {
        if (price < 1 || price > kMaxPrice) return Reason::BadPrice;
        if (qty < 1 || qty > kMaxQty) return Reason::BadQty;
        auto it = ids_.find(old_id);
        if (it == ids_.end()) return Reason::UnknownId;
        if (new_id != old_id && ids_.contains(new_id)) return Reason::DuplicateId;
        Side side = it->second.side;
        auto p = static_cast<std::uint32_t>(price);
        auto q = static_cast<std::uint32_t>(qty);
        if (side == Side::Buy) reserve_fills(sink, side, asks_, p, q);
        else reserve_fills(sink, side, bids_, p, q);
        bool all_trades = side == Side::Buy ? fills_completely(side, asks_, p, q)
                                            : fills_completely(side, bids_, p, q);
        if (all_trades) {  // nothing will rest: nothing to allocate after the old one leaves
            remove(it);
            if (side == Side::Buy) match(new_id, side, asks_, p, q, sink);
            else match(new_id, side, bids_, p, q, sink);
            return Reason::Ok;
        }
        // The new order's map entries are made before the old order leaves (enter()
        // would make them before matching anyway): if making them throws, nothing has
        // changed.
        Pending pending = side == Side::Buy ? make_room(new_id, side, p, q, bids_)
                                            : make_room(new_id, side, p, q, asks_);
        // Found again: make_room may have rehashed ids_. The old order's level stays if
        // it is the new order's (it is then the new order's to keep or drop, in
        // finish()). A replace that keeps its id keeps its entry too (make_room handed
        // it over).
        if (remove(ids_.find(old_id), pending.level, new_id != old_id)) pending.new_level = true;
        if (side == Side::Buy) finish(pending, match(new_id, side, asks_, p, q, sink), bids_);
        else finish(pending, match(new_id, side, bids_, p, q, sink), asks_);
        return Reason::Ok;
    }

    std::size_t size() const { return ids_.size(); }

    std::uint32_t best(Side side, std::uint64_t& qty) const {
        if (side == Side::Buy) {
            if (bids_.empty()) return qty = 0, 0;
            qty = bids_.begin()->second.total;
            return bids_.begin()->first;
        }
        if (asks_.empty()) return qty = 0, 0;
        qty = asks_.begin()->second.total;
        return asks_.begin()->first;
    }

    bool order(std::uint64_t id, Side& side, std::uint32_t& price, std::uint32_t& qty) const {
        auto it = ids_.find(id);
        if (it == ids_.end()) return false;
        side = it->second.side;
        price = it->second.price;
        qty = it->second.order->qty;
        return true;
    }

    template <class Out>
    void depth(Side side, std::int64_t max_levels, Out&& out) const {
        auto walk = [&](const auto& levels) {
            std::int64_t n = 0;
            for (auto it = levels.begin(); it != levels.end() && n < max_levels; ++it, ++n)
                out(DepthRow{it->first, it->second.total,
                             static_cast<std::uint32_t>(it->second.orders.size())});
        };
        if (side == Side::Buy) walk(bids_); else walk(asks_);
    }

    void clear() {
        bids_.clear();
        asks_.clear();
        ids_.clear();  // keeps its buckets
    }

private:
    // --8<-- [start:map_state]
    struct Order {
        std::uint64_t id;
        std::uint32_t qty;
    };
    struct Level {
        std::list<Order> orders;  // oldest first
        std::uint64_t total = 0;
    };
    struct Loc {  // where an order lives, so cancel needs no search
        Side side;
        std::uint32_t price;
        Level* level;  // std::map nodes never move, so this stays valid
        std::list<Order>::iterator order;
    };
    using Bids = std::map<std::uint32_t, Level, std::greater<>>;  // best first: highest
    using Asks = std::map<std::uint32_t, Level, std::less<>>;     // best first: lowest
    // --8<-- [end:map_state]

    // --8<-- [start:map_match]
    template <class Levels, class Sink>
    std::uint32_t match(std::uint64_t id, Side side, Levels& levels,
                        std::uint64_t limit, std::uint32_t qty, Sink& sink) {
        while (qty > 0 && !levels.empty()) {
            auto lvl = levels.begin();
            std::uint32_t price = lvl->first;
            if (side == Side::Buy ? price > limit : price < limit) break;
            auto& orders = lvl->second.orders;
            while (qty > 0 && !orders.empty()) {
                Order& o = orders.front();
                std::uint32_t q = std::min(qty, o.qty);
                sink(Fill{o.id, id, price, q, side});
                o.qty -= q;
                qty -= q;
                lvl->second.total -= q;
                if (o.qty != 0) break;
                ids_.erase(o.id);
                orders.pop_front();
            }
            if (orders.empty()) levels.erase(lvl);
        }
        return qty;
    }
    // --8<-- [end:map_match]

    // Match, then rest the remainder. An order that does not cross (most) just rests:
    // nothing has changed before rest(), so if it throws, nothing is lost. One that
    // crosses makes everything that allocates first (its level, list node and id entry:
    // make_room), so a throw changes nothing; the match and finish() allocate nothing
    // (the sink was asked for room: reserve_fills).
    template <class Sink>
    void enter(std::uint64_t id, Side side, std::uint32_t price, std::uint32_t qty, Sink& sink) {
        if (side == Side::Buy) {
            if (asks_.empty() || asks_.begin()->first > price) {
                rest(id, side, price, qty, bids_);
                return;
            }
            reserve_fills(sink, side, asks_, price, qty);
            if (fills_completely(side, asks_, price, qty)) {  // nothing will rest
                match(id, side, asks_, price, qty, sink);
                return;
            }
            Pending pending = make_room(id, side, price, qty, bids_);
            finish(pending, match(id, side, asks_, price, qty, sink), bids_);
        } else {
            if (bids_.empty() || bids_.begin()->first < price) {
                rest(id, side, price, qty, asks_);
                return;
            }
            reserve_fills(sink, side, bids_, price, qty);
            if (fills_completely(side, bids_, price, qty)) {  // nothing will rest
                match(id, side, bids_, price, qty, sink);
                return;
            }
            Pending pending = make_room(id, side, price, qty, asks_);
            finish(pending, match(id, side, bids_, price, qty, sink), asks_);
        }
    }

    // A passive order joins its level. Each of the three allocations may throw: what
    // the ones before it made is undone (the checkpoints sit next to the allocations,
    // on a path that allocates anyway).
    template <class Levels>
    void rest(std::uint64_t id, Side side, std::uint32_t price, std::uint32_t qty, Levels& own) {
        alloc_checkpoint();
        auto [lvl, made] = own.try_emplace(price);
        Level& l = lvl->second;
        try {
            alloc_checkpoint();
            l.orders.push_back(Order{id, qty});
            try {
                alloc_checkpoint();
                ids_.emplace(id, Loc{side, price, &l, std::prev(l.orders.end())});
            } catch (...) {
                l.orders.pop_back();
                throw;
            }
        } catch (...) {
            if (made) own.erase(lvl);
            throw;
        }
        l.total += qty;
    }

    // What a new order will need to rest, made before it matches: its level (perhaps
    // new and empty), a list node holding it (in a list of its own), its id entry.
    struct Pending {
        std::list<Order> node;
        Side side;
        std::uint32_t price;
        Level* level;
        bool new_level;  // made for this order: erased again if it all trades
        std::unordered_map<std::uint64_t, Loc>::iterator entry;
    };
    template <class Levels>
    Pending make_room(std::uint64_t id, Side side, std::uint32_t price, std::uint32_t qty,
                      Levels& own) {
        alloc_checkpoint();
        std::list<Order> node;
        node.push_back(Order{id, qty});  // may throw: nothing changed yet
        alloc_checkpoint();
        auto [lvl, made] = own.try_emplace(price);  // may throw: nothing changed yet
        try {
            alloc_checkpoint();
            // (a replace that keeps its id finds its own entry here, and reuses it)
            auto [entry, added] = ids_.emplace(id, Loc{side, price, &lvl->second, node.begin()});
            (void)added;
            return Pending{std::move(node), side, price, &lvl->second, made, entry};
        } catch (...) {
            if (made) own.erase(lvl);  // undo the empty level
            throw;
        }
    }
    template <class Levels>
    void finish(Pending& p, std::uint32_t left, Levels& own) {
        if (left == 0) {  // all traded: undo what make_room made
            ids_.erase(p.entry);
            if (p.new_level) own.erase(p.price);
            return;
        }
        p.node.front().qty = left;
        p.level->orders.splice(p.level->orders.end(), p.node);  // relinks: no allocation
        p.level->total += left;
        p.entry->second = Loc{p.side, p.price, p.level, std::prev(p.level->orders.end())};
    }

    // Returns true if it left `keep` (a level it must not erase) empty.
    bool remove(std::unordered_map<std::uint64_t, Loc>::iterator it, const Level* keep = nullptr,
                bool erase_entry = true) {
        Loc& loc = it->second;
        loc.level->total -= loc.order->qty;
        loc.level->orders.erase(loc.order);
        bool emptied_keep = false;
        if (loc.level->orders.empty()) {
            if (loc.level == keep) emptied_keep = true;
            else if (loc.side == Side::Buy) bids_.erase(loc.price);
            else asks_.erase(loc.price);
        }
        if (erase_entry) ids_.erase(it);
        return emptied_keep;
    }

    // Would an aggressor trade all of qty? (The levels it crosses hold that much: their
    // totals say so without looking at the orders.)
    template <class Levels>
    bool fills_completely(Side side, const Levels& opposite, std::uint64_t limit,
                          std::uint32_t qty) const {
        std::uint64_t there = 0;
        for (auto it = opposite.begin(); it != opposite.end(); ++it) {
            if (side == Side::Buy ? it->first > limit : it->first < limit) return false;
            there += it->second.total;
            if (there >= qty) return true;
        }
        return false;
    }

    // Room in the sink for every fill an aggressor can make (as Book::reserve_fills),
    // counted exactly only when the quick bound, min(qty, resting orders), is too many.
    template <class Sink, class Levels>
    void reserve_fills(Sink& sink, Side side, const Levels& opposite, std::uint64_t limit,
                       std::uint32_t qty) {
        if constexpr (requires { sink.room(); sink.reserve(std::size_t{}); }) {
            if (sink.room() >= std::min<std::uint64_t>(qty, ids_.size())) [[likely]] return;
            std::size_t fills = 0;
            std::uint64_t left = qty;
            for (auto it = opposite.begin(); it != opposite.end() && left > 0; ++it) {
                // the levels are best first: the first one that does not cross ends it
                if (side == Side::Buy ? it->first > limit : it->first < limit) break;
                const Level& l = it->second;
                if (l.total < left) {
                    fills += l.orders.size();
                    left -= l.total;
                    continue;
                }
                for (auto o = l.orders.begin(); left > 0; ++o) {
                    ++fills;
                    left -= std::min<std::uint64_t>(left, o->qty);
                }
            }
            sink.reserve(fills);
        }
    }

    Bids bids_;
    Asks asks_;
    std::unordered_map<std::uint64_t, Loc> ids_;
    std::uint32_t max_orders_;
};
// --8<-- [end:map_book]

}  // namespace twinmatch
