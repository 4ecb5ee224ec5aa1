// Chapter 8's layouts against each other, built with AddressSanitizer and UBSan
// (tests/test_layouts.py builds and runs it): every layout of native/layouts.hpp gets the
// same random stream (prices clustered and at the extremes, beyond the windows, ids that
// repeat and ids near 2^64) and must give the same result of every operation, the same
// fills, best prices and sizes. The capped layout runs a stream inside its caps (and must
// agree too) and one across them (it must refuse, and nothing may go out of bounds). The
// sink has no spare room before any operation, so every crossing order takes the path
// that counts its fills first, and the sink aborts if an order makes more than it counted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "layouts.hpp"

using namespace twinmatch;
using namespace twinmatch::layouts;

namespace {

struct TightSink {
    std::vector<Fill> fills;
    std::size_t reserved = 0;
    void operator()(const Fill& f) {
        if (fills.size() >= reserved) {
            std::fprintf(stderr, "more fills than reserve_fills counted\n");
            std::abort();
        }
        fills.push_back(f);
    }
    std::size_t room() const { return reserved - fills.size(); }
    void reserve(std::size_t n) {
        reserved = fills.size() + n;
        fills.reserve(reserved);
    }
    void reset() {
        fills.clear();
        reserved = 0;
    }
};

template <class B>
std::vector<std::uint64_t> run(B& book, std::uint64_t seed, int ops, bool inside_caps) {
    static const std::int64_t kPrices[] = {1, 2, 3, 100, 101, 102, 300000, 300001,
                                           4000000000ll, 4294967295ll, 0, 4294967296ll};
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> trace;
    TightSink sink;
    for (int k = 0; k < ops; ++k) {
        int op = int(rng() % 6);
        std::uint64_t id = rng() % 64, new_id = rng() % 64;
        if (!inside_caps && rng() % 50 == 0) id = ~0ull - rng() % 3;
        std::int64_t price = rng() % 3 == 0 ? std::int64_t(90 + rng() % 30) : kPrices[rng() % 12];
        if (inside_caps) price = 1 + std::int64_t(rng() % 40) + (rng() % 2 ? 60 : 0);
        std::int64_t qty = 1 + std::int64_t(rng() % 5);
        if (rng() % 40 == 0) qty = 0;
        Side side = Side(rng() % 2);
        std::uint64_t out = 0;
        Fill fill{};
        Reason r;
        sink.reset();
        switch (op) {
            case 0: r = book.add_limit(id, side, price, qty, sink); break;
            case 1: r = book.add_market(id, side, qty, out, sink); break;
            case 2: r = book.cancel(id, out); break;
            case 3: r = book.reduce(id, qty, out); break;
            case 4: r = book.execute(id, qty, fill); break;
            default: r = book.replace(id, new_id, price, qty, sink);
        }
        trace.push_back(std::uint64_t(r));
        trace.push_back(out);
        trace.push_back(sink.fills.size());
        for (const Fill& f : sink.fills) {
            trace.push_back(f.resting_id);
            trace.push_back(f.qty);
            trace.push_back(f.price);
        }
        std::uint64_t q = 0;
        trace.push_back(book.best(Side::Buy, q));
        trace.push_back(q);
        trace.push_back(book.best(Side::Sell, q));
        trace.push_back(q);
        trace.push_back(book.size());
    }
    return trace;
}

template <class Lay>
std::vector<std::uint64_t> fresh(std::uint64_t seed, int ops, bool inside) {
    LayoutBook<Lay> book(4);
    return run(book, seed, ops, inside);
}

}  // namespace

int main(int argc, char** argv) {
    int ops = argc > 1 ? std::atoi(argv[1]) : 50000;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        for (bool inside : {false, true}) {
            auto want = fresh<MapLayout>(seed, ops, inside);
            bool same = want == fresh<VectorLayout>(seed, ops, inside) &&
                        want == fresh<WindowLayout>(seed, ops, inside) &&
                        want == fresh<Bitmap3Layout>(seed, ops, inside) &&
                        want == fresh<TreapLayout>(seed, ops, inside);
            LayoutBook<CappedLayout> capped(4, LayoutBook<CappedLayout>::kMaxOrders,
                                            Options{inside ? 101u : 1u << 20, 64});
            auto got = run(capped, seed, ops, inside);
            if (inside) same = same && got == want;  // inside its caps: the same book
            if (!same) {
                std::printf("layouts differ: seed %llu, %s caps\n", (unsigned long long)seed,
                            inside ? "inside" : "across");
                return 1;
            }
        }
    }
    std::printf("layouts agree: %d ops x 3 seeds\n", ops);
    return 0;
}
