// Chapter 1's steps against each other, built with AddressSanitizer and UBSan
// (tests/test_book_steps.py builds and runs it): every step of native/book.hpp, from the
// flat array to Book, gets the same random stream (a 64-level window, so far prices and
// window moves are constant, and ids that collide) and must give the same result of every
// operation, the same best prices and sizes after it, and the same fills. Any undefined
// behaviour in a step's own code (the level scan, the queue free list) stops the run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "book.hpp"

using namespace twinmatch;

namespace {

struct Sink {
    std::vector<Fill>* fills;
    void operator()(const Fill& f) const { fills->push_back(f); }
};

template <std::uint32_t Steps>
std::vector<std::uint64_t> run(std::uint64_t seed, int ops) {
    BasicBook<Steps> book(64, 4);
    std::mt19937_64 rng(seed);
    std::vector<Fill> fills;
    Sink sink{&fills};
    std::vector<std::uint64_t> trace;
    for (int k = 0; k < ops; ++k) {
        std::uint64_t id = rng() % 300;
        int op = static_cast<int>(rng() % 6);
        Side side = Side(rng() % 2);
        std::int64_t price = 1000 + static_cast<std::int64_t>(rng() % 200) - 100;
        if (rng() % 50 == 0) price = static_cast<std::int64_t>(rng() % 0xFFFF'FFFFull);
        std::int64_t qty = 1 + static_cast<std::int64_t>(rng() % 20);
        std::uint64_t out = 0;
        Reason r;
        if (op < 3) r = book.add_limit(id, side, price, qty, sink);
        else if (op == 3) r = book.cancel(id, out);
        else if (op == 4) r = book.reduce(id, 1, out);
        else r = book.replace(id, rng() % 300, price, qty, sink);
        std::uint64_t bid_qty = 0, ask_qty = 0;
        std::uint32_t bid = book.best(Side::Buy, bid_qty), ask = book.best(Side::Sell, ask_qty);
        trace.insert(trace.end(), {std::uint64_t(r), out, bid, bid_qty, ask, ask_qty, book.size()});
    }
    for (const Fill& f : fills) trace.insert(trace.end(), {f.resting_id, f.aggressor_id, f.price, f.qty});
    return trace;
}

}  // namespace

int main(int argc, char** argv) {
    int ops = argc > 1 ? std::atoi(argv[1]) : 200000;
    static_assert(kBookStepCount == 6);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        auto want = run<kBookSteps[5].steps>(seed, ops);
        bool same = run<kBookSteps[0].steps>(seed, ops) == want &&
                    run<kBookSteps[1].steps>(seed, ops) == want &&
                    run<kBookSteps[2].steps>(seed, ops) == want &&
                    run<kBookSteps[3].steps>(seed, ops) == want &&
                    run<kBookSteps[4].steps>(seed, ops) == want;
        if (!same) {
            std::printf("steps differ (seed %llu)\n", static_cast<unsigned long long>(seed));
            return 1;
        }
    }
    std::printf("steps agree: %d ops x 3 seeds\n", ops);
    return 0;
}
