// Test harness for memory_order. Input lines, one case each:
//   threads CAP N   a producer thread passes events 0..N-1 to a consumer thread (each
//                   yields when full / empty); prints "received in_order checksum_ok"
//   rounds CAP R    one thread: R times fill the ring, then empty it; prints "ok" or "bad"
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include "publish_ring.hpp"

namespace {

ex06::Event make(std::uint64_t i) {
    return {i, i * 2654435761u, static_cast<std::uint32_t>(i % 1000 + 1),
            static_cast<std::uint32_t>(100000 + i % 777)};
}

bool same(const ex06::Event& a, const ex06::Event& b) {
    return a.seq == b.seq && a.order_ref == b.order_ref && a.shares == b.shares &&
           a.price == b.price;
}

}  // namespace

int main() {
    std::string kind;
    std::uint64_t cap = 0, n = 0;
    while (std::cin >> kind >> cap >> n) {
        ex06::PublishRing<ex06::Event> ring(cap);
        if (kind == "rounds") {
            std::uint64_t next_in = 0, next_out = 0, pushed = 0, popped = 0;
            bool ok = true;
            ex06::Event e{};
            for (std::uint64_t r = 0; r < n; ++r, pushed = popped = 0) {
                while (ring.try_push(make(next_in))) ++next_in, ++pushed;
                while (ring.try_pop(e)) ok &= same(e, make(next_out++)), ++popped;
                ok &= pushed == cap && popped == cap;
            }
            std::cout << (ok ? "ok" : "bad") << '\n';
        } else {
            std::uint64_t received = 0;
            bool in_order = true, intact = true;
            std::thread consumer([&] {
                ex06::Event e{};
                while (received < n) {
                    if (!ring.try_pop(e)) {
                        std::this_thread::yield();
                        continue;
                    }
                    in_order &= e.seq == received;
                    intact &= same(e, make(e.seq));
                    ++received;
                }
            });
            for (std::uint64_t i = 0; i < n; ++i)
                while (!ring.try_push(make(i))) std::this_thread::yield();
            consumer.join();
            std::cout << received << ' ' << in_order << ' ' << intact << '\n';
        }
    }
    return 0;
}
