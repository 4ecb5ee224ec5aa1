// 06_pipeline/backpressure: the engine-to-logger ring, which must never lose a fill it
// accepted (reference solution).
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

    // false when the ring is full: the item was not taken, and the caller decides (wait
    // and retry: backpressure; or count it as dropped). A full ring never overwrites.
    bool try_push(const T& item) {  // producer thread only
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        if (tail - head_.load(std::memory_order_acquire) > mask_) return false;
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
    while (!ring.try_push(item)) wait();
}

template <class T>
bool push_or_drop(FillRing<T>& ring, const T& item, std::uint64_t& dropped) {
    if (ring.try_push(item)) return true;
    ++dropped;
    return false;
}

}  // namespace ex06
