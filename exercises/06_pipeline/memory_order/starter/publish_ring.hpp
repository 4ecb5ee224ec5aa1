// 06_pipeline/memory_order: an SPSC ring whose indices publish the slots (starter).
//
// It passes every item in order on most runs, and it is wrong: ThreadSanitizer, which the
// checker runs it under, says why.
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

    // TODO: every atomic operation below is memory_order_relaxed, which orders nothing
    // but the atomic itself: the slot written before tail_ moves is not promised to be
    // visible to the consumer that sees tail_ move, nor is the consumer's read of a slot
    // promised to be done before the producer sees head_ move and reuses it. Give each
    // operation the weakest order that makes the slots safe (which loads need which
    // stores?), and say why in a comment.
    bool try_push(const T& item) {  // producer thread only
        const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        if (tail - head_.load(std::memory_order_relaxed) > mask_) return false;
        slots_[tail & mask_] = item;
        tail_.store(tail + 1, std::memory_order_relaxed);
        return true;
    }

    bool try_pop(T& item) {  // consumer thread only
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        if (head == tail_.load(std::memory_order_relaxed)) return false;
        item = slots_[head & mask_];
        head_.store(head + 1, std::memory_order_relaxed);
        return true;
    }

private:
    alignas(64) std::atomic<std::uint64_t> head_{0};  // written by the consumer
    alignas(64) std::atomic<std::uint64_t> tail_{0};  // written by the producer
    alignas(64) const std::uint64_t mask_;
    std::unique_ptr<T[]> slots_;
};

}  // namespace ex06
