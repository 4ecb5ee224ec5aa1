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
#include <string>
#include <type_traits>

namespace twinmatch {

// 64 bytes is the cache line on x86-64 and most ARM cores. (C++17's
// std::hardware_destructive_interference_size says the same, but GCC warns that its
// value may change between compiler versions, which is an ABI hazard in a header.)
inline constexpr std::size_t kCacheLine = 64;

// The largest ring: 2^24 slots (1 GiB of 64-byte events). contract/pipeline.py
// says the same (RING_CAPACITY_MAX) and both twins check it before allocating anything.
inline constexpr std::size_t kRingCapacityMax = std::size_t{1} << 24;

// capacity: a power of two, so `index & mask` replaces a division. Checked before the
// slots are allocated, so a bad capacity never costs a huge allocation first.
inline std::size_t checked_ring_capacity(std::size_t capacity, const char* name = "ring capacity") {
    if (capacity < 2 || capacity > kRingCapacityMax || (capacity & (capacity - 1)) != 0)
        throw std::invalid_argument(std::string(name) + " must be a power of two in 2..16,777,216, got " +
                                    std::to_string(capacity));
    return capacity;
}

// --8<-- [start:ring]
// CachedIndices and OwnLines are two of the decisions below, switchable for chapter 6's
// ablation benchmark (ring_stress_variant); the pipeline uses the defaults, both on.
template <class T, bool CachedIndices = true, bool OwnLines = true>
class SpscRing {
    static_assert(std::is_trivially_copyable_v<T>, "items are copied with plain stores");

public:
    explicit SpscRing(std::size_t capacity, const char* name = "ring capacity")
        : mask_(checked_ring_capacity(capacity, name) - 1), slots_(allocate(capacity)) {}
    SpscRing(const SpscRing&) = delete;
    SpscRing& operator=(const SpscRing&) = delete;

    std::size_t capacity() const { return mask_ + 1; }

    // Producer thread only. False when full (the caller decides: wait, or drop).
    bool try_push(const T& item) {
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);  // ours
        if constexpr (CachedIndices) {
            if (tail - head_cache_ > mask_) {            // looks full: refresh our copy
                head_cache_ = head_.load(std::memory_order_acquire);
                if (tail - head_cache_ > mask_) return false;
            }
        } else if (tail - head_.load(std::memory_order_acquire) > mask_) {
            return false;  // without the copy: the consumer's line, read on every push
        }
        slots_[tail & mask_] = item;
        // release: the item's bytes are visible before the consumer sees the new tail.
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    // Consumer thread only. False when empty.
    bool try_pop(T& item) {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);  // ours
        if constexpr (CachedIndices) {
            if (head == tail_cache_) {                   // looks empty: refresh our copy
                tail_cache_ = tail_.load(std::memory_order_acquire);
                if (head == tail_cache_) return false;
            }
        } else if (head == tail_.load(std::memory_order_acquire)) {
            return false;
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
    // false sharing (chapter 6 measures it on the pipeline's per-stage counters).
    // (Without OwnLines, all of it packed together: one line, bounced between the cores.)
    static constexpr std::size_t kLine = OwnLines ? kCacheLine : alignof(std::uint64_t);
    alignas(kLine) std::atomic<std::uint64_t> head_{0};  // written by the consumer
    std::uint64_t tail_cache_ = 0;                      // consumer's copy of tail_
    alignas(kLine) std::atomic<std::uint64_t> tail_{0};  // written by the producer
    std::uint64_t head_cache_ = 0;                      // producer's copy of head_
    alignas(kLine) const std::uint64_t mask_;

    // The slots start on a cache line boundary (operator new with an alignment), so a
    // 64-byte item fills exactly one line instead of straddling two.
    struct AlignedDelete {
        void operator()(T* p) const { ::operator delete[](p, std::align_val_t{kCacheLine}); }
    };
    static T* allocate(std::size_t n) {
        T* p = static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{kCacheLine}));
        std::uninitialized_value_construct_n(p, n);  // zeroed; trivial: nothing to destroy
        return p;
    }
    std::unique_ptr<T[], AlignedDelete> slots_;

public:
    // Where the slots start (tests check the alignment).
    const void* slots_address() const { return slots_.get(); }
};
// --8<-- [end:ring]

}  // namespace twinmatch
