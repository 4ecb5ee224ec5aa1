// Test harness for op_record: reads a file of raw OPS_DTYPE records (numpy's tobytes())
// whose path is the first line of stdin, and prints what it sees through OpRecord:
//   layout <sizeof> <offset of order_id> <new_order_id> <price> <qty> <op> <side>
//   records <n>                       (or "size_mismatch <file bytes>")
//   <order_id> <new_order_id> <price> <qty> <op> <side>      one line per record
//   sum <sum_buy_limit_qty(records, n)>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "op_record.hpp"

using exercise::OpRecord;

int main() {
    std::string path;
    if (!std::getline(std::cin, path)) return 2;
    std::ifstream file(path, std::ios::binary);
    if (!file) return 3;
    std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());

    std::cout << "layout " << sizeof(OpRecord) << ' ' << offsetof(OpRecord, order_id) << ' '
              << offsetof(OpRecord, new_order_id) << ' ' << offsetof(OpRecord, price) << ' '
              << offsetof(OpRecord, qty) << ' ' << offsetof(OpRecord, op) << ' '
              << offsetof(OpRecord, side) << '\n';
    if (bytes.size() % sizeof(OpRecord) != 0) {
        std::cout << "size_mismatch " << bytes.size() << '\n';
        return 0;
    }
    // Exactly n records on the heap, so AddressSanitizer catches a read past the end.
    std::vector<OpRecord> records(bytes.size() / sizeof(OpRecord));
    if (!bytes.empty()) std::memcpy(records.data(), bytes.data(), bytes.size());
    std::cout << "records " << records.size() << '\n';
    for (const OpRecord& r : records) {
        std::cout << r.order_id << ' ' << r.new_order_id << ' ' << r.price << ' ' << r.qty << ' '
                  << unsigned{r.op} << ' ' << unsigned{r.side} << '\n';
    }
    std::cout << "sum " << exercise::sum_buy_limit_qty(records.data(), records.size()) << '\n';
    return 0;
}
