// Test harness for ref_hash. Input: one case per line,
//   CAP N ref_1 .. ref_N M key_1 .. key_M
// inserts ref_i with value i, then finds each key. Prints one line per case:
//   inserted(0/1 per insert, as a string) insert_probes found_values... find_probes
// (a value is -1 for a key not found).
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "ref_table.hpp"

int main() {
    std::size_t cap = 0, n = 0, m = 0;
    while (std::cin >> cap >> n) {
        ex05::RefTable table(cap);
        std::string inserted;
        for (std::size_t i = 0; i < n; ++i) {
            std::uint64_t ref = 0;
            std::cin >> ref;
            inserted += table.insert(ref, static_cast<std::uint32_t>(i)) ? '1' : '0';
        }
        std::cout << (inserted.empty() ? "-" : inserted) << ' ' << table.probes();
        table.reset_probes();
        std::cin >> m;
        for (std::size_t i = 0; i < m; ++i) {
            std::uint64_t key = 0;
            std::cin >> key;
            const std::uint32_t* v = table.find(key);
            std::cout << ' ' << (v ? static_cast<long long>(*v) : -1LL);
        }
        std::cout << ' ' << table.probes() << '\n';
    }
    return 0;
}
