// Test harness for flat_levels. Input lines, one case each:
//   ops LO SPAN K  then K operations, one per line: "a PRICE QTY" (add), "r PRICE QTY"
//                  (remove), "b" (best: prints it), "g PRICE" (at: prints it)
//   bench LO SPAN N SEED   N operations of a book near a drifting touch, best() after
//                  each, inside run_levels; prints "checksum nanoseconds"
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "flat_levels.hpp"

namespace {

struct Resting {
    std::uint32_t price;
    std::uint64_t qty;
};

std::uint64_t next(std::uint64_t& s) {  // splitmix64: a fast, fixed stream of numbers
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

}  // namespace

// Out of line, so that its time is the levels' work and the stream's, nothing else.
__attribute__((noinline)) std::uint64_t run_levels(ex01::Levels& levels,
                                                   std::vector<Resting>& resting,
                                                   std::uint64_t n, std::uint64_t seed) {
    std::uint64_t sum = 0, s = seed;
    std::int64_t touch = levels.span() / 2;
    for (std::uint64_t k = 0; k < n; ++k) {
        const std::uint64_t r = next(s);
        if (r % 64 == 0) touch += static_cast<std::int64_t>(r >> 8) % 3 - 1;  // drift
        if (touch < 200) touch = 200;
        if (touch > levels.span() - 200) touch = levels.span() - 200;
        if (resting.size() < 64 || (r >> 40) % 100 < 52) {
            const auto price = static_cast<std::uint32_t>(
                levels.lo() + touch - static_cast<std::int64_t>((r >> 16) % 120));
            const std::uint64_t qty = 1 + (r >> 32) % 500;
            levels.add(price, qty);
            resting.push_back({price, qty});
        } else {
            const std::size_t i = (r >> 16) % resting.size();
            levels.remove(resting[i].price, resting[i].qty);
            resting[i] = resting.back();
            resting.pop_back();
        }
        sum += levels.best();
    }
    return sum;
}

int main() {
    std::string kind;
    std::uint32_t lo = 0, span = 0;
    while (std::cin >> kind >> lo >> span) {
        ex01::Levels levels(lo, span);
        if (kind == "ops") {
            std::uint64_t k = 0;
            std::cin >> k;
            for (std::uint64_t i = 0; i < k; ++i) {
                std::string op;
                std::uint32_t price = 0;
                std::uint64_t qty = 0;
                std::cin >> op;
                if (op == "b") {
                    std::cout << levels.best() << '\n';
                } else if (op == "g") {
                    std::cin >> price;
                    std::cout << levels.at(price) << '\n';
                } else {
                    std::cin >> price >> qty;
                    if (op == "a") levels.add(price, qty);
                    else levels.remove(price, qty);
                }
            }
        } else {
            std::uint64_t n = 0, seed = 0;
            std::cin >> n >> seed;
            std::vector<Resting> resting;
            resting.reserve(n);
            const auto t0 = std::chrono::steady_clock::now();
            const std::uint64_t sum = run_levels(levels, resting, n, seed);
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - t0).count();
            std::cout << sum << ' ' << ns << '\n';
        }
    }
    return 0;
}
