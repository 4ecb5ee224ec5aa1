// 06_pipeline/backpressure: the engine-to-logger ring, which must never lose a fill it
// accepted (starter).
//
// It never refuses an item. Run the checker: it counts what that costs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ex06 {

struct FillRecord {
    std::uint64_t seq;  // the n-th fill the engine produced
    std::uint64_t resting_id;
    std::uint32_t price;
    std::uint32_t qty;
};

template <class T>
class FillRing {
public:
    explicit FillRing(std::size_t capacity)  // a power of two, >= 2
        : mask_(capacity - 1), slots_(std::make_unique<T[]>(capacity)) {}

    // Meant to return false when the ring is full (the item not taken), so that the
    // caller can wait and retry, or count a drop.
    // TODO: it never looks at head_, so a full ring overwrites the oldest fill the
    // logger has not read yet, and says nothing. Refuse the item when the ring is full.
    bool try_push(const T& item) {  // producer thread only
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        slots_[tail & mask_] = item;
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    bool try_pop(T& item) {  // consumer thread only
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        if (head == tail_.load(std::memory_order_acquire)) return false;
        item = slots_[head & mask_];
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

private:
    alignas(64) std::atomic<std::uint64_t> head_{0};  // written by the consumer
    alignas(64) std::atomic<std::uint64_t> tail_{0};  // written by the producer
    alignas(64) const std::uint64_t mask_;
    std::unique_ptr<T[]> slots_;
};

// The producer's side of the two policies. Backpressure: wait until there is room (the
// engine slows to the logger's pace, and nothing is lost). Drop: never wait, and count
// every fill the ring had no room for, so that logged + dropped == produced.
template <class T, class Wait>
void push_waiting(FillRing<T>& ring, const T& item, Wait wait) {
    // TODO: wait() and try again until the ring takes the item.
    ring.try_push(item);
    (void)wait;
}

template <class T>
bool push_or_drop(FillRing<T>& ring, const T& item, std::uint64_t& dropped) {
    // TODO: count the item in `dropped` when the ring refuses it.
    (void)dropped;
    return ring.try_push(item);
}

}  // namespace ex06
