// Tick to trade, the optimized twin (naive/trade.py is the readable one): one C++ loop
// reads the feed (recvmmsg batches of MoldUDP64 from 127.0.0.1), puts each message in
// sequence into the market (book mode), shows the symbol's top of book to the strategy
// after every book message, and sends the order it wants at once: an OUCH 5.0 Enter Order
// in a SoupBinTCP packet, on a session Python logged in and handed over as a descriptor.
// The rule and the risk checks are contract/trade.py's, word for word.
//
// Stage stamps: the kernel's receive time (SO_TIMESTAMPNS) and the user-space receive are
// CLOCK_REALTIME; every later stage is the TSC (pipeline.hpp's StampClock: one rdtsc and
// one multiply, where a clock_gettime through the vDSO costs a few times more), added to
// the user-space receive so all stamps share one clock. The cost of one stamp is measured
// when the trader is made (stamp_cost_ns) so a report can subtract it (chapter 7's rule).
//
// Nothing on the path from the datagram to the send allocates: the receive buffers, the
// market's reserve, the stage rows (max_orders of them) and the per-symbol state are all
// made in the constructor.
#pragma once
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "feed.hpp"
#include "histogram.hpp"
#include "pipeline.hpp"

#ifdef TWINMATCH_HAVE_LIBURING
#include <liburing.h>
inline constexpr bool kHaveIoUring = true;
#else
inline constexpr bool kHaveIoUring = false;
#endif

namespace twinmatch::trade {

// The counts, in contract/trade.py's STAT_KEYS order.
struct TradeStats {
    std::uint64_t book_messages = 0, signals = 0, sent = 0, killed = 0, cooldown = 0,
                  throttled = 0, capped = 0, kill_switch = 0, accepted = 0, canceled = 0,
                  executed = 0, rejected = 0, open = 0, send_errors = 0;
};
static_assert(sizeof(TradeStats) == 14 * 8, "one u64 per STAT_KEYS name");

struct StrategyConfig {
    std::uint64_t imbalance = 3, qty = 100;
    std::int64_t cooldown_ns = 1'000'000'000;
    std::uint64_t max_per_second = 50, max_open = 64, max_orders = 100'000;
};

constexpr std::size_t kOrderBytes = 50;  // 2 + 1 ('U') + 47 (Enter Order)
constexpr std::size_t kStages = 9;       // contract/trade.py's STAGES
enum Stage { kKernel, kUser, kDecoded, kApplied, kDecided, kEncoded, kSent, kServer, kAcked };

inline void put_be32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}
inline void put_be64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}

// --8<-- [start:encode]
// contract/trade.py's enter_order, written in place: 50 bytes, big-endian fields at
// fixed offsets (a Python programmer's struct.pack, by hand).
inline void encode_enter(std::uint8_t* p, std::uint32_t urn, char side,
                         std::uint32_t qty, const char* stock8, std::uint32_t price) {
    p[0] = 0;
    p[1] = kOrderBytes - 2;  // SoupBinTCP Packet Length
    p[2] = 'U';              // Unsequenced Data
    p[3] = 'O';              // OUCH Enter Order
    put_be32(p + 4, urn);
    p[8] = static_cast<std::uint8_t>(side);
    put_be32(p + 9, qty);
    std::memcpy(p + 13, stock8, 8);
    put_be64(p + 21, price);
    std::memcpy(p + 29, "3YPNN", 5);  // IOC, displayed, principal, no ISO, no cross
    char cl[14];
    std::memset(cl, ' ', sizeof cl);
    cl[0] = cl[1] = 'T';
    char digits[10];
    int n = 0;
    for (std::uint32_t v = urn; n == 0 || v != 0; v /= 10)
        digits[n++] = char('0' + v % 10);  // the decimal digits, last first
    for (int i = 0; i < n; ++i) cl[2 + i] = digits[n - 1 - i];
    std::memcpy(p + 34, cl, sizeof cl);
    p[48] = p[49] = 0;  // Appendage Length 0
}
// --8<-- [end:encode]

// --8<-- [start:strategy]
// contract/trade.py's rule and risk checks; per-symbol state in flat arrays by locate.
class Strategy {
public:
    TradeStats st;
    bool tripped = false;
    std::uint32_t urn = 0;

    explicit Strategy(const StrategyConfig& cfg)
        : cfg_(cfg), signal_(0x10000, 0), last_order_(0x10000, -1) {}

