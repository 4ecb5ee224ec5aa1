// 01_order_book/node_align: 32-byte order nodes, two to a cache line (starter).
//
// This pool works, and every node in it is in the wrong place: run the checker and it
// counts how many nodes straddle two cache lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace ex01 {

// One resting order.
// TODO: the members hold 30 bytes of data, yet sizeof(Node) is 40. Reorder them so the
// struct is 32 bytes, and static_assert it.
struct Node {
    std::uint32_t qty;
    std::uint8_t side;    // 0 buy, 1 sell
    std::uint64_t order_id;
    std::uint32_t price;
    std::uint8_t flags;
    std::uint32_t prev;   // neighbours in the level's FIFO: indices into the pool
    std::uint32_t next;
    std::uint32_t level;  // index of the price level
};

inline constexpr std::size_t kCacheLine = 64;

// A fixed array of nodes.
// TODO: make the array start on a kCacheLine boundary. std::malloc promises only 16
// bytes (alignof(std::max_align_t)). Whatever allocates it, free it with its partner.
class NodePool {
public:
    explicit NodePool(std::size_t capacity)
        : nodes_(static_cast<Node*>(std::malloc(capacity * sizeof(Node) + 1))),
          capacity_(capacity) {
        if (nodes_ == nullptr) throw std::bad_alloc();
    }
    ~NodePool() { std::free(nodes_); }
    NodePool(const NodePool&) = delete;
    NodePool& operator=(const NodePool&) = delete;

    Node* data() { return nodes_; }
    std::size_t capacity() const { return capacity_; }

private:
    Node* nodes_;
    std::size_t capacity_;
};

}  // namespace ex01
