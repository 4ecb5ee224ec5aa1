// Test harness for node_align. Input lines, one case each:
//   layout            prints "sizeof alignof offset(order_id) offset(side)"
//   pools K           makes pools of 1..K nodes (plus some scratch allocations between
//                     them, as a real program has); prints "pools misaligned nodes straddling"
//   walk N R          one pool of N nodes, R passes touching every node in a scattered
//                     order (for `valgrind --tool=cachegrind`); prints a checksum
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "node_pool.hpp"

namespace {

bool straddles(const void* p, std::size_t size) {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    return a / ex01::kCacheLine != (a + size - 1) / ex01::kCacheLine;
}

}  // namespace

int main() {
    std::string kind;
    while (std::cin >> kind) {
        if (kind == "layout") {
            std::cout << sizeof(ex01::Node) << ' ' << alignof(ex01::Node) << ' '
                      << offsetof(ex01::Node, order_id) << ' ' << offsetof(ex01::Node, side)
                      << '\n';
        } else if (kind == "pools") {
            std::size_t k = 0;
            std::cin >> k;
            std::vector<std::unique_ptr<ex01::NodePool>> pools;
            std::vector<std::unique_ptr<char[]>> scratch;
            std::size_t misaligned = 0, nodes = 0, straddling = 0;
            for (std::size_t n = 1; n <= k; ++n) {
                scratch.emplace_back(new char[n % 7 * 8 + 8]);
                pools.emplace_back(std::make_unique<ex01::NodePool>(n));
                ex01::NodePool& pool = *pools.back();
                if (reinterpret_cast<std::uintptr_t>(pool.data()) % ex01::kCacheLine != 0)
                    ++misaligned;
                for (std::size_t i = 0; i < pool.capacity(); ++i) {
                    ex01::Node& node = pool.data()[i];
                    node = ex01::Node{};
                    node.order_id = i;
                    ++nodes;
                    straddling += straddles(&node, sizeof node);
                }
            }
            std::cout << pools.size() << ' ' << misaligned << ' ' << nodes << ' '
                      << straddling << '\n';
        } else if (kind == "walk") {
            std::size_t n = 0, rounds = 0;
            std::cin >> n >> rounds;
            ex01::NodePool pool(n);
            for (std::size_t i = 0; i < n; ++i) {
                pool.data()[i] = ex01::Node{};
                pool.data()[i].qty = static_cast<std::uint32_t>(i);
            }
            std::uint64_t sum = 0;
            for (std::size_t r = 0; r < rounds; ++r)
                for (std::size_t i = 0, j = 0; i < n; ++i, j = (j + 7919) % n) {
                    ex01::Node& node = pool.data()[j];
                    sum += node.qty + node.order_id + node.next;
                    node.order_id += 1;
                }
            std::cout << sum << '\n';
        }
    }
    return 0;
}
