// The broadcast ring and the sharded market (native/shard.hpp), built standalone (with
// -fsanitize=thread by `make sanitize-threads`): items through a BroadcastRing of 2 and 8
// slots to 1..4 readers (every reader must see every item once, in order), then a
// generated book-mode day and a hostile stream (references reused across symbols, so the
// writer must look into a worker's market while the others run; both modes) through
// both designs with 1..4 workers and rings of 2 slots, checking that the per-worker
// counts add up to the input exactly and that the merged fills, live orders and counts
// equal one Market's. Exit status 0 = all held.
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

// A hostile stream (both modes): A F U D X E over few references and locates, so that
// adds and U's name references live on another worker's symbol all the time (the writer
// must look at a worker's market while the others run), and some fields are bad.
std::vector<std::uint8_t> hostile(std::size_t n, std::uint64_t seed) {
    gen::Rng rng(seed);
    std::vector<std::uint8_t> out;
    const char kinds[] = "AAAFUUDXE";
    for (std::size_t i = 0; i < n; ++i) {
        const char t = kinds[rng.below(sizeof(kinds) - 1)];
        const std::size_t len = t == 'A' ? 36 : t == 'F' ? 40 : t == 'U' ? 35
                              : t == 'D' ? 19 : t == 'X' ? 23 : 31;
        const std::size_t at = out.size();
        out.resize(at + 2 + len, 0);
        std::uint8_t* p = out.data() + at;
        gen::put16(p, len);
        p += 2;
        p[0] = static_cast<std::uint8_t>(t);
        gen::put16(p + 1, 1 + rng.below(6));         // locate
        gen::put48(p + 5, i);                         // timestamp
        gen::put64(p + 11, 1 + rng.below(10));       // order reference
        const std::uint32_t shares = static_cast<std::uint32_t>(rng.below(30));
        const std::uint32_t price = rng.chance(100'000) ? 0 : 9'990 + rng.below(20);
        if (t == 'A' || t == 'F') {
            p[19] = rng.chance(20'000) ? 'x' : (rng.below(2) ? 'B' : 'S');
            gen::put32(p + 20, shares);
            std::memcpy(p + 24, "HOSTILE ", 8);
            gen::put32(p + 32, price);
        } else if (t == 'U') {
            gen::put64(p + 19, 1 + rng.below(10));   // new reference
            gen::put32(p + 27, shares);
            gen::put32(p + 31, price);
        } else if (t == 'X' || t == 'E') {
            gen::put32(p + 19, shares);
        }
    }
    return out;
}

// A feed through both designs with 1..4 workers and rings of 2 slots: the per-worker
// counts add up to the input exactly, and the merged fills, books and counts equal one
// Market's.
void check_feed(const std::vector<std::uint8_t>& feed, Mode mode, const std::string& name) {
    // The reference: one Market fed every event.
    std::vector<ItchEvent> events(feed.size() / 12 + 1);
    std::vector<std::uint64_t> counts(256, 0);
    const itch::ScanResult sr = itch::scan(feed.data(), feed.size(), events.data(), counts.data());
    events.resize(sr.events);
    Market one(mode);
    std::vector<FillRecord> want;
    one.run(events.data(), events.size(), want);

    for (ShardDesign design : {ShardDesign::Broadcast, ShardDesign::Routed}) {
        for (std::size_t workers = 1; workers <= 4; ++workers) {
            ShardConfig c;
            c.mode = mode;
            c.design = design;
            c.workers = workers;
            c.capacity = 2;  // tiny: the writer and the workers wait on each other constantly
            Shard s(c);
            s.run(feed.data(), feed.size());
            const std::string what =
                name + (design == ShardDesign::Broadcast ? " broadcast" : " routed") + " x" +
                std::to_string(workers);
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
                      m.rejects == one.counts().rejects && m.fills == one.counts().fills &&
                      m.volume == one.counts().volume,
                  what + ": counts equal one Market's");
            std::printf("%-28s events=%llu stalls=%llu looks=%llu\n", what.c_str(),
                        (unsigned long long)w.events, (unsigned long long)w.stalls,
                        (unsigned long long)w.conflicts);
        }
    }
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
    check_feed(feed, Mode::Book, "day");
    const std::vector<std::uint8_t> bad = hostile(g.messages, 9);
    check_feed(bad, Mode::Book, "hostile book");
    check_feed(bad, Mode::Match, "hostile match");
    std::printf("shard_stress: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
