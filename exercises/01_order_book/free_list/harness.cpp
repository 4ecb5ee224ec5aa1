// Test harness for free_list. It counts every call of the global operator new. Input
// lines, one case each:
//   steady PEAK N SEED   grow to PEAK live orders, then N random releases and acquires
//                        (between PEAK/2 and PEAK live); prints "allocations_in_steady_state
//                        all_intact distinct"
//   reuse                acquire a, b; release a; acquire c: prints "1" if c is a's node
// Orders still live at the end are released to the pool, which frees what it owns.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "order_pool.hpp"

static std::atomic<std::uint64_t> g_allocations{0};

void* operator new(std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

std::uint64_t next(std::uint64_t& s) {  // splitmix64
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

}  // namespace

int main() {
    std::string kind;
    while (std::cin >> kind) {
        ex01::OrderPool pool;
        if (kind == "reuse") {
            ex01::Order* a = pool.acquire(1, 1);
            ex01::Order* b = pool.acquire(2, 2);
            pool.release(a);
            ex01::Order* c = pool.acquire(3, 3);
            std::cout << (c == a) << '\n';
            pool.release(b);
            pool.release(c);
            continue;
        }
        std::uint64_t peak = 0, n = 0, seed = 0;
        std::cin >> peak >> n >> seed;
        std::vector<ex01::Order*> live;
        live.reserve(peak + 1);
        std::uint64_t id = 0;
        for (; id < peak; ++id) live.push_back(pool.acquire(id, static_cast<std::uint32_t>(id)));
        // Warm-up: back down to half, and up again (a pool may grow on the first way up).
        while (live.size() > peak / 2) {
            pool.release(live.back());
            live.pop_back();
        }
        while (live.size() < peak) live.push_back(pool.acquire(id, static_cast<std::uint32_t>(id))), ++id;
        const std::uint64_t before = g_allocations.load();
        std::uint64_t s = seed;
        for (std::uint64_t k = 0; k < n; ++k) {
            const std::uint64_t r = next(s);
            const bool add = live.size() <= peak / 2 || (live.size() < peak && r % 2);
            if (add) {
                live.push_back(pool.acquire(id, static_cast<std::uint32_t>(id)));
                ++id;
            } else {
                const std::size_t i = (r >> 8) % live.size();
                pool.release(live[i]);
                live[i] = live.back();
                live.pop_back();
            }
        }
        const std::uint64_t during = g_allocations.load() - before;
        bool intact = pool.live() == live.size();
        for (ex01::Order* o : live) intact &= o->qty == static_cast<std::uint32_t>(o->id);
        std::vector<ex01::Order*> sorted = live;
        std::sort(sorted.begin(), sorted.end());
        const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
        for (ex01::Order* o : live) pool.release(o);
        std::cout << during << ' ' << intact << ' ' << distinct << '\n';
    }
    return 0;
}