    // After one book message: writes the order to out and returns kOrderBytes, or 0.
    // Prices 0: that side is empty.
    std::size_t decide(std::uint16_t locate, const char* stock8, std::int64_t ts,
                       std::uint32_t bid, std::uint64_t bid_qty, std::uint32_t ask,
                       std::uint64_t ask_qty, std::uint64_t open, std::uint8_t* out) {
        ++st.book_messages;
        int signal = 0;
        if (bid != 0 && ask != 0 && bid < ask) {
            if (bid_qty >= cfg_.imbalance * ask_qty) signal = 1;
            else if (ask_qty >= cfg_.imbalance * bid_qty) signal = -1;
        }
        const int before = signal_[locate];
        signal_[locate] = static_cast<std::int8_t>(signal);
        if (signal == 0 || signal == before) return 0;
        ++st.signals;
        if (!pass(locate, ts, open)) return 0;
        const bool buy = signal > 0;
        const std::uint64_t shares =
            std::min<std::uint64_t>(cfg_.qty, buy ? ask_qty : bid_qty);
        encode_enter(out, ++urn, buy ? 'B' : 'S', static_cast<std::uint32_t>(shares),
                     stock8, buy ? ask : bid);
        return kOrderBytes;
    }
// --8<-- [end:strategy]

private:
    StrategyConfig cfg_;
    std::vector<std::int8_t> signal_;        // locate -> +1 BUY, -1 SELL, 0 none
    std::vector<std::int64_t> last_order_;   // locate -> feed time of its last order, -1 none
    std::int64_t second_ = -1;
    std::uint64_t in_second_ = 0;

    // --8<-- [start:checks]
    bool pass(std::uint16_t locate, std::int64_t ts, std::uint64_t open) {
        if (tripped) return ++st.killed, false;
        const std::int64_t last = last_order_[locate];
        if (last >= 0 && ts - last < cfg_.cooldown_ns) return ++st.cooldown, false;
        if (ts / 1'000'000'000 != second_) second_ = ts / 1'000'000'000, in_second_ = 0;
        if (in_second_ >= cfg_.max_per_second) return ++st.throttled, false;
        if (st.sent >= cfg_.max_orders) return ++st.capped, false;
        if (open >= cfg_.max_open) {
            tripped = true;
            return ++st.kill_switch, false;
        }
        ++st.sent;
        ++in_second_;
        last_order_[locate] = ts;
        return true;
    }
    // --8<-- [end:checks]
};

enum class Stop : int { Running = 0, End = 1, Idle = 2, Deadline = 3, OrdersClosed = 4 };

// --8<-- [start:paths]
// How the feed's datagrams are read (the chapter compares them under a burst):
//   Recvmmsg: up to `batch` datagrams per system call (batch 1: one per call);
//   Recvmsg:  recvmsg(2), one datagram per call, the plainest read;
//   IoUring:  `batch` receive requests kept queued in an io_uring; the kernel fills
//             them as datagrams arrive and the loop reaps completions from shared
//             memory, so a busy loop makes no system call per datagram to learn of one
//             (one io_uring_submit per round re-arms the requests it reaped).
enum class RxPath : int { Recvmmsg = 0, Recvmsg = 1, IoUring = 2 };
// --8<-- [end:paths]

class Trader {
public:
    feed::FeedCore core;
    Market market{Mode::Book};
    Strategy strategy;
    int fd = -1;              // the feed's UDP socket, bound to 127.0.0.1
    int order_fd = -1;        // the logged-in SoupBinTCP session (not ours to close)
    std::uint16_t port = 0;
    int request_port = -1;
    std::size_t batch;
    bool spin;
    RxPath path;
    std::uint64_t bad_itch = 0, batches = 0, datagrams = 0;
    // socket-to-book per delivered datagram: the kernel's receive to its messages in the
    // book (and shown to the strategy, the orders sent): every datagram, not only those
    // that led to an order.
    Histogram socket_to_book;
    std::int64_t stamp_cost_ns = 0, first_ns = 0, last_rx = 0, ended = 0, stop_ns = 0;
    Stop stop = Stop::Running;

