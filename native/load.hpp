// The load client of chapter 12 in C++: twinmatch/load.py's run_load, the same sessions,
// order mix, ack matching and latency definitions, without the Python interpreter in the
// loop. It exists because a load client can be the bottleneck: when the client spends
// more time building and parsing a message than the server does, acks per second measure
// the client, and a ratio of two servers measured through it is capped by it.
//
// Part of the harness, not a twin of a server: it lives in native/ only because that is
// where the one extension is built. Same shape as the Python client:
//
//   * one thread, non-blocking sockets, one epoll set; every wait bounded by the timeout;
//   * per session: a framer (an input buffer cut into whole SoupBinTCP packets, however
//     TCP splits them), an output buffer, and a pending table indexed by UserRefNum
//     (UserRefNums rise from 1 per session, so an array is the map);
//   * closed loop (window outstanding per session, latency from the actual send) or open
//     loop (a fixed schedule, latency from the scheduled send, late sends counted).
//
// Its random stream is its own (xoshiro256**, seeded by `seed`): the same mix rules and
// shares as the Python client, not the same sequence of orders.
//
// No allocation per request once started: the latencies are reserved for every request,
// each session's tables for its even share of them; a session that gets more than its
// share (the closed loop does not deal evenly) grows its tables by doubling, at most
// log2(sessions) times over a run. An output buffer grows (by doubling) only when more
// than 64 KiB wait for a server that does not read.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/gen.hpp"

namespace twinmatch::load {

// What went wrong, for the binding to raise as the matching Python exception (the
// Python client raises ConnectionError and TimeoutError with the same words).
struct Error : std::runtime_error {
    enum Kind { Connection, Timeout } kind;
    Error(Kind k, const std::string& what) : std::runtime_error(what), kind(k) {}
};

// The run was asked to stop (Ctrl-C): the binding raises the KeyboardInterrupt it saw.
struct Interrupted {};

struct Params {
    int port = 0;
    int sessions = 4;
    std::int64_t requests = 10'000;
    bool open = false;              // open loop (else closed)
    double rate = 10'000.0;         // requests per second over all sessions
    int window = 1;                 // closed loop: outstanding per session
    double cancel_share = 0.1, replace_share = 0.05;
    std::uint64_t seed = 1;
    double timeout = 60.0;          // seconds, bounds every wait
    int first_user = 1;             // sessions log in as L<first_user>, L<first_user+1> ...
    bool pace = false;              // closed loop: also hold requests to the rate schedule
};

struct Result {
    std::int64_t sent = 0, acks = 0, unanswered = 0, late_sends = 0;
    double seconds = 0.0;
    std::vector<std::int64_t> latencies_ns;
    // Open loop: how late each request left its schedule, as the loop turn that sent it
    // saw it (the client's own share of a latency; writing it to the socket comes after).
    std::vector<std::int64_t> send_delays_ns;
};

// The limits twinmatch/load.py checks too (ValueError from both clients).
inline constexpr std::int64_t kMaxRequests = 10'000'000;
inline constexpr int kMaxSessions = 1024;   // as the servers' max_sessions
inline constexpr double kMinRate = 1e-3, kMaxRate = 1e9, kMaxTimeout = 1e6;
inline constexpr int kMaxUser = 99'999;      // L99999: a username is 6 characters
inline constexpr std::int64_t kLateNs = 1'000'000;  // open loop: a send over 1 ms late
inline constexpr std::uint64_t kPrice = 1'000'000;  // $100.0000, the price the mix is around

inline void check(const Params& p) {
    if (!(p.rate > 0) || p.sessions < 1 || p.requests < 1 || p.window < 1)
        throw std::invalid_argument("sessions, requests, window and rate must be positive");
    if (!(p.rate >= kMinRate && p.rate <= kMaxRate))
        throw std::invalid_argument("rate: 0.001 .. 1e9 requests per second");
    if (p.requests > kMaxRequests)
        throw std::invalid_argument("requests: at most 10,000,000");
    if (p.sessions > kMaxSessions) throw std::invalid_argument("sessions: at most 1024");
    if (!(p.cancel_share >= 0) || !(p.replace_share >= 0) ||
        !(p.cancel_share + p.replace_share <= 1))
        throw std::invalid_argument("cancel_share and replace_share: 0 or more, at most 1 together");
    if (!(p.timeout > 0 && p.timeout <= kMaxTimeout))
        throw std::invalid_argument("timeout: more than 0, at most 1e6 seconds");
    if (p.first_user < 1 || p.first_user + std::int64_t(p.sessions) - 1 > kMaxUser)
        throw std::invalid_argument("first_user: the users L00001..L99999");
    if (p.port < 1 || p.port > 65535) throw std::invalid_argument("port: 1..65535");
}

inline std::int64_t now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

inline std::uint32_t get32(const std::uint8_t* p) {
    return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}
inline void put16(std::uint8_t* p, std::uint16_t v) { p[0] = std::uint8_t(v >> 8); p[1] = std::uint8_t(v); }
inline void put32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::uint8_t(v >> (24 - 8 * i));
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = std::uint8_t(v >> (56 - 8 * i));
}

