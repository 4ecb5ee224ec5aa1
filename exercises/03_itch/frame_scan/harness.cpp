// Test harness for frame_scan. Input lines, one case each:
//   scan PATH        prints "messages adds shares_added short_adds end" for the file
//   bench PATH R     scans the file R times inside run_scan (the function the checker's
//                    instruction count covers); prints the same, then the fastest scan's ns
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "frame_scan.hpp"

// Out of line and unmangled, so that `valgrind --tool=callgrind --toggle-collect=run_scan`
// counts the scans and nothing else (not reading the file, not starting the program).
extern "C" __attribute__((noinline)) ex03::Totals run_scan(const std::uint8_t* p,
                                                          std::size_t n) {
    return ex03::scan(p, n);
}

int main() {
    std::string kind, path;
    while (std::cin >> kind >> path) {
        std::ifstream in(path, std::ios::binary);
        std::vector<std::uint8_t> buf((std::istreambuf_iterator<char>(in)),
                                      std::istreambuf_iterator<char>());
        long repeat = 1;
        if (kind == "bench") std::cin >> repeat;
        ex03::Totals t;
        long long best = -1;
        for (long r = 0; r < repeat; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            t = run_scan(buf.data(), buf.size());
            auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - t0).count();
            if (best < 0 || ns < best) best = ns;
        }
        std::cout << t.messages << ' ' << t.adds << ' ' << t.shares_added << ' '
                  << t.short_adds << ' ' << t.end;
        if (kind == "bench") std::cout << ' ' << best;
        std::cout << '\n';
    }
    return 0;
}
