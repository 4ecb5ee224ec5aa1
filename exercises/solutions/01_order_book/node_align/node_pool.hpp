// 01_order_book/node_align: 32-byte order nodes, two to a cache line (reference solution).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace ex01 {

// One resting order. The widest members first: a member is placed at the next multiple
// of its alignment, so 8-byte, then 4-byte, then 1-byte members leave no holes.
struct Node {
    std::uint64_t order_id;
    std::uint32_t qty;
    std::uint32_t price;
    std::uint32_t prev;   // neighbours in the level's FIFO: indices into the pool
    std::uint32_t next;
    std::uint32_t level;  // index of the price level
    std::uint8_t side;    // 0 buy, 1 sell
    std::uint8_t flags;
};
static_assert(sizeof(Node) == 32, "two nodes to a 64-byte cache line");

inline constexpr std::size_t kCacheLine = 64;

// A fixed array of nodes. It starts on a cache-line boundary: with 32-byte nodes, node i
// then fills exactly one half of one line, and no node spans two.
class NodePool {
public:
    explicit NodePool(std::size_t capacity)
        : nodes_(static_cast<Node*>(::operator new(capacity * sizeof(Node) + 1,
                                                   std::align_val_t{kCacheLine}))),
          capacity_(capacity) {}
    ~NodePool() { ::operator delete(nodes_, std::align_val_t{kCacheLine}); }
    NodePool(const NodePool&) = delete;
    NodePool& operator=(const NodePool&) = delete;

    Node* data() { return nodes_; }
    std::size_t capacity() const { return capacity_; }

private:
    Node* nodes_;
    std::size_t capacity_;
};

}  // namespace ex01
