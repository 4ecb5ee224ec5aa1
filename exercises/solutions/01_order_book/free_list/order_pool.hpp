// 01_order_book/free_list: order nodes from a pool, reused through a free list, so a book
// in steady state allocates nothing (reference solution).
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

class OrderPool {
public:
    static constexpr std::size_t kBlock = 4096;  // nodes per block

    // A node holding (id, qty): the most recently released one if there is one (its cache
    // lines are likely still in the cache), else a new one from the current block. Only
    // when a block is used up does the pool allocate, another block.
    Order* acquire(std::uint64_t id, std::uint32_t qty) {
        Order* o = free_;
        if (o != nullptr) {
            free_ = o->next;
        } else {
            if (used_ == kBlock || blocks_.empty()) {
                blocks_.push_back(std::make_unique<Order[]>(kBlock));
                used_ = 0;
            }
            o = &blocks_.back()[used_++];
        }
        *o = Order{id, qty, 0, nullptr};
        ++live_;
        return o;
    }

    // The node goes on the front of the free list: no memory is returned, none is freed.
    void release(Order* o) {
        o->next = free_;
        free_ = o;
        --live_;
    }

    std::size_t live() const { return live_; }

private:
    std::vector<std::unique_ptr<Order[]>> blocks_;  // nodes never move: pointers stay valid
    std::size_t used_ = 0;                          // nodes handed out of the last block
    Order* free_ = nullptr;                         // released nodes, newest first
    std::size_t live_ = 0;
};

}  // namespace ex01