// The generators' xoshiro256** (native/harness/gen.hpp): a few instructions per number,
// no allocation. Python's random.Random is a Mersenne Twister, so the two clients draw
// different streams from the same seed.
using Rng = gen::Rng;

// One request waiting for its ack, per UserRefNum: the Enter or Replace that created the
// number (`kind` 'O' or 'U'), and a Cancel of it (a Cancel names the order's number, and
// it may go out before the Enter's own ack is back). -1: nothing pending.
struct Slot {
    std::int64_t open_ns = -1;
    std::int64_t cancel_ns = -1;
    char kind = 0;
};

struct Resting {                  // one of this session's far orders, live on the book
    std::uint32_t urn;
    char side;
};

// A byte buffer with a read and a write end; compacts before it grows.
struct Bytes {
    std::vector<std::uint8_t> buf;
    std::size_t head = 0, tail = 0;
    std::size_t size() const { return tail - head; }
    std::uint8_t* data() { return buf.data() + head; }
    std::uint8_t* room(std::size_t n) {   // n writable bytes at the tail
        if (tail + n > buf.size()) {
            std::memmove(buf.data(), buf.data() + head, tail - head);
            tail -= head;
            head = 0;
            if (tail + n > buf.size()) buf.resize(std::max(2 * buf.size(), tail + n));
        }
        return buf.data() + tail;
    }
    void consume(std::size_t n) {
        head += n;
        if (head == tail) head = tail = 0;
    }
};

// The largest SoupBinTCP packet is 2 + 65535 bytes, and what stays in the buffer after it
// is cut is less than one packet: so an input buffer of 2^17 holds the longest packet and
// always has room for 64 KiB minus a byte more (a recv never gets a tiny window).
inline constexpr std::size_t kInBuf = 1 << 17;
static_assert(kInBuf - (2 + 65535 - 1) >= 65535);

struct Session {
    int fd = -1;
    char user[7] = {};            // L00001, NUL-terminated for messages
    bool logged_in = false;
    bool want_out = false;        // EPOLLOUT registered: output waits for the socket
    std::uint32_t urn = 0;        // the last UserRefNum used
    std::int64_t pending = 0;     // requests sent and not yet acked
    std::vector<Slot> slots;      // by UserRefNum
    std::vector<Resting> resting;
    std::vector<std::uint8_t> in = std::vector<std::uint8_t>(kInBuf);
    std::size_t in_len = 0;
    Bytes out;

    Session() = default;
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    Session(Session&& o) noexcept { *this = std::move(o); }
    Session& operator=(Session&& o) noexcept {
        std::swap(fd, o.fd);
        std::memcpy(user, o.user, sizeof user);
        logged_in = o.logged_in;
        want_out = o.want_out;
        urn = o.urn;
        pending = o.pending;
        slots.swap(o.slots);
        resting.swap(o.resting);
        in.swap(o.in);
        in_len = o.in_len;
        std::swap(out, o.out);
        return *this;
    }
    ~Session() { if (fd >= 0) ::close(fd); }

