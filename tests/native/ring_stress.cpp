// Ring stress, built standalone (optionally with -fsanitize=thread) by tests/test_ring.py
// and `make sanitize-threads`: two threads pass N counting numbers through a small
// SpscRing, so the indices wrap around the capacity many times; the consumer checks
// order and count. Exit status 0 = every item arrived, in order.
//
//   g++ -std=c++20 -O1 -g -fsanitize=thread -I native tests/native/ring_stress.cpp
//   ./a.out [items] [capacity]
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ring.hpp"

int main(int argc, char** argv) {
    const unsigned long long items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
    const std::size_t capacity = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64;
    twinmatch::SpscRing<unsigned long long> ring(capacity);
    unsigned long long received = 0, bad = 0;
    std::thread consumer([&] {
        unsigned long long v;
        while (received < items) {
            if (ring.try_pop(v)) {
                bad += v != received;
                ++received;
            } else {
                std::this_thread::yield();  // 2 cores may be shared: never spin forever
            }
        }
    });
    for (unsigned long long i = 0; i < items; ++i)
        while (!ring.try_push(i)) std::this_thread::yield();
    consumer.join();
    std::printf("items=%llu received=%llu out_of_order=%llu capacity=%zu\n", items, received,
                bad, capacity);
    return received == items && bad == 0 ? 0 : 1;
}
