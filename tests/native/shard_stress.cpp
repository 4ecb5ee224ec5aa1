// The broadcast ring and the sharded market (native/shard.hpp), built standalone (with
// -fsanitize=thread by `make sanitize-threads`): items through a BroadcastRing of 2 and 8
// slots to 1..4 readers (every reader must see every item once, in order), then a
// generated book-mode day through both designs with 1..4 workers and rings of 2 slots,
// checking that the per-worker counts add up to the input exactly and that the merged
// fills, books and counts equal one Market's. Exit status 0 = all held.
//
//   g++ -std=c++20 -O1 -g -fsanitize=thread -I native tests/native/shard_stress.cpp
//   ./a.out [items] [messages]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness/gen.hpp"
#include "shard.hpp"

using namespace twinmatch;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAILED: %s\n", what.c_str());
        ++failures;
    }
}

void ring(std::uint64_t items, std::size_t capacity, std::size_t readers) {
    BroadcastRing<std::uint64_t> r(capacity, readers);
    std::vector<std::uint64_t> seen(readers, 0);
    std::vector<char> ok(readers, 1);
    {
        std::vector<std::jthread> t;
        for (std::size_t k = 0; k < readers; ++k)
            t.emplace_back([&, k] {
                Backoff b(WaitKind::Yield, true);
                std::uint64_t v;
                while (seen[k] < items) {
                    if (r.try_read(k, v)) {
                        ok[k] &= v == seen[k];
                        ++seen[k];
                        b.reset();
                    } else {
                        b.wait();
                    }
                }
            });
        Backoff b(WaitKind::Yield, true);
        for (std::uint64_t i = 0; i < items; ++i) {
            while (!r.try_publish(i)) b.wait();
            b.reset();
        }
    }
    for (std::size_t k = 0; k < readers; ++k) {
        const std::string what = "ring " + std::to_string(capacity) + "x" +
                                 std::to_string(readers) + " reader " + std::to_string(k);
        check(seen[k] == items, what + ": every item");
        check(ok[k] != 0, what + ": in order");
    }
}

bool same_fills(const std::vector<FillRecord>& a, const std::vector<FillRecord>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(FillRecord)) == 0);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20'000;
    for (std::size_t cap : {2, 8})
        for (std::size_t readers = 1; readers <= 4; ++readers) ring(items, cap, readers);

    gen::Config g;
    g.messages = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5'000;
    g.symbols = 20;
    g.seed = 3;
    gen::Simulator sim(g);
    std::vector<std::uint8_t> feed;
    while (sim.fill(feed, feed.size() + (1 << 20))) {
    }
    // The reference: one Market fed every event.
    std::vector<ItchEvent> events(feed.size() / 12 + 1);
    std::vector<std::uint64_t> counts(256, 0);
    const itch::ScanResult sr = itch::scan(feed.data(), feed.size(), events.data(), counts.data());
    events.resize(sr.events);
    Market one(Mode::Book);
    std::vector<FillRecord> want;
    one.run(events.data(), events.size(), want);

    for (ShardDesign design : {ShardDesign::Broadcast, ShardDesign::Routed}) {
        for (std::size_t workers = 1; workers <= 4; ++workers) {
            ShardConfig c;
            c.mode = Mode::Book;
            c.design = design;
            c.workers = workers;
            c.capacity = 2;  // tiny: the writer and the workers wait on each other constantly
            Shard s(c);
            s.run(feed.data(), feed.size());
            const std::string what = std::string(design == ShardDesign::Broadcast ? "broadcast"
                                                                                  : "routed") +
                                     " x" + std::to_string(workers);
            const ShardWriterStats& w = s.writer();
            check(w.events == events.size(), what + ": every event decoded");
            std::uint64_t received = 0, kept = 0, live = 0;
            for (std::size_t k = 0; k < workers; ++k) {
                const ShardWorkerStats& ws = s.worker_stats(k);
                received += ws.received;
                kept += ws.applied - ws.foreign;
                live += s.market(k).live_orders();
                if (design == ShardDesign::Broadcast)
                    check(ws.received == w.events, what + ": a reader saw every event");
                else
                    check(ws.received == w.routed[k], what + ": a worker got what was routed to it");
            }
            if (design == ShardDesign::Routed) check(received == w.events, what + ": counts sum to the input");
            check(kept == w.events, what + ": each event kept once");
            check(same_fills(s.merged_fills(), want), what + ": fills equal one Market's");
            check(live == one.live_orders(), what + ": live orders equal one Market's");
            const MarketCounts m = s.merged_counts();
            check(m.events == one.counts().events && m.anomalies == one.counts().anomalies &&
                      m.fills == one.counts().fills && m.volume == one.counts().volume,
                  what + ": counts equal one Market's");
            std::printf("%-14s events=%llu stalls=%llu\n", what.c_str(),
                        (unsigned long long)w.events, (unsigned long long)w.stalls);
        }
    }
    std::printf("shard_stress: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
