// 06_pipeline/cached_ring: an SPSC ring that reads the other thread's index only when it
// must. remote_loads() counts those reads (each one pulls a cache line from the other
// core); the checker counts them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ex06 {

template <class T>
class CachedRing {
public:
    explicit CachedRing(std::size_t capacity)  // a power of two, >= 2
        : mask_(capacity - 1), slots_(std::make_unique<T[]>(capacity)) {}

    bool try_push(const T& item) {  // producer thread only
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        // TODO: this reads the consumer's index on every push. Keep a copy of it in
        // head_cache_ and read head_ again only when the copy says the ring is full.
        const std::uint64_t head = head_.load(std::memory_order_acquire);
        ++producer_remote_;
        if (tail - head > mask_) return false;
        slots_[tail & mask_] = item;
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    bool try_pop(T& item) {  // consumer thread only
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        // TODO: the same on this side, with tail_cache_.
        const std::uint64_t tail = tail_.load(std::memory_order_acquire);
        ++consumer_remote_;
        if (head == tail) return false;
        item = slots_[head & mask_];
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

    // Reads of the other side's index, both threads together (call after they joined).
    std::uint64_t remote_loads() const { return producer_remote_ + consumer_remote_; }

private:
    alignas(64) std::atomic<std::uint64_t> head_{0};  // written by the consumer
    std::uint64_t tail_cache_ = 0;                    // the consumer's copy of tail_
    std::uint64_t consumer_remote_ = 0;
    alignas(64) std::atomic<std::uint64_t> tail_{0};  // written by the producer
    std::uint64_t head_cache_ = 0;                    // the producer's copy of head_
    std::uint64_t producer_remote_ = 0;
    alignas(64) const std::uint64_t mask_;
    std::unique_ptr<T[]> slots_;
};

}  // namespace ex06
