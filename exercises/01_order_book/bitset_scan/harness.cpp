// Test harness for bitset_scan: reads cases from stdin, prints one answer per line.
// Input: the number of cases, then per case n followed by n words (decimal).
#include <cstdint>
#include <iostream>
#include <vector>

#include "highest_set.hpp"

int main() {
    int cases = 0;
    std::cin >> cases;
    for (int c = 0; c < cases; ++c) {
        int n = 0;
        std::cin >> n;
        // Exactly n words on the heap, so AddressSanitizer catches a read past the end.
        std::vector<std::uint64_t> words(static_cast<std::size_t>(n));
        for (auto& w : words) std::cin >> w;
        std::cout << highest_set(words.data(), n) << '\n';
    }
    return std::cin.fail() ? 2 : 0;
}
