// 01_order_book/free_list: order nodes from a pool, reused through a free list, so a book
// in steady state allocates nothing (starter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ex01 {

struct Order {
    std::uint64_t id;
    std::uint32_t qty;
    std::uint32_t level;
    Order* next;  // in a level's queue while live; in the free list once released
};

// TODO: every acquire is a trip to the allocator (new) and every release another
// (delete): in a book that adds and cancels all day, that is two heap calls per order.
// Keep released nodes on a free list (threaded through `next`) and hand the most recently
// released one out first; take new nodes from blocks of kBlock, so the pool allocates only
// when it grows past its largest size so far. Nodes must never move while live.
class OrderPool {
public:
    static constexpr std::size_t kBlock = 4096;  // nodes per block

    Order* acquire(std::uint64_t id, std::uint32_t qty) {
        ++live_;
        return new Order{id, qty, 0, nullptr};
    }

    void release(Order* o) {
        --live_;
        delete o;
    }

    std::size_t live() const { return live_; }

    OrderPool() = default;
    OrderPool(const OrderPool&) = delete;
    OrderPool& operator=(const OrderPool&) = delete;

private:
    std::size_t live_ = 0;
};

}  // namespace ex01
