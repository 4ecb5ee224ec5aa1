// Test harness for to_columns. Input, one case each:
//   run N KEY ABOVE   then N lines "TYPE PRICE STOCK" (TYPE a character, STOCK up to 8
//                     characters, padded with spaces); prints the three column sizes,
//                     then the indices filter_soa(to_columns(...)) returns
//   bench WHICH N SEED   N random events; WHICH is aos or soa: runs that filter inside
//                     run_aos / run_soa (what the checker's cache-miss count covers);
//                     prints "matches checksum nanoseconds"
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "columns.hpp"

namespace {

std::uint64_t next(std::uint64_t& s) {  // splitmix64: a fast, fixed stream of numbers
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void set_stock(ex09::Event& e, const std::string& s) {
    std::memset(e.stock, ' ', 8);
    std::memcpy(e.stock, s.data(), s.size() < 8 ? s.size() : 8);
}

}  // namespace

// Out of line and unmangled, so that valgrind's --toggle-collect counts the filter only.
extern "C" __attribute__((noinline)) std::size_t run_aos(const ex09::Event* ev, std::size_t n,
                                                         std::uint64_t key, std::uint32_t above,
                                                         std::int64_t* out) {
    return ex09::filter_aos(ev, n, key, above, out);
}
extern "C" __attribute__((noinline)) std::size_t run_soa(const ex09::Columns& c,
                                                         std::uint64_t key, std::uint32_t above,
                                                         std::int64_t* out) {
    return ex09::filter_soa(c, key, above, out);
}

int main() {
    std::string kind;
    while (std::cin >> kind) {
        if (kind == "run") {
            std::size_t n;
            std::string key;
            std::uint32_t above;
            std::cin >> n >> key >> above;
            std::vector<ex09::Event> ev(n);
            for (auto& e : ev) {
                std::string type, stock;
                std::cin >> type >> e.price >> stock;
                e.type = static_cast<std::uint8_t>(type[0]);
                set_stock(e, stock);
            }
            ex09::Event probe{};
            set_stock(probe, key);
            const ex09::Columns c = ex09::to_columns(ev.data(), n);
            std::cout << c.type.size() << ' ' << c.stock.size() << ' ' << c.price.size() << '\n';
            std::vector<std::int64_t> out(n + 1);
            const std::size_t k = ex09::filter_soa(c, ex09::stock_key(probe.stock), above,
                                                   out.data());
            for (std::size_t i = 0; i < k && i <= n; ++i) std::cout << out[i] << ' ';
            std::cout << '\n';
        } else if (kind == "bench") {
            std::string which;
            std::size_t n;
            std::uint64_t seed;
            std::cin >> which >> n >> seed;
            const char* names[] = {"AAPL", "MSFT", "NVDA", "TSLA"};
            const char types[] = "AAFEDXUE";
            std::vector<ex09::Event> ev(n);
            for (auto& e : ev) {
                const std::uint64_t r = next(seed);
                e.type = static_cast<std::uint8_t>(types[r % 8]);
                e.price = static_cast<std::uint32_t>((r >> 8) % 2000000);
                set_stock(e, names[(r >> 40) % 4]);
            }
            ex09::Event probe{};
            set_stock(probe, "AAPL");
            const std::uint64_t key = ex09::stock_key(probe.stock);
            const ex09::Columns c = ex09::to_columns(ev.data(), n);  // not timed, not counted
            std::vector<std::int64_t> out(n + 1);
            const auto t0 = std::chrono::steady_clock::now();
            const std::size_t k = which == "aos" ? run_aos(ev.data(), n, key, 1000000, out.data())
                                                 : run_soa(c, key, 1000000, out.data());
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - t0).count();
            std::uint64_t sum = 0;
            for (std::size_t i = 0; i < k && i <= n; ++i) sum += static_cast<std::uint64_t>(out[i]);
            std::cout << k << ' ' << sum << ' ' << ns << '\n';
        }
    }
    return 0;
}
