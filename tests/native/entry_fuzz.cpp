// Order-entry exchange under AddressSanitizer + UndefinedBehaviorSanitizer, built
// standalone by tests/test_entry.py: random OUCH messages (every type, random lengths and
// bytes, and enough well-formed Enter/Replace/Cancel/Modify/Mass Cancel to fill books and
// trade) through native/entry.hpp's Exchange::handle. Exit status 0 = no sanitizer report.
//
//   g++ -std=c++20 -O1 -g -fsanitize=address,undefined -I native tests/native/entry_fuzz.cpp
//   ./a.out [messages] [seed]
#include "entry.hpp"
#include <cstdlib>
#include <random>
#include <cstdio>
using namespace twinmatch::entry;
// The ITCH feed is whole messages, each as long as its type says; then it is cleared.
static bool feed_ok(std::vector<std::uint8_t>& feed) {
    for (std::size_t at = 0; at < feed.size();) {
        if (feed.size() - at < 3) return false;
        const std::size_t n = get16(&feed[at]);
        std::size_t want = 0;
        switch (feed[at + 2]) {
            case 'S': want = 12; break;  case 'R': want = 39; break;  case 'A': want = 36; break;
            case 'F': want = 40; break;  case 'E': want = 31; break;  case 'P': want = 44; break;
            case 'X': want = 23; break;  case 'D': want = 19; break;  case 'U': want = 35; break;
        }
        if (n != want || feed.size() - at < 2 + n) { std::printf("bad feed at %zu\n", at); return false; }
        at += 2 + n;
    }
    feed.clear();
    return true;
}
int main(int argc, char** argv) {
    const long n_messages = argc > 1 ? std::atol(argv[1]) : 400000;
    const unsigned long seed = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1;
    Config c;
    c.users = {"A", "B"}; c.passwords = {"P", "P"};
    std::array<char, 8> s; s.fill(' '); s[0] = 'X'; c.symbols.push_back(s); s[0] = 'Y'; c.symbols.push_back(s);
    c.session.fill(' '); c.fixed_clock = true;
    Exchange ex(c, true);   // with its ITCH feed
    std::mt19937_64 rng(seed);
    std::uint8_t m[200];
    const char types[] = "OUXMCDEQZ";
    std::uint32_t urn[2] = {0, 0};
    for (long it = 0; it < n_messages; ++it) {
        const std::uint32_t u = rng() % 2;
        const char t = types[rng() % 9];
        std::size_t n = rng() % 8 == 0 ? rng() % 200 : (t == 'O' ? 47 : t == 'U' ? 40 : t == 'X' ? (rng() % 2 ? 9 : 11) : t == 'M' ? (rng() % 2 ? 10 : 12) : 19);
        for (std::size_t i = 0; i < n; ++i) m[i] = std::uint8_t(rng());
        if (n) m[0] = std::uint8_t(t);
        if (rng() % 4 != 0 && n >= 47 && t == 'O') {  // mostly sane enters
            put32(m + 1, ++urn[u]); m[5] = rng() % 2 ? 'B' : 'S'; put32(m + 6, 1 + rng() % 500);
            std::memcpy(m + 10, c.symbols[rng() % 2].data(), 8); put64(m + 18, 1000000 + 100 * (rng() % 20));
            m[26] = rng() % 3 ? '0' : '3'; m[27] = "YYNA"[rng() % 4]; m[29] = 'N'; m[30] = 'N'; put16(m + 45, 0); n = 47;
        }
        if (n >= 9 && (t == 'X' || t == 'M' || t == 'U') && rng() % 2) put32(m + 1, 1 + rng() % (urn[u] + 1));
        if (n >= 12 && t == 'M') m[5] = "BSTE"[rng() % 4];
        if (t == 'X' && n == 11) put16(m + 9, 0);
        if (t == 'M' && n == 12) put16(m + 10, 0);
        if (t == 'U' && n == 40) { put32(m + 5, ++urn[u]); put32(m + 9, rng() % 600); put64(m + 13, 1000000 + 100 * (rng() % 20)); m[21] = '0'; m[22] = "YYNA"[rng() % 4]; m[23] = 'N'; put16(m + 38, 0); }
        if (t == 'C' && n == 19) { put32(m + 1, ++urn[u]); if (rng() % 2) std::memset(m + 9, ' ', 8); put16(m + 17, 0); }
        ex.handle(u, m, n);
        if (ex.log(0).bytes.size() > (64u << 20)) break;
        ex.dirty.clear();
        if (it % 1024 == 0 && !feed_ok(ex.market_data())) return 3;
    }
    ex.end_of_day();
    if (!feed_ok(ex.market_data())) return 3;
    std::printf("ok in=%lu out=%lu rejected=%lu ignored=%lu bad=%lu\n", (unsigned long)ex.stats[MessagesIn].load(),
                (unsigned long)ex.stats[MessagesOut].load(), (unsigned long)ex.stats[Rejected].load(),
                (unsigned long)ex.stats[Ignored].load(), (unsigned long)ex.stats[BadMessageLength].load());
}
