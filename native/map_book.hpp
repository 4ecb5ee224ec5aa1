// The baseline: the same book written the way a competent C++ programmer would
// write it first, with the standard containers. std::map keeps each side sorted by
// price, a std::list per level keeps arrival order, and an unordered_map finds an
// order by id. Same matching and same rejects as twinmatch::Book; the difference
// between the two measures the data structure, not the language.
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
        remove(it);
        enter(new_id, side, static_cast<std::uint32_t>(price), static_cast<std::uint32_t>(qty),
              sink);
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
    using Bids = std::map<std::uint32_t, Level, std::greater<>>;  // best (highest) first
    using Asks = std::map<std::uint32_t, Level, std::less<>>;     // best (lowest) first
    // --8<-- [end:map_state]

    // --8<-- [start:map_match]
    template <class Levels, class Sink>
    std::uint32_t match(std::uint64_t id, Side side, Levels& levels, std::uint64_t limit,
                        std::uint32_t qty, Sink& sink) {
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

    template <class Sink>
    void enter(std::uint64_t id, Side side, std::uint32_t price, std::uint32_t qty, Sink& sink) {
        if (side == Side::Buy) {
            qty = match(id, side, asks_, price, qty, sink);
            if (qty > 0) rest(id, side, price, qty, bids_[price]);
        } else {
            qty = match(id, side, bids_, price, qty, sink);
            if (qty > 0) rest(id, side, price, qty, asks_[price]);
        }
    }

    void rest(std::uint64_t id, Side side, std::uint32_t price, std::uint32_t qty, Level& l) {
        l.orders.push_back(Order{id, qty});
        l.total += qty;
        ids_.emplace(id, Loc{side, price, &l, std::prev(l.orders.end())});
    }

    void remove(std::unordered_map<std::uint64_t, Loc>::iterator it) {
        Loc& loc = it->second;
        loc.level->total -= loc.order->qty;
        loc.level->orders.erase(loc.order);
        if (loc.level->orders.empty()) {
            if (loc.side == Side::Buy) bids_.erase(loc.price); else asks_.erase(loc.price);
        }
        ids_.erase(it);
    }

    Bids bids_;
    Asks asks_;
    std::unordered_map<std::uint64_t, Loc> ids_;
    std::uint32_t max_orders_;
};
// --8<-- [end:map_book]

}  // namespace twinmatch
