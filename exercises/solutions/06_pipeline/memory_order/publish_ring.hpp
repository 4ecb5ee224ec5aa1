// 06_pipeline/memory_order: an SPSC ring whose indices publish the slots (reference
// solution).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ex06 {

// What the parser hands the engine: plain data, written and read without atomics. Only
// the indices are atomic; their memory orders are what make the slots safe to read.
struct Event {
    std::uint64_t seq;
    std::uint64_t order_ref;
    std::uint32_t shares;
    std::uint32_t price;
};

template <class T>
class PublishRing {
public:
    explicit PublishRing(std::size_t capacity)  // a power of two, >= 2
        : mask_(capacity - 1), slots_(std::make_unique<T[]>(capacity)) {}

    bool try_push(const T& item) {  // producer thread only
        // Our own index: only this thread writes it, so relaxed reads our last store.
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        // acquire pairs with the consumer's release of head_: once we see that it moved
        // past a slot, its read of that slot is finished, and we may overwrite it.
        if (tail - head_.load(std::memory_order_acquire) > mask_) return false;
        slots_[tail & mask_] = item;
        // release: the slot's contents are visible to whoever acquires this tail value.
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    bool try_pop(T& item) {  // consumer thread only
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        // acquire pairs with the producer's release of tail_: the slot is written.
        if (head == tail_.load(std::memory_order_acquire)) return false;
        item = slots_[head & mask_];
        // release: our read of the slot happens before the producer reuses it.
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

private:
    alignas(64) std::atomic<std::uint64_t> head_{0};  // written by the consumer
    alignas(64) std::atomic<std::uint64_t> tail_{0};  // written by the producer
    alignas(64) const std::uint64_t mask_;
    std::unique_ptr<T[]> slots_;
};

}  // namespace ex06