    Slot& slot(std::uint32_t u) {
        if (u >= slots.size()) slots.resize(std::max<std::size_t>(2 * slots.size(), u + 1));
        return slots[u];
    }
};

// Wire sizes of the three requests (contract/ouch.py: ENTER, REPLACE, CANCEL), framed.
inline constexpr std::size_t kEnter = 47, kReplace = 40, kCancel = 11;
static_assert(2 + 1 + kEnter == 50 && 2 + 1 + kReplace == 43 && 2 + 1 + kCancel == 14);

class Client {
public:
    // `interrupted`, if given, is asked about every 100 ms whether to stop (the binding
    // checks Python's signals: the run holds no GIL, so Ctrl-C would wait for the timeout).
    explicit Client(const Params& p, std::function<bool()> interrupted = {})
        : p_(p), rng_(p.seed), interrupted_(std::move(interrupted)) {
        check(p);
        interval_ = 1e9 / p.rate;
        result_.latencies_ns.reserve(std::size_t(p.requests));
        if (p.open) result_.send_delays_ns.reserve(std::size_t(p.requests));
    }
    ~Client() { if (ep_ >= 0) ::close(ep_); }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    Result run() {
        deadline_ = now_ns() + std::int64_t(p_.timeout * 1e9);
        connect_all();
        await_logins();             // the schedule starts when every session is in
        t0_ = now_ns();
        loop();
        result_.seconds = double(now_ns() - t0_) / 1e9;
        for (const Session& s : ss_) result_.unanswered += s.pending;
        logout_all();
        return std::move(result_);
    }

private:
    [[noreturn]] void fail(Error::Kind k, const std::string& what) { throw Error(k, what); }

    void poll_interrupt(std::int64_t now) {
        if (!interrupted_ || now - last_poll_ < 100'000'000) return;
        last_poll_ = now;
        if (interrupted_()) throw Interrupted{};
    }

