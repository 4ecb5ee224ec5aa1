// A lock-free single-producer single-consumer ring: the optimized twin of queue.Queue.
//
// One thread pushes, one other thread pops; nothing else may touch the ring. No lock, no
// system call, no allocation after construction: a push is a store of the item and one
// release store of an index; a pop is a load of the item and one release store of the
// other index. Chapter 6 builds it up piece by piece.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace twinmatch {

// 64 bytes is the cache line on x86-64 and most ARM cores. (C++17's
// std::hardware_destructive_interference_size says the same, but GCC warns that its
// value may change between compiler versions, which is an ABI hazard in a header.)
inline constexpr std::size_t kCacheLine = 64;

// --8<-- [start:ring]
template <class T>
class SpscRing {
    static_assert(std::is_trivially_copyable_v<T>, "items are copied with plain stores");

public:
    // capacity: a power of two, so `index & mask` replaces a division.
    explicit SpscRing(std::size_t capacity)
        : mask_(capacity - 1), slots_(std::make_unique<T[]>(capacity)) {
        if (capacity < 2 || (capacity & (capacity - 1)) != 0)
            throw std::invalid_argument("ring capacity must be a power of two >= 2");
    }
    SpscRing(const SpscRing&) = delete;
    SpscRing& operator=(const SpscRing&) = delete;

    std::size_t capacity() const { return mask_ + 1; }

    // Producer thread only. False when full (the caller decides: wait, or drop).
    bool try_push(const T& item) {
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);  // ours
        if (tail - head_cache_ > mask_) {            // looks full: refresh our copy
            head_cache_ = head_.load(std::memory_order_acquire);
            if (tail - head_cache_ > mask_) return false;
        }
        slots_[tail & mask_] = item;
        // release: the item's bytes are visible before the consumer sees the new tail.
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    // Consumer thread only. False when empty.
    bool try_pop(T& item) {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);  // ours
        if (head == tail_cache_) {                   // looks empty: refresh our copy
            tail_cache_ = tail_.load(std::memory_order_acquire);
            if (head == tail_cache_) return false;
        }
        item = slots_[head & mask_];
        // release: we finished reading the slot before the producer may overwrite it.
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

    // Either thread, for reports: a snapshot that may be stale by the time it returns.
    std::size_t size_approx() const {
        return static_cast<std::size_t>(tail_.load(std::memory_order_acquire) -
                                        head_.load(std::memory_order_acquire));
    }

private:
    // The indices count up forever (2^64 items would take centuries); the slot is
    // index & mask. Each index sits on its own cache line with the *other* side's cached
    // copy of the opposite index, so a push writes only producer lines and a pop only
    // consumer lines. Sharing one line would bounce it between the cores on every item:
    // false sharing, measured in chapter 6.
    alignas(kCacheLine) std::atomic<std::uint64_t> head_{0};  // written by the consumer
    std::uint64_t tail_cache_ = 0;                           // consumer's copy of tail_
    alignas(kCacheLine) std::atomic<std::uint64_t> tail_{0};  // written by the producer
    std::uint64_t head_cache_ = 0;                           // producer's copy of head_
    alignas(kCacheLine) const std::uint64_t mask_;
    std::unique_ptr<T[]> slots_;
};
// --8<-- [end:ring]

}  // namespace twinmatch
