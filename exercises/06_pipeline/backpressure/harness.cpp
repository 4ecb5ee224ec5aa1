// Test harness for backpressure. Input lines, one case each:
//   fill CAP K       one thread: K pushes (no pops), then pop everything; prints
//                    "accepted received in_order duplicates"
//   wait CAP N       a producer thread pushes fills 0..N-1 with push_waiting; a slower
//                    consumer thread pops; prints "produced received lost out_of_order"
//   drop CAP N       the same with push_or_drop; prints
//                    "produced received dropped out_of_order"
// "lost" counts fills that never arrived; "out_of_order" arrivals that are not larger
// than the one before (an overwritten slot read twice, or a newer fill in an old place).
#include <atomic>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "fill_ring.hpp"

namespace {

ex06::FillRecord make(std::uint64_t i) {
    return {i, i * 7 + 1, static_cast<std::uint32_t>(100 + i % 50),
            static_cast<std::uint32_t>(i % 300 + 1)};
}

void busy(int n) {  // the logger's work per fill: formatting, writing
    for (volatile int i = 0; i < n; ++i) {
    }
}

}  // namespace

int main() {
    std::string kind;
    std::uint64_t cap = 0, n = 0;
    while (std::cin >> kind >> cap >> n) {
        ex06::FillRing<ex06::FillRecord> ring(cap);
        if (kind == "fill") {
            std::uint64_t accepted = 0, received = 0, duplicates = 0;
            bool in_order = true;
            for (std::uint64_t i = 0; i < n; ++i) accepted += ring.try_push(make(i));
            std::vector<bool> seen(n, false);
            ex06::FillRecord f{};
            // A ring can hold at most CAP items: popping more than K means it made some up.
            while (received <= n && ring.try_pop(f)) {
                in_order &= f.seq == received;
                if (f.seq < n) {
                    duplicates += seen[f.seq];
                    seen[f.seq] = true;
                }
                ++received;
            }
            std::cout << accepted << ' ' << received << ' ' << in_order << ' ' << duplicates
                      << '\n';
            continue;
        }
        const bool drop = kind == "drop";
        std::uint64_t received = 0, out_of_order = 0, dropped = 0;
        std::vector<bool> seen(n, false);
        std::atomic<bool> done{false};
        std::thread consumer([&] {
            ex06::FillRecord f{};
            std::uint64_t last = 0;
            bool any = false;
            // Until the producer is done and the ring is empty (not until N arrived: a lost
            // fill would keep such a consumer waiting for ever).
            for (;;) {
                const bool finished = done.load(std::memory_order_acquire);
                if (!ring.try_pop(f)) {
                    if (finished) break;
                    std::this_thread::yield();
                    continue;
                }
                if (any && f.seq <= last) ++out_of_order;
                if (f.seq < n) seen[f.seq] = true;
                last = f.seq;
                any = true;
                ++received;
                busy(200);
            }
        });
        for (std::uint64_t i = 0; i < n; ++i) {
            if (drop)
                ex06::push_or_drop(ring, make(i), dropped);
            else
                ex06::push_waiting(ring, make(i), [] { std::this_thread::yield(); });
        }
        done.store(true, std::memory_order_release);
        consumer.join();
        std::uint64_t lost = 0;
        for (std::uint64_t i = 0; i < n; ++i) lost += !seen[i];
        std::cout << n << ' ' << received << ' ' << (drop ? dropped : lost) << ' '
                  << out_of_order << '\n';
    }
    return 0;
}