    void connect_all() {
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) fail(Error::Connection, "load: epoll_create1 failed");
        const std::size_t share = std::size_t(p_.requests / p_.sessions) + 2 + std::size_t(p_.window);
        ss_.reserve(std::size_t(p_.sessions));
        for (int i = 0; i < p_.sessions; ++i) {
            Session& s = ss_.emplace_back();
            std::snprintf(s.user, sizeof s.user, "L%05d", p_.first_user + i);
            s.slots.resize(share);
            s.resting.reserve(share);
            s.out.buf.resize(1 << 16);
            s.fd = connect_one();
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u64 = std::uint64_t(i);
            if (::epoll_ctl(ep_, EPOLL_CTL_ADD, s.fd, &ev) != 0)
                fail(Error::Connection, "load: epoll_ctl failed");
            // Login Request (SoupBinTCP 3.00/4.00 layout): user a6, password a10 "LOAD",
            // session a10 (spaces: the active one), sequence number a20 "0".
            std::uint8_t* w = s.out.room(49);
            put16(w, 47);
            w[2] = 'L';
            std::memset(w + 3, ' ', 46);
            std::memcpy(w + 3, s.user, 6);
            std::memcpy(w + 9, "LOAD", 4);
            w[48] = '0';
            s.out.tail += 49;
            flush(s, i);
        }
    }

    int connect_one() {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) fail(Error::Connection, std::string("load: socket(): ") + std::strerror(errno));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(std::uint16_t(p_.port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int err = 0;
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                // At most 5 s (as the Python client), and never past the deadline.
                pollfd pf{fd, POLLOUT, 0};
                const std::int64_t until = std::min<std::int64_t>(deadline_, now_ns() + 5'000'000'000);
                int r;
                do {                                  // a signal (EINTR) only waits again
                    r = ::poll(&pf, 1, int(std::max<std::int64_t>(0, until - now_ns()) / 1'000'000));
                } while (r < 0 && errno == EINTR);
                if (r == 0) {
                    ::close(fd);
                    fail(Error::Timeout, "load: connecting to 127.0.0.1:" + std::to_string(p_.port) +
                                         " timed out");
                }
                socklen_t len = sizeof err;
                err = 0;
                if (r < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
            }
        }
        if (err != 0) {
            ::close(fd);
            fail(Error::Connection, "load: cannot connect to 127.0.0.1:" + std::to_string(p_.port) +
                                    ": " + std::strerror(err) + " (is twinmatch serve running there?)");
        }
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
    }

    void await_logins() {
        epoll_event evs[64];
        for (;;) {
            bool all = true;
            for (const Session& s : ss_) all = all && s.logged_in;
            if (all) return;
            const std::int64_t now = now_ns();
            if (now > deadline_) fail(Error::Timeout, "load: the sessions did not all log in in time");
            poll_interrupt(now);
            const int n = ::epoll_wait(ep_, evs, 64, wait_ms(50'000'000));
            for (int k = 0; k < n; ++k) on_event(evs[k]);
        }
    }

    // An epoll wait of at most `ns`, never past the deadline, in whole milliseconds.
    int wait_ms(std::int64_t ns) const {
        const std::int64_t left = deadline_ - now_ns();
        return int(std::max<std::int64_t>(0, std::min(ns, left)) / 1'000'000);
    }

    // --8<-- [start:schedule]
    void loop() {  // send what is due, write, wait for answers (epoll), match them
        epoll_event evs[64];
        std::int64_t next = 0;                  // open loop: the next scheduled request
        for (;;) {
            const std::int64_t now = now_ns();
            if (now > deadline_) break;         // the rest is counted as unanswered
            poll_interrupt(now);
            const double elapsed = double(now - t0_);
            if (!p_.open) {
                for (Session& s : ss_)
                    while (result_.sent < p_.requests && s.pending < p_.window &&
                           (!p_.pace || double(result_.sent) * interval_ <= elapsed))
                        send(s, now);
            } else {
                while (result_.sent < p_.requests &&
                       double(next) * interval_ <= elapsed) {
                    Session& s = ss_[std::size_t(next % p_.sessions)];
                    const std::int64_t scheduled =
                        t0_ + std::int64_t(double(next) * interval_);
                    if (now - scheduled > kLateNs) ++result_.late_sends;
                    result_.send_delays_ns.push_back(
                        std::max<std::int64_t>(0, now - scheduled));
                    send(s, scheduled);         // charged from its schedule, not now
                    ++next;
                }
            }
            for (std::size_t i = 0; i < ss_.size(); ++i)
                if (ss_[i].out.size() && !ss_[i].want_out) flush(ss_[i], i);
            std::int64_t wait = 10'000'000;     // 10 ms when nothing is due
            if ((p_.open || p_.pace) && result_.sent < p_.requests) {
                const double left = double(p_.open ? next : result_.sent) * interval_ -
                                    double(now_ns() - t0_);
                if (left < 1e6) wait = 0;  // epoll waits whole ms: poll, none goes late
                else if (left - 1e6 < double(wait)) wait = std::int64_t(left - 1e6);
            }
            const int n = ::epoll_wait(ep_, evs, 64, wait_ms(wait));
            for (int k = 0; k < n; ++k) on_event(evs[k]);
            if (result_.sent >= p_.requests && acked_all()) break;
        }
    }
    // --8<-- [end:schedule]

    bool acked_all() const {
        for (const Session& s : ss_) if (s.pending) return false;
        return true;
    }

    void on_event(const epoll_event& ev) {
        const std::size_t i = std::size_t(ev.data.u64);
        Session& s = ss_[i];
        if (ev.events & EPOLLOUT) flush(s, i);
        if (ev.events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read(s);
    }

    // One request of the mix into the session's output, and its start time into the
    // pending table. Half the Enter Orders cross (buys a little above the price, sells a
    // little below: they trade with each other); the other half rest far away, where
    // nothing reaches them: only those are canceled and replaced, so a Cancel or Replace
    // always finds its order live and is always answered.
    void send(Session& s, std::int64_t start) {
        const double roll = rng_.unit();
        if (!s.resting.empty() && roll < p_.cancel_share + p_.replace_share) {
            // Take a random resting order out (swap with the last: the order is no matter).
            const auto at = static_cast<std::uint32_t>(rng_.below(s.resting.size()));
            const Resting r = s.resting[at];
            s.resting[at] = s.resting.back();
            s.resting.pop_back();
            if (roll < p_.cancel_share) {
                std::uint8_t* w = frame(s, kCancel);
                w[0] = 'X';
                put32(w + 1, r.urn);
                put32(w + 5, 0);              // new intended size 0: cancel all of it
                put16(w + 9, 0);              // no appendage
                s.slot(r.urn).cancel_ns = start;
            } else {
                const std::uint32_t urn = ++s.urn;
                std::uint8_t* w = frame(s, kReplace);
                w[0] = 'U';
                put32(w + 1, r.urn);
                put32(w + 5, urn);
                put32(w + 9, 100);
                put64(w + 13, far(r.side));
                w[21] = '0';                  // Day
                w[22] = 'Y';                  // displayed
                w[23] = 'N';                  // not ISO
                clordid(w + 24);
                put16(w + 38, 0);
                Slot& sl = s.slot(urn);
                sl.open_ns = start;
                sl.kind = 'U';
                s.resting.push_back({urn, r.side});
            }
        } else {
            const std::uint32_t urn = ++s.urn;
            const char side = rng_.unit() < 0.5 ? 'B' : 'S';
            std::uint64_t price;
            if (rng_.unit() < 0.5) {
                const std::uint64_t tick = 100 * rng_.below(4);
                price = side == 'B' ? kPrice + tick : kPrice - tick;
            } else {
                price = far(side);
                s.resting.push_back({urn, side});
            }
            std::uint8_t* w = frame(s, kEnter);
            w[0] = 'O';
            put32(w + 1, urn);
            w[5] = std::uint8_t(side);
            put32(w + 6, 100);
            std::memcpy(w + 10, "AAPL    ", 8);
            put64(w + 18, price);
            std::memcpy(w + 26, "0YANN", 5);  // Day, displayed, agency, not ISO, continuous
            clordid(w + 31);
            put16(w + 45, 0);
            Slot& sl = s.slot(urn);
            sl.open_ns = start;
            sl.kind = 'O';
        }
        ++s.pending;
        ++result_.sent;
    }

    std::uint64_t far(char side) {
        const std::uint64_t offset = kPrice / 10 + 100 * rng_.below(8);
        return side == 'B' ? kPrice - offset : kPrice + offset;
    }
    static void clordid(std::uint8_t* w) {
        std::memset(w, ' ', 14);
        std::memcpy(w, "LOAD", 4);
    }
    // Room for one Unsequenced Data packet carrying an OUCH message of `len` bytes; the
    // message is written at the pointer returned.
    static std::uint8_t* frame(Session& s, std::size_t len) {
        std::uint8_t* w = s.out.room(3 + len);
        put16(w, std::uint16_t(1 + len));
        w[2] = 'U';
        s.out.tail += 3 + len;
        return w + 3;
    }

    void flush(Session& s, std::size_t i) {
        while (s.out.size()) {
            const ssize_t w = ::send(s.fd, s.out.data(), s.out.size(), MSG_NOSIGNAL);
            if (w > 0) { s.out.consume(std::size_t(w)); continue; }
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            closed(s);
        }
        // Wait for the socket (EPOLLOUT) only while output waits for it.
        const bool want = s.out.size() != 0;
        if (want != s.want_out) {
            epoll_event ev{};
            ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
            ev.data.u64 = std::uint64_t(i);
            ::epoll_ctl(ep_, EPOLL_CTL_MOD, s.fd, &ev);
            s.want_out = want;
        }
    }

    [[noreturn]] void closed(const Session& s) {
        fail(Error::Connection, std::string("load: the server closed ") + s.user + "'s session");
    }

    // Whatever the socket has, cut into whole packets; a partial one waits in `in`.
    void read(Session& s) {
        const ssize_t r = ::recv(s.fd, s.in.data() + s.in_len, s.in.size() - s.in_len, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (r <= 0) closed(s);
        const std::int64_t got = now_ns();
        s.in_len += std::size_t(r);
        std::size_t at = 0;
        while (s.in_len - at >= 2) {
            const std::size_t len = std::size_t(s.in[at]) << 8 | s.in[at + 1];
            if (len == 0)
                fail(Error::Connection, std::string("load: bad SoupBinTCP Packet Length 0 on ") +
                                        s.user + "'s session");
            if (s.in_len - at < 2 + len) break;   // a partial packet: wait for the rest
            on_packet(s, s.in.data() + at + 2, len, got);
            at += 2 + len;
        }
        std::memmove(s.in.data(), s.in.data() + at, s.in_len - at);
        s.in_len -= at;
    }

    // One packet (type byte + payload). The ack of a request is the first outbound
    // message that names it: Accepted A or Rejected J of an Enter (UserRefNum at 9),
    // Canceled C of a Cancel (at 9), Replaced U of a Replace (its new UserRefNum, at 13).
    void on_packet(Session& s, const std::uint8_t* p, std::size_t len, std::int64_t got) {
        if (p[0] == 'S' && len >= 1 + 13) {
            const std::uint8_t* m = p + 1;
            const char kind = char(m[0]);
            std::uint32_t urn;
            bool cancel = false;
            if (kind == 'A' || kind == 'J') urn = get32(m + 9);
            else if (kind == 'C') { urn = get32(m + 9); cancel = true; }
            else if (kind == 'U' && len >= 1 + 17) urn = get32(m + 13);
            else return;
            if (urn >= s.slots.size()) return;        // not a number this client used
            Slot& sl = s.slots[urn];
            std::int64_t& start = cancel ? sl.cancel_ns : sl.open_ns;
            if (start < 0 || (!cancel && sl.kind != (kind == 'U' ? 'U' : 'O'))) return;
            result_.latencies_ns.push_back(got - start);   // reserved: never reallocates
            start = -1;
            --s.pending;
            ++result_.acks;
        } else if (p[0] == 'A') {
            s.logged_in = true;
        } else if (p[0] == 'J') {
            const char code = len > 1 ? char(p[1]) : '?';
            fail(Error::Connection, std::string("load: login of ") + s.user + " rejected (code '" +
                                    code + "'" + (code == 'A' ? ": not authorized" :
                                                  code == 'S' ? ": session not available" : "") +
                                    ")");
        }
    }

    // Logout Request on every session, best effort within one second in all, then close.
    void logout_all() {
        const std::int64_t until = now_ns() + 1'000'000'000;
        for (std::size_t i = 0; i < ss_.size(); ++i) {
            Session& s = ss_[i];
            std::uint8_t* w = s.out.room(3);
            put16(w, 1);
            w[2] = 'O';
            s.out.tail += 3;
            while (s.out.size()) {
                const ssize_t r = ::send(s.fd, s.out.data(), s.out.size(), MSG_NOSIGNAL);
                if (r > 0) { s.out.consume(std::size_t(r)); continue; }
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && errno == EAGAIN) {
                    pollfd pf{s.fd, POLLOUT, 0};
                    const std::int64_t left = (until - now_ns()) / 1'000'000;
                    if (left > 0 && ::poll(&pf, 1, int(left)) > 0) continue;
                }
                break;                                // gone, or out of time: just close
            }
            ::close(s.fd);
            s.fd = -1;
        }
    }

    Params p_;
    Rng rng_;
    std::function<bool()> interrupted_;
    std::int64_t last_poll_ = 0;
    double interval_ = 0;           // ns between scheduled requests
    std::int64_t t0_ = 0, deadline_ = 0;
    int ep_ = -1;
    std::vector<Session> ss_;
    Result result_;
};

inline Result run(const Params& p, std::function<bool()> interrupted = {}) {
    return Client(p, std::move(interrupted)).run();
}

}  // namespace twinmatch::load
