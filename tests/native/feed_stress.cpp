// The feed receiver's rules (native/feed.hpp's FeedCore, no socket) on random datagrams,
// built with AddressSanitizer and UBSan (tests/test_feed.py builds and runs it): valid
// packets out of order, copies, overlaps, heartbeats, and hostile bytes (cut headers,
// counts beyond the payload, lengths past the end, sequence numbers near 2^64). After
// every datagram: take() what was delivered, sometimes a gap check at a later time, and
// the invariant recovered + lost + missing = gap_messages, with messages delivered once.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "feed.hpp"

using namespace twinmatch::feed;

namespace {

void put_be(std::vector<std::uint8_t>& b, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::vector<std::uint8_t> packet(std::mt19937_64& rng, std::uint64_t seq, std::uint32_t count) {
    std::vector<std::uint8_t> b;
    const char* s = rng() % 40 ? "TWINMATCH1" : "OTHERSESS1";
    b.insert(b.end(), s, s + 10);
    put_be(b, seq, 8);
    put_be(b, count, 2);
    if (count != 0 && count != 0xFFFF)
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::uint32_t len = 1 + static_cast<std::uint32_t>(rng() % 40);
            put_be(b, len, 2);
            for (std::uint32_t k = 0; k < len; ++k) b.push_back(static_cast<std::uint8_t>(rng()));
        }
    switch (rng() % 25) {  // now and then, damage it
        case 0: b.resize(rng() % (b.size() + 1)); break;
        case 1: if (b.size() > 20) b[20 + rng() % (b.size() - 20)] = 0xFF; break;
        case 2: b.resize(b.size() + rng() % 5, 0); break;
        default: break;
    }
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        std::mt19937_64 rng(seed);
        // Seed 2: a configured session, a hold of 8 (overflow and its give-ups) and a
        // max_jump of 64 (suspect packets and resyncs) on the same hostile stream.
        FeedCore core(seed == 3 ? 0 : 1, 100, 2, seed == 2 ? "TWINMATCH1" : "",
                      seed == 2 ? 8 : kMaxPending, seed == 2 ? 64 : kMaxJump);
        std::uint64_t now = 1000, next = 1;
        for (int k = 0; k < n; ++k) {
            std::uint64_t seq;
            std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % 5);
            const int what = static_cast<int>(rng() % 20);
            if (what < 12) { seq = next; next += count; }                       // in order
            else if (what < 15) { seq = next > 20 ? next - rng() % 20 : 1; }    // old / overlap
            else if (what < 17) { seq = next + rng() % 30; }                    // early
            else if (what == 17) { seq = next; count = rng() % 2 ? 0 : 0xFFFF; } // heartbeat
            else if (what == 18) { seq = ~std::uint64_t{0} - rng() % 4; }       // near 2^64
            else { seq = rng() % 3; }                                           // 0, 1, 2
            const std::vector<std::uint8_t> b = packet(rng, seq, count);
            core.on_packet(b.data(), b.size(), static_cast<std::int64_t>(now), 0);
            core.take();
            if (rng() % 4 == 0) {
                now += rng() % 300;
                std::uint64_t rs;
                std::uint32_t rc;
                if (core.check_gap(static_cast<std::int64_t>(now), rng() % 2, rs, rc) &&
                    (rc == 0 || rc > kMaxRequest || rs != core.expected)) {
                    std::printf("bad request %llu %u\n", (unsigned long long)rs, rc);
                    return 1;
                }
                core.take();
            }
            const FeedStats& st = core.st;
            const std::uint64_t missing = core.missing();
            if (st.lost + missing > st.gap_messages || core.known < core.expected) {
                std::printf("invariant broken at %d (seed %llu)\n", k, (unsigned long long)seed);
                return 1;
            }
        }
    }
    std::printf("feed stress: %d datagrams x 3 seeds\n", n);
    return 0;
}
