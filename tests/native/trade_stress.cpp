// The tick-to-trade loop (native/trade.hpp) and the intraday clock (native/harness/gen.hpp)
// built standalone with AddressSanitizer and UBSan (tests/test_trade.py builds and runs
// it). An intraday day is generated (timestamps checked), cut into MoldUDP64 packets of
// 1..6 messages and sent over 127.0.0.1 to a Trader on every receive path, with hostile
// datagrams between them (cut headers, counts past the payload, random bytes); the order
// session is one end of a socketpair, on whose other end this program reads the orders
// and answers them (Accepted and Canceled, plus answers for unknown UserRefNums and short
// packets). Checked: the orders read are the orders the strategy counted, 50 bytes each,
// every one answered. Exit status 0 = all held.
//
//   g++ -std=c++20 -O1 -g -fsanitize=address,undefined -I native \
//       tests/native/trade_stress.cpp -luring   (without -luring: drop io_uring's path)
//   ./a.out [messages]
#include <fcntl.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "harness/gen.hpp"
#include "trade.hpp"

using namespace twinmatch;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::printf("FAILED: %s\n", what);
        ++failures;
    }
}

void put_be(std::vector<std::uint8_t>& b, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::vector<std::uint8_t> header(std::uint64_t seq, std::uint16_t count) {
    std::vector<std::uint8_t> p(10, ' ');
    std::memcpy(p.data(), "TWINMATCH1", 10);
    put_be(p, seq, 8);
    put_be(p, count, 2);
    return p;
}

// Read whatever orders are waiting; answer each (A then C) and some nonsense.
std::size_t serve(int fd, std::vector<std::uint8_t>& carry, std::mt19937_64& rng) {
    std::uint8_t buf[1 << 16];
    std::size_t orders = 0;
    for (;;) {
        const ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (got <= 0) break;
        carry.insert(carry.end(), buf, buf + got);
    }
    std::size_t at = 0;
    std::vector<std::uint8_t> out;
    while (carry.size() - at >= 2) {
        const std::size_t len = (std::size_t{carry[at]} << 8) | carry[at + 1];
        if (carry.size() - at < 2 + len) break;
        if (len == 48 && carry[at + 2] == 'U' && carry[at + 3] == 'O') {
            ++orders;
            const std::uint8_t* urn = &carry[at + 4];
            for (char kind : {'A', 'C'}) {  // a sequenced Accepted (trimmed), then Canceled
                std::vector<std::uint8_t> m = {0, 0, 'S', static_cast<std::uint8_t>(kind)};
                put_be(m, 34'200'000'000'000ull, 8);
                m.insert(m.end(), urn, urn + 4);
                put_be(m, 100, 4);
                m.push_back('I');
                m[1] = static_cast<std::uint8_t>(m.size() - 2);
                out.insert(out.end(), m.begin(), m.end());
            }
        }
        at += 2 + len;
    }
    carry.erase(carry.begin(), carry.begin() + static_cast<std::ptrdiff_t>(at));
    if (rng() % 4 == 0) {  // nonsense: an unknown UserRefNum, a short sequenced packet
        std::vector<std::uint8_t> m = {0, 15, 'S', 'C'};
        put_be(m, 0, 8);
        put_be(m, 0xFFFFFFFFu, 4);
        m.push_back('U');
        out.insert(out.end(), m.begin(), m.end());
        out.insert(out.end(), {0, 3, 'S', 'A', 1, 0, 1, 'H'});
    }
    if (!out.empty()) (void)send(fd, out.data(), out.size(), 0);
    return orders;
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t messages = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 40'000;
    gen::Config cfg;
    cfg.seed = 15;
    cfg.messages = messages;
    cfg.symbols = 30;
    cfg.intraday = true;
    gen::Simulator sim(cfg);
    std::vector<std::uint8_t> day;
    while (sim.fill(day, 1 << 20)) {
    }
    std::vector<std::size_t> offs;
    std::uint64_t last_ts = 0;
    bool increasing = true;
    for (std::size_t at = 0; at + 2 <= day.size();) {
        offs.push_back(at);
        const std::uint64_t ts = itch::be48(&day[at + 2 + 5]);
        increasing &= ts > last_ts;
        last_ts = ts;
        at += 2 + ((std::size_t{day[at]} << 8) | day[at + 1]);
    }
    offs.push_back(day.size());
    check(offs.size() - 1 == messages, "the intraday day has the messages asked for");
    check(increasing, "the intraday day's timestamps increase");

    std::vector<trade::RxPath> paths = {trade::RxPath::Recvmmsg, trade::RxPath::Recvmsg};
    if (kHaveIoUring) paths.push_back(trade::RxPath::IoUring);
    std::mt19937_64 rng(15);
    for (trade::RxPath path : paths) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 2;
        trade::StrategyConfig sc;
        sc.imbalance = 2;
        sc.cooldown_ns = 0;
        sc.max_per_second = 1'000'000;
        sc.max_open = 1 << 20;
        sc.max_orders = 200'000;
        trade::Trader t(0, -1, 1, 5'000'000, 2, 16, 1 << 22, false, "TWINMATCH1", 1024,
                        1 << 20, sv[0], sc, path);
        const int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(t.port);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        auto send_dgram = [&](const std::vector<std::uint8_t>& p) {
            (void)sendto(tx, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
        };
        const std::int64_t begin = feed::now_ns();
        std::vector<std::uint8_t> carry;
        std::size_t orders = 0, k = 0, seq = 1, packets = 0;
        while (k + 1 < offs.size()) {
            const std::size_t n = std::min<std::size_t>(1 + rng() % 6, offs.size() - 1 - k);
            auto p = header(seq, static_cast<std::uint16_t>(n));
            p.insert(p.end(), day.begin() + static_cast<std::ptrdiff_t>(offs[k]),
                     day.begin() + static_cast<std::ptrdiff_t>(offs[k + n]));
            send_dgram(p);
            k += n;
            seq += n;
            if (++packets % 97 == 0) {  // hostile datagrams
                std::vector<std::uint8_t> bad(rng() % 40);
                for (auto& b : bad) b = static_cast<std::uint8_t>(rng());
                send_dgram(bad);
                auto lie = header(seq, 500);  // a count far beyond its payload
                lie.insert(lie.end(), {0, 3, 'S', 0, 0});
                send_dgram(lie);
            }
            if (packets % 64 == 0) {  // let the trader drain its socket (no drops)
                t.run_until(feed::now_ns() + 2'000'000, begin, 10'000'000'000, 60'000'000'000);
                orders += serve(sv[1], carry, rng);
            }
        }
        send_dgram(header(seq, 0xFFFF));  // end of session
        for (int round = 0; round < 2000 && t.stop == trade::Stop::Running; ++round) {
            t.run_until(feed::now_ns() + 2'000'000, begin, 10'000'000'000, 60'000'000'000);
            orders += serve(sv[1], carry, rng);
        }
        orders += serve(sv[1], carry, rng);
        check(t.stop == trade::Stop::End, "the run ends at the end of session");
        check(t.core.st.lost == 0, "nothing lost on loopback");
        check(t.strategy.st.sent > 10, "the strategy traded");
        check(orders == t.strategy.st.sent, "every order counted arrived, whole");
        check(t.sent_bytes() == orders * trade::kOrderBytes, "the sent log holds them all");
        check(t.strategy.st.open == 0, "every order answered");
        std::printf("path %d: %llu orders, %llu bad_itch, %llu bad_moldudp64\n",
                    static_cast<int>(path), static_cast<unsigned long long>(orders),
                    static_cast<unsigned long long>(t.bad_itch),
                    static_cast<unsigned long long>(t.core.st.bad_moldudp64));
        // A zero-length SoupBinTCP packet from the server: the session is broken.
        const std::uint8_t zero[2] = {0, 0};
        (void)send(sv[1], zero, 2, 0);
        close(tx);
        close(sv[1]);
        close(sv[0]);
    }
    std::printf(failures ? "trade stress: FAILED\n" : "trade stress: ok\n");
    return failures ? 1 : 0;
}
