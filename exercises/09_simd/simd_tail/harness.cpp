// Test harness for simd_tail. Input, one case each:
//   cpu                 prints 1 if this CPU has AVX2, else 0
//   sweep N KEY ABOVE   then N lines "TYPE PRICE STOCK"; for every start <= stop <= N
//                       prints "start stop: " and the indices filter_avx2 returns
//   bench WHICH N SEED  N random rows in columns; runs WHICH (scalar or avx2) 5 times
//                       inside run_filter; prints "matches checksum fastest_nanoseconds"
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "simd_filter.hpp"

namespace {

std::uint64_t next(std::uint64_t& s) {  // splitmix64: a fast, fixed stream of numbers
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

std::uint64_t key_of(const std::string& s) {
    char b[8];
    std::memset(b, ' ', 8);
    std::memcpy(b, s.data(), s.size() < 8 ? s.size() : 8);
    std::uint64_t k;
    std::memcpy(&k, b, 8);
    return k;
}

// Exactly n entries each, so that AddressSanitizer sees any read past the end.
struct Columns {
    std::vector<std::uint8_t> type;
    std::vector<std::uint64_t> stock;
    std::vector<std::uint32_t> price;
};

}  // namespace

extern "C" __attribute__((noinline)) std::size_t run_filter(bool simd, const Columns& c,
                                                            std::size_t start, std::size_t stop,
                                                            std::uint64_t key,
                                                            std::uint32_t above,
                                                            std::int64_t* out) {
    return simd ? ex09::filter_avx2(c.type.data(), c.stock.data(), c.price.data(), start,
                                    stop, key, above, out)
                : ex09::filter_scalar(c.type.data(), c.stock.data(), c.price.data(), start,
                                      stop, key, above, out);
}

int main() {
    std::string kind;
    while (std::cin >> kind) {
        if (kind == "cpu") {
            std::cout << (__builtin_cpu_supports("avx2") ? 1 : 0) << '\n';
        } else if (kind == "sweep") {
            std::size_t n;
            std::string key;
            std::uint32_t above;
            std::cin >> n >> key >> above;
            Columns c{std::vector<std::uint8_t>(n), std::vector<std::uint64_t>(n),
                      std::vector<std::uint32_t>(n)};
            for (std::size_t i = 0; i < n; ++i) {
                std::string type, stock;
                std::cin >> type >> c.price[i] >> stock;
                c.type[i] = static_cast<std::uint8_t>(type[0]);
                c.stock[i] = key_of(stock);
            }
            std::vector<std::int64_t> out(n + 1);
            for (std::size_t start = 0; start <= n; ++start) {
                for (std::size_t stop = start; stop <= n; ++stop) {
                    const std::size_t k = run_filter(true, c, start, stop, key_of(key), above,
                                                     out.data());
                    std::cout << start << ' ' << stop << ':';
                    for (std::size_t j = 0; j < k && j <= n; ++j) std::cout << ' ' << out[j];
                    std::cout << '\n';
                }
            }
        } else if (kind == "bench") {
            std::string which;
            std::size_t n;
            std::uint64_t seed;
            std::cin >> which >> n >> seed;
            const char* names[] = {"AAPL", "MSFT", "NVDA", "TSLA"};
            const char types[] = "AAFEDXUE";
            Columns c{std::vector<std::uint8_t>(n), std::vector<std::uint64_t>(n),
                      std::vector<std::uint32_t>(n)};
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint64_t r = next(seed);
                c.type[i] = static_cast<std::uint8_t>(types[r % 8]);
                c.price[i] = static_cast<std::uint32_t>(r >> 32);
                c.stock[i] = key_of(names[(r >> 20) % 16 == 0 ? 0 : 1 + (r >> 24) % 3]);
            }
            std::vector<std::int64_t> out(n + 1);
            std::size_t k = 0;
            long long best = -1;
            for (int r = 0; r < 5; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                k = run_filter(which == "avx2", c, 0, n, key_of("AAPL"), 1u << 31, out.data());
                const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - t0).count();
                if (best < 0 || ns < best) best = ns;
            }
            std::uint64_t sum = 0;
            for (std::size_t j = 0; j < k && j <= n; ++j) sum += static_cast<std::uint64_t>(out[j]);
            std::cout << k << ' ' << sum << ' ' << best << '\n';
        }
    }
    return 0;
}