    Trader(int port_, int request_port_, std::uint64_t start, std::int64_t timeout,
           std::uint32_t retries, std::size_t batch_, int rcvbuf, bool spin_,
           const std::string& session, std::size_t hold, std::uint64_t max_jump,
           int order_fd_, const StrategyConfig& cfg, RxPath path_ = RxPath::Recvmmsg)
        : core(start, timeout, retries, session, hold, max_jump), strategy(cfg),
          order_fd(order_fd_), request_port(request_port_),
          batch(std::clamp<std::size_t>(batch_, 1, feed::kMaxBatch)), spin(spin_), path(path_),
          bufs_(feed::kMaxBatch * feed::kMaxDatagram), rows_(cfg.max_orders + 1),
          leaves_(cfg.max_orders + 1, 0), names_(0x10000 * 8, ' '),
          sent_log_(cfg.max_orders * kOrderBytes) {
        fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) throw std::runtime_error("socket(): " + std::string(std::strerror(errno)));
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
        sockaddr_in a = loopback(static_cast<std::uint16_t>(port_));
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            const int e = errno;
            ::close(fd);
            throw std::runtime_error("bind(127.0.0.1:" + std::to_string(port_) +
                                     "): " + std::strerror(e));
        }
        socklen_t n = sizeof a;
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
        port = ntohs(a.sin_port);
        for (std::size_t i = 0; i < feed::kMaxBatch; ++i) {
            iov_[i].iov_base = &bufs_[i * feed::kMaxDatagram];
            iov_[i].iov_len = feed::kMaxDatagram;
        }
        fills_.reserve(1 << 12);
        stamp_cost_ns = measure_stamp_cost();
        if (path == RxPath::IoUring) start_ring();
    }
    ~Trader() {
#ifdef TWINMATCH_HAVE_LIBURING
        if (ring_on_) io_uring_queue_exit(&ring_);
#endif
        if (fd >= 0) ::close(fd);
    }
    Trader(const Trader&) = delete;
    Trader& operator=(const Trader&) = delete;

    const char* clock_name() const { return clock_.name(); }
    std::size_t orders() const { return strategy.urn; }
    const std::array<std::int64_t, kStages>& row(std::size_t urn) const { return rows_[urn]; }
    // Every order sent, in order: the bytes handed to send() (the twins' byte-for-byte test).
    const std::uint8_t* sent_log() const { return sent_log_.data(); }
    std::size_t sent_bytes() const { return sent_len_; }

    // Run until the stop condition or `until` (CLOCK_REALTIME ns), whichever is first.
    // begin/idle_ns/max_ns: the run's start and its two limits, as naive/trade.py's run().
    Stop run_until(std::int64_t until, std::int64_t begin, std::int64_t idle_ns,
                   std::int64_t max_ns) {
        if (last_rx == 0) last_rx = begin, last_hb_ = begin;
        while (stop == Stop::Running) {
            std::int64_t now = feed::now_ns();
            if (now >= until) break;
            std::int64_t wake = std::min({last_rx + idle_ns, begin + max_ns, until});
            if (core.request_on) wake = std::min(wake, core.request_deadline);
            wait(std::max<std::int64_t>(0, std::min<std::int64_t>(wake - now, 100'000'000)));
            read_answers();
            read_feed();
            now = feed::now_ns();
            check_gap(now);
            if (now - std::max(last_hb_, last_sent_) >= 1'000'000'000) {  // SoupBinTCP R
                static constexpr std::uint8_t kHeartbeat[3] = {0, 1, 'R'};
                (void)::send(order_fd, kHeartbeat, 3, MSG_NOSIGNAL | MSG_DONTWAIT);
                last_hb_ = now;
            }
            if (stop != Stop::Running) break;
            if (core.done()) {
                if (ended == 0) ended = now;
                if (strategy.st.open == 0 || now - ended > 1'000'000'000) stop = Stop::End;
            } else if (now - last_rx >= idle_ns) {
                stop = Stop::Idle;
            } else if (now - begin >= max_ns) {
                stop = Stop::Deadline;
            }
        }
        if (stop != Stop::Running && stop_ns == 0) stop_ns = feed::now_ns();
        return stop;
    }

private:
    StampClock clock_;
    std::vector<std::uint8_t> bufs_;
    std::array<iovec, feed::kMaxBatch> iov_{};
    std::array<mmsghdr, feed::kMaxBatch> msgs_{};
    std::array<std::array<char, 64>, feed::kMaxBatch> ctrl_{};
    std::vector<std::array<std::int64_t, kStages>> rows_;  // by UserRefNum
    std::vector<std::uint32_t> leaves_;                    // shares not answered for
    std::vector<char> names_;                              // locate -> 8-byte stock
    std::vector<FillRecord> fills_;
    std::vector<std::uint8_t> sent_log_;                   // max_orders orders, made at start
    std::size_t sent_len_ = 0;
    std::array<std::uint8_t, kOrderBytes> order_{};
    std::array<std::uint8_t, 1 << 16> in_{};               // answers not yet whole
    std::size_t in_len_ = 0;
    std::int64_t last_hb_ = 0, last_sent_ = 0;
    std::int64_t rx_real_ = 0, rx_tsc_ = 0;  // the last read: CLOCK_REALTIME and TSC ns

    static sockaddr_in loopback(std::uint16_t p) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(p);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1: the only address used
        return a;
    }

    // A stamp on CLOCK_REALTIME's scale: the last read's realtime plus TSC ns since then.
    std::int64_t stamp() const {
        return rx_real_ + (static_cast<std::int64_t>(clock_.now_ns()) - rx_tsc_);
    }

    std::int64_t measure_stamp_cost() const {
        std::array<std::int64_t, 1001> t{};
        for (auto& v : t) v = static_cast<std::int64_t>(clock_.now_ns());
        std::array<std::int64_t, 1000> d{};
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = t[i + 1] - t[i];
        std::nth_element(d.begin(), d.begin() + 500, d.end());
        return d[500];
    }

    void wait(std::int64_t timeout_ns) {
        if (spin) {  // burn the core: the reads below are non-blocking anyway
            const std::int64_t until = feed::now_ns() + std::min<std::int64_t>(timeout_ns, 1'000'000);
            char b;
            while (feed::now_ns() < until)
                if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
                    recv(order_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0) return;
            return;
        }
        int watch = fd;
#ifdef TWINMATCH_HAVE_LIBURING
        if (ring_on_) {
            if (io_uring_cq_ready(&ring_)) return;
            watch = ring_.ring_fd;  // readable when a completion is waiting
        }
#endif
        pollfd p[2] = {{watch, POLLIN, 0}, {order_fd, POLLIN, 0}};
        const int ms = static_cast<int>(std::clamp<std::int64_t>((timeout_ns + 999'999) / 1'000'000, 0, 100));
        ::poll(p, 2, ms);
    }

    void read_feed() {
        if (path == RxPath::Recvmsg) return read_recvmsg();
#ifdef TWINMATCH_HAVE_LIBURING
        if (ring_on_) return read_ring();
#endif
        read_recvmmsg();
    }

    void arm(std::size_t i) {  // the kernel rewrites these on every read
        msgs_[i].msg_hdr = msghdr{};
        msgs_[i].msg_hdr.msg_iov = &iov_[i];
        msgs_[i].msg_hdr.msg_iovlen = 1;
        msgs_[i].msg_hdr.msg_control = ctrl_[i].data();
        msgs_[i].msg_hdr.msg_controllen = ctrl_[i].size();
    }

    // One datagram: into the core, and whatever that delivers into the book.
    void datagram(std::size_t i, std::size_t len) {
        const msghdr& h = msgs_[i].msg_hdr;
        if (h.msg_flags & MSG_TRUNC) {
            ++core.st.packets;
            ++core.st.truncated;
            return;
        }
        core.on_packet(&bufs_[i * feed::kMaxDatagram], len, kernel_time(h, rx_real_), rx_real_);
        deliver();
    }

    void stamp_read(std::size_t n) {
        rx_real_ = feed::now_ns();
        rx_tsc_ = static_cast<std::int64_t>(clock_.now_ns());
        last_rx = rx_real_;
        if (first_ns == 0) first_ns = rx_real_;
        ++batches;
        datagrams += n;
    }

    void read_recvmsg() {
        for (int round = 0; round < 4096; ++round) {  // bounded: the answers get a turn too
            arm(0);
            const ssize_t got = ::recvmsg(fd, &msgs_[0].msg_hdr, MSG_DONTWAIT);
            if (got < 0) return;
            stamp_read(1);
            datagram(0, static_cast<std::size_t>(got));
        }
    }

#ifdef TWINMATCH_HAVE_LIBURING
    io_uring ring_{};
    bool ring_on_ = false;

    void start_ring() {
        const int rc = io_uring_queue_init(static_cast<unsigned>(2 * batch), &ring_, 0);
        if (rc < 0)
            throw std::runtime_error("io_uring_queue_init: " + std::string(std::strerror(-rc)) +
                                     " (io_uring may be disabled: kernel.io_uring_disabled, "
                                     "or a seccomp filter)");
        ring_on_ = true;
        for (std::size_t i = 0; i < batch; ++i) queue_recv(i);
        io_uring_submit(&ring_);
    }
    void queue_recv(std::size_t i) {
        arm(i);
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never full: 2 * batch entries
        io_uring_prep_recvmsg(sqe, fd, &msgs_[i].msg_hdr, 0);
        io_uring_sqe_set_data64(sqe, i);
    }
    // --8<-- [start:read_ring]
    void read_ring() {
        std::array<io_uring_cqe*, feed::kMaxBatch> cqes;
        for (int round = 0; round < 64; ++round) {
            const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes.data(),
                                                       static_cast<unsigned>(batch));
            if (n == 0) return;
            stamp_read(n);
            for (unsigned k = 0; k < n; ++k) {
                const auto i = std::size_t{io_uring_cqe_get_data64(cqes[k])};
                const int res = cqes[k]->res;
                io_uring_cqe_seen(&ring_, cqes[k]);
                if (res >= 0) datagram(i, static_cast<std::size_t>(res));
                queue_recv(i);  // re-arm the slot it used
            }
            io_uring_submit(&ring_);
        }
    }
    // --8<-- [end:read_ring]
#else
    void start_ring() {
        throw std::runtime_error("this build has no io_uring receive path: liburing was not "
                                 "found when it was built (apt-get install liburing-dev)");
    }
#endif

    // --8<-- [start:read_feed]
    void read_recvmmsg() {
        for (int round = 0; round < 64; ++round) {  // bounded: the answers get a turn too
            for (std::size_t i = 0; i < batch; ++i) arm(i);
            const int n = recvmmsg(fd, msgs_.data(), static_cast<unsigned>(batch), MSG_DONTWAIT,
                                   nullptr);
            if (n <= 0) return;
            stamp_read(static_cast<std::size_t>(n));
            for (int i = 0; i < n; ++i)
                datagram(static_cast<std::size_t>(i), msgs_[i].msg_len);
            if (static_cast<std::size_t>(n) < batch) return;
        }
    }
    // --8<-- [end:read_feed]

    // What the core delivered (this datagram's messages, and any held ones it released):
    // stamped with the first delivered packet's two times (this datagram's, when it
    // delivered itself; the packet that closed a gap, when that released others).
    void deliver() {
        if (core.out_len() == 0) return;
        const std::int64_t* t = core.times();
        apply(core.out(), core.out_len(), t[0], t[1]);
        const std::int64_t done = stamp();
        for (std::size_t k = 0; k < core.delivered_packets(); ++k)
            socket_to_book.record(static_cast<std::uint64_t>(std::max<std::int64_t>(done - t[2 * k], 0)));
        core.take();
    }

    // --8<-- [start:apply]
    void apply(const std::uint8_t* b, std::size_t n, std::int64_t t_kernel,
               std::int64_t t_user) {
        std::size_t off = 0;
        ItchEvent e;
        while (n - off >= 2) {
            const std::size_t len = itch::be16(b + off);
            if (len == 0) {  // refused, as the naive twin's decoder does: skip it
                ++bad_itch;
                off += 2;
                continue;
            }
            if (n - off - 2 < len) break;  // never: the core delivers whole blocks
            const std::uint8_t* msg = b + off + 2;
            off += 2 + len;
            const std::uint8_t type = msg[0];
            const std::size_t want = itch::kLength[type];
            if (want == 0) continue;                  // a type ITCH 5.0 lacks: skipped
            if (want != len) { ++bad_itch; continue; }  // a wrong length: refused
            if (type == 'R') std::memcpy(&names_[8 * itch::be16(msg + 1)], msg + 11, 8);
            if (!itch::decode_event(msg, e)) continue;
            const std::int64_t t_decoded = stamp();
            market.run(&e, 1, fills_);
            fills_.clear();
            if (std::memchr("AFECXDU", type, 7) != nullptr)
                look(e, t_kernel, t_user, t_decoded);
        }
    }
    // --8<-- [end:apply]

    void look(const ItchEvent& e, std::int64_t t_kernel, std::int64_t t_user,
              std::int64_t t_decoded) {
        const std::int64_t t_applied = stamp();
        std::uint64_t bid_qty = 0, ask_qty = 0;
        const std::uint32_t bid = market.best(e.locate, Side::Buy, bid_qty);
        const std::uint32_t ask = market.best(e.locate, Side::Sell, ask_qty);
        const std::size_t len = strategy.decide(
            e.locate, &names_[8 * std::size_t{e.locate}], static_cast<std::int64_t>(e.timestamp),
            bid, bid_qty, ask, ask_qty, strategy.st.open, order_.data());
        if (len == 0) return;
        const std::int64_t t_encoded = stamp();  // decided and encoded: one step here
        const ssize_t sent = ::send(order_fd, order_.data(), len, MSG_NOSIGNAL | MSG_DONTWAIT);
        const std::int64_t t_sent = stamp();
        if (sent != static_cast<ssize_t>(len)) {
            ++strategy.st.send_errors;
            strategy.tripped = true;  // a session that cannot take an order: stop
            return;
        }
        last_sent_ = t_sent;
        std::memcpy(&sent_log_[sent_len_], order_.data(), len);  // room: max_orders orders
        sent_len_ += len;
        const std::uint32_t urn = strategy.urn;
        leaves_[urn] = (std::uint32_t{order_[9]} << 24) | (std::uint32_t{order_[10]} << 16) |
                       (std::uint32_t{order_[11]} << 8) | order_[12];
        ++strategy.st.open;
        rows_[urn] = {t_kernel, t_user, t_decoded, t_applied, t_encoded, t_encoded, t_sent, 0, 0};
    }

    // --8<-- [start:answers]
    void read_answers() {
        for (int round = 0; round < 16; ++round) {
            const ssize_t got = ::recv(order_fd, in_.data() + in_len_, in_.size() - in_len_,
                                       MSG_DONTWAIT);
            if (got == 0) { stop = Stop::OrdersClosed; return; }
            if (got < 0) return;  // EAGAIN: nothing more now
            const std::int64_t now = feed::now_ns();
            in_len_ += static_cast<std::size_t>(got);
            std::size_t at = 0;
            while (in_len_ - at >= 2) {
                const std::size_t plen = itch::be16(in_.data() + at);
                if (plen == 0 || plen > in_.size() - 2) { stop = Stop::OrdersClosed; return; }
                if (in_len_ - at < 2 + plen) break;
                answer(in_.data() + at + 2, plen, now);
                at += 2 + plen;
            }
            std::memmove(in_.data(), in_.data() + at, in_len_ - at);
            in_len_ -= at;
        }
    }
    // --8<-- [end:answers]

    void answer(const std::uint8_t* p, std::size_t len, std::int64_t now) {
        if (p[0] != 'S' || len < 14) return;  // sequenced data with a UserRefNum only
        const std::uint8_t kind = p[1];
        const std::uint32_t urn = itch::be32(p + 10);
        if (urn == 0 || urn > strategy.urn || leaves_[urn] == 0) return;
        TradeStats& st = strategy.st;
        if (kind == 'A') {
            ++st.accepted;
            const std::int64_t server = static_cast<std::int64_t>(itch::be64(p + 2));
            auto& r = rows_[urn];
            constexpr std::int64_t kDay = 86'400'000'000'000;
            r[kServer] = r[kSent] - r[kSent] % kDay + server;
            r[kAcked] = now;
        } else if (kind == 'C' || kind == 'J') {
            ++(kind == 'C' ? st.canceled : st.rejected);
            close_order(urn);
        } else if (kind == 'E' && len >= 18) {
            ++st.executed;
            const std::uint32_t q = itch::be32(p + 14);
            leaves_[urn] = q >= leaves_[urn] ? 0 : leaves_[urn] - q;
            if (leaves_[urn] == 0) --st.open;
        }
    }
    void close_order(std::uint32_t urn) {
        if (leaves_[urn] != 0) {
            leaves_[urn] = 0;
            --strategy.st.open;
        }
    }

    void check_gap(std::int64_t now) {
        std::uint64_t seq = 0;
        std::uint32_t count = 0;
        if (core.check_gap(now, request_port >= 0, seq, count)) {
            std::uint8_t req[feed::kMoldHeader];
            std::memcpy(req, core.session, 10);
            const std::uint64_t s = __builtin_bswap64(seq);
            const std::uint16_t c = __builtin_bswap16(static_cast<std::uint16_t>(count));
            std::memcpy(req + 10, &s, 8);
            std::memcpy(req + 18, &c, 2);
            sockaddr_in a = loopback(static_cast<std::uint16_t>(request_port));
            ::sendto(fd, req, sizeof req, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
        }
        deliver();  // a gap given up may release held packets
    }

    static std::int64_t kernel_time(const msghdr& h, std::int64_t fallback) {
        for (cmsghdr* c = CMSG_FIRSTHDR(const_cast<msghdr*>(&h)); c != nullptr;
             c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
                timespec ts;
                std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
            }
        return fallback;
    }
};

}  // namespace twinmatch::trade
