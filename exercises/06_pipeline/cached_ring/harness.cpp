// Test harness for cached_ring. Input lines, one case each:
//   rounds CAP R      one thread: R times fill the ring (until a push fails), then empty it
//                     (until a pop fails); prints "ok remote_loads" or "bad ..."
//   threads CAP N     two threads pass 0..N-1; prints "received in_order remote_loads"
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include "cached_ring.hpp"

int main() {
    std::string kind;
    std::uint64_t cap = 0, n = 0;
    while (std::cin >> kind >> cap >> n) {
        ex06::CachedRing<std::uint64_t> ring(cap);
        if (kind == "rounds") {
            std::uint64_t next_in = 0, next_out = 0, v = 0;
            bool ok = true;
            for (std::uint64_t r = 0; r < n; ++r) {
                std::uint64_t pushed = 0, popped = 0;
                while (ring.try_push(next_in)) ++next_in, ++pushed;
                while (ring.try_pop(v)) ok &= v == next_out++, ++popped;
                ok &= pushed == cap && popped == cap;
            }
            std::cout << (ok ? "ok " : "bad ") << ring.remote_loads() << '\n';
        } else {
            std::uint64_t received = 0;
            bool in_order = true;
            std::thread consumer([&] {
                std::uint64_t v;
                while (received < n) {
                    if (ring.try_pop(v)) in_order &= v == received++;
                    else std::this_thread::yield();
                }
            });
            for (std::uint64_t i = 0; i < n; ++i)
                while (!ring.try_push(i)) std::this_thread::yield();
            consumer.join();
            std::cout << received << ' ' << in_order << ' ' << ring.remote_loads() << '\n';
        }
    }
    return 0;
}
