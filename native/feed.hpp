// A live MoldUDP64 feed handler, the optimized twin: recvmmsg batches from a UDP socket on
// 127.0.0.1, held-back packets in a fixed pool, re-requests for gaps. The rules and the
// names of the counts are contract/feed.py's (naive/feed.py is the readable twin); the
// framing is native/pcap.hpp's (be16/be64, mold_blocks_end). Everything is allocated when
// the receiver is made: reading, checking, holding back and delivering a packet never
// allocates. Delivered messages (framed ITCH blocks, in sequence) collect in `out()`, with
// each delivered packet's two timestamps, until the caller hands them to the market.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "pcap.hpp"

namespace twinmatch::feed {

using pcap::be16;
using pcap::be64;
using pcap::kMoldHeader;

constexpr std::size_t kMaxDatagram = 2048;  // MAX_DATAGRAM in contract/feed.py
constexpr std::size_t kMaxPending = 1024;   // MAX_PENDING: packets held back, by default
constexpr std::size_t kMaxHold = 16'384;    // MAX_HOLD: the most a receiver may hold
constexpr std::uint64_t kMaxJump = 1 << 20;  // MAX_JUMP: messages past `known` believed
constexpr std::uint64_t kResyncPackets = 3;  // RESYNC_PACKETS
constexpr std::uint32_t kMaxRequest = 0xFFFE;
constexpr std::uint16_t kEndOfSession = 0xFFFF;
constexpr std::size_t kMaxBatch = 1024;     // the largest recvmmsg batch a receiver takes

// The counts, in contract/feed.py's STAT_KEYS order (tests/test_feed.py checks the names).
struct FeedStats {
    std::uint64_t packets = 0, truncated = 0, not_moldudp64 = 0, bad_moldudp64 = 0,
                  wrong_session = 0, unsynced = 0, suspect = 0, data_packets = 0, heartbeats = 0, end_of_session = 0,
                  messages = 0, duplicate_packets = 0, duplicate_messages = 0, gaps = 0,
                  gap_messages = 0, buffered = 0, overflow = 0, requests = 0, recovered = 0,
                  lost = 0, next_seq = 0;
};
static_assert(sizeof(FeedStats) == 21 * 8, "one u64 per STAT_KEYS name");

inline std::int64_t now_ns() {  // CLOCK_REALTIME: the clock of the kernel's timestamps
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A packet held back behind a gap: its message blocks and its two timestamps.
struct Held {
    std::uint64_t seq = 0, count = 0;
    std::uint32_t len = 0;
    std::int64_t t_kernel = 0, t_user = 0;
};

// The rules, without a socket: what on_packet() is given, it checks, counts, holds back or
// delivers. The socket half (Receiver, below) feeds it datagrams.
class FeedCore {
public:
    FeedStats st;
    std::uint64_t expected, known;  // next to deliver; one past the highest known to exist
    // have_session: configured, or adopted from the first data packet (synced).
    bool have_session = false, synced = false, end_seen = false;
    char session[10] = {};
    // The outstanding request: the sequence asked for and when to ask again.
    bool request_on = false;
    std::uint64_t request_seq = 0;
    std::int64_t request_deadline = 0;
    std::uint64_t max_jump = kMaxJump;
    std::uint64_t resync_next = 0, resync_run = 0;  // the run of too-far data packets
    std::int64_t asked_at = 0;  // when the run at request_seq was first asked for
    std::uint32_t tries = 0, retries;
    std::int64_t timeout_ns;

    // session_: the feed's session name, 10 bytes (empty: adopt the first data packet's).
    // hold: packets it may hold back behind gaps (1..kMaxHold).
    FeedCore(std::uint64_t start, std::int64_t timeout, std::uint32_t retries_,
             const std::string& session_ = {}, std::size_t hold = kMaxPending,
             std::uint64_t max_jump_ = kMaxJump)
        : expected(start), known(start), max_jump(max_jump_), retries(retries_),
          timeout_ns(timeout),
          hold_(check_hold(hold)), held_(hold), held_data_(hold * kMaxDatagram),
          free_(hold), ord_(hold), out_((2 * kMaxBatch + hold) * kMaxDatagram),
          times_((2 * kMaxBatch + hold) * 2) {
        st.next_seq = start;
        if (session_.size() == 10) {
            std::memcpy(session, session_.data(), 10);
            have_session = true;
        } else if (!session_.empty()) {
            throw std::invalid_argument("a MoldUDP64 session is 10 bytes");
        }
        for (std::size_t i = 0; i < hold_; ++i) free_[i] = static_cast<std::uint32_t>(i);
        n_free_ = hold_;
    }

    // --8<-- [start:packet]
    void on_packet(const std::uint8_t* p, std::size_t len, std::int64_t t_kernel,
                   std::int64_t t_user) {
        ++st.packets;
        if (len < kMoldHeader) { ++st.not_moldudp64; return; }
        const std::uint64_t seq = be64(p + 10);
        const std::uint16_t count = be16(p + 18);
        std::size_t end = kMoldHeader;
        const bool data = count != 0 && count != kEndOfSession;
        if (data) {  // every block must fit; seq 1..; the next seq (seq + count) a u64
            end = pcap::mold_blocks_end(p, len, count);
            if (end == 0 || seq == 0 || seq > pcap::kU64Max - count) {
                ++st.bad_moldudp64;
                return;
            }
        }
        if (!trusted(p, seq, data ? count : 0)) return;
        if (!data) {  // heartbeat / end of session: seq is the next sequence number
            if (count == 0) ++st.heartbeats; else { ++st.end_of_session; end_seen = true; }
            learn(seq, seq);
            return;
        }
        ++st.data_packets;
        place(seq, count, p + kMoldHeader, end - kMoldHeader, t_kernel, t_user);
    }
    // --8<-- [end:packet]

    // --8<-- [start:trust]
    // Is this packet (count 0: a heartbeat or end) of our session, and believable?
    // Counted if not.
    bool trusted(const std::uint8_t* p, std::uint64_t seq, std::uint64_t count) {
        if (have_session && std::memcmp(session, p, 10) != 0) {
            ++st.wrong_session;
            return false;
        }
        if (!synced) {
            if (count) {  // the first data packet: evidence of session and position
                std::memcpy(session, p, 10);
                have_session = synced = true;
                if (expected == 0) expected = known = seq;  // start 0: it decides
                return true;  // the one packet not judged by max_jump
            }
            if (!have_session || expected == 0) {
                ++st.unsynced;  // whose heartbeat, or where from? It proves nothing yet
                return false;
            }
        }
        const std::uint64_t claim = seq + count;  // no wrap: seq <= 2^64 - 1 - count
        if (claim <= known || claim - known <= max_jump) return true;
        // Too far ahead: believed only when kResyncPackets data packets in a row
        // continue each other from there (a heartbeat alone never is).
        if (count) {
            resync_run = seq == resync_next ? resync_run + 1 : 1;
            resync_next = claim;
            if (resync_run >= kResyncPackets) {
                resync_next = resync_run = 0;
                return true;
            }
        }
        ++st.suspect;
        return false;
    }
    // --8<-- [end:trust]

    // --8<-- [start:place]
    // A data packet of the session: a duplicate, held back, or delivered.
    void place(std::uint64_t seq, std::uint64_t count, const std::uint8_t* blocks,
               std::size_t len, std::int64_t t_kernel, std::int64_t t_user) {
        if (seq + count <= expected || find_held(seq) != kNone) {
            ++st.duplicate_packets;
            st.duplicate_messages += count;
            return;
        }
        learn(seq, seq);  // what is missing before it
        if (seq > expected && n_free_ == 0) {
            ++st.overflow;  // no room to hold it
            if (!waited_out(t_kernel)) return;  // dropped: missing now, to be asked for
            // The server had its time: give up what is missing before this packet (or
            // before the first held one); what is held behind that is delivered.
            give_up(std::min(seq, held_[ord_[head_]].seq));
        }
        learn(seq, seq + count);
        if (seq + count <= expected) {  // what a give-up released covered it
            ++st.duplicate_packets;
            st.duplicate_messages += count;
            return;
        }
        if (seq > expected) {  // ahead of a gap: hold it back (room is certain here)
            ++st.buffered;
            const std::uint32_t slot = free_[--n_free_];
            Held& h = held_[slot];
            h.seq = seq; h.count = count; h.len = static_cast<std::uint32_t>(len);
            h.t_kernel = t_kernel; h.t_user = t_user;
            std::memcpy(&held_data_[slot * kMaxDatagram], blocks, len);
            insert_held(slot);
            return;
        }
        deliver(seq, count, blocks, len, t_kernel, t_user);
        drain();
    }
    // --8<-- [end:place]

    // --8<-- [start:gap]
    // Ask for the first run of missing messages; give it up after `retries` tries. Returns
    // true with (seq, count) set when a request is due now (the caller sends it).
    bool check_gap(std::int64_t now, bool have_server, std::uint64_t& seq, std::uint32_t& count) {
        while (expected < known) {
            const std::uint64_t end = n_held() ? held_[ord_[head_]].seq : known;
            if (request_on && request_seq == expected) {
                if (now < request_deadline) return false;  // the reply has time yet
                ++tries;
                if (tries > (have_server ? retries : 0)) {  // give up: skip the run
                    give_up(end);
                    continue;
                }
            } else {
                tries = 0;
                asked_at = now;  // a new run: its first request
            }
            request_on = true;
            request_seq = expected;
            if (__builtin_add_overflow(now, timeout_ns, &request_deadline))  // no UB on
                request_deadline = timeout_ns > 0 ? INT64_MAX : INT64_MIN;  // any int64
            if (!have_server || !have_session) return false;
            seq = expected;
            count = static_cast<std::uint32_t>(std::min<std::uint64_t>(end - expected, kMaxRequest));
            ++st.requests;
            return true;
        }
        request_on = false;
        return false;
    }
    // --8<-- [end:gap]

    // Known to exist, not delivered, not held back, not given up (held in seq order).
    std::uint64_t missing() const {
        std::uint64_t covered = 0, pos = expected;
        for (std::size_t i = head_; i < tail_; ++i) {
            const Held& h = held_[ord_[i]];
            if (h.seq + h.count > pos) {
                covered += h.seq + h.count - std::max(h.seq, pos);
                pos = h.seq + h.count;
            }
        }
        return known - expected - covered;
    }
    bool done() const { return end_seen && expected >= known && n_held() == 0; }
    std::size_t held() const { return n_held(); }

    // What was delivered since the last take: framed blocks and (t_kernel, t_user) pairs.
    const std::uint8_t* out() const { return out_.data(); }
    std::size_t out_len() const { return out_len_; }
    const std::int64_t* times() const { return times_.data(); }
    std::size_t delivered_packets() const { return n_times_; }
    void take() { out_len_ = 0; n_times_ = 0; }
    // Room for one more batch of `batch` datagrams? Each delivers its own messages and may
    // release held packets, but each held packet is delivered once: at most batch +
    // hold packets' worth.
    bool room(std::size_t batch) const {
        return out_len_ + (batch + hold_) * kMaxDatagram <= out_.size() &&
               n_times_ + batch + hold_ <= times_.size() / 2;
    }

private:
    static constexpr std::size_t kNone = ~std::size_t{0};
    std::size_t hold_;
    std::vector<Held> held_;               // the slots
    std::vector<std::uint8_t> held_data_;  // slot i's blocks at i * kMaxDatagram
    std::vector<std::uint32_t> free_;      // free slots: free_[0 .. n_free_)
    // The held slots in sequence order: ord_[head_ .. tail_). Packets usually arrive in
    // order, so an insert is usually an append, and delivery pops from the front.
    std::vector<std::uint32_t> ord_;
    std::size_t n_free_ = 0, head_ = 0, tail_ = 0;
    std::vector<std::uint8_t> out_;
    std::size_t out_len_ = 0;
    std::vector<std::int64_t> times_;
    std::size_t n_times_ = 0;

    void learn(std::uint64_t first, std::uint64_t end) {
        if (first > known) {  // sequence numbers known..first-1 exist and are missing
            ++st.gaps;
            st.gap_messages += first - known;
        }
        known = std::max(known, end);
    }

    static std::size_t check_hold(std::size_t hold) {
        if (hold < 1 || hold > kMaxHold) throw std::invalid_argument("hold: 1..16384 packets");
        return hold;
    }
    std::size_t n_held() const { return tail_ - head_; }
    // First place in ord_[head_ .. tail_) whose sequence is >= seq (binary search).
    std::size_t lower(std::uint64_t seq) const {
        std::size_t lo = head_, hi = tail_;
        while (lo < hi) {
            const std::size_t mid = lo + (hi - lo) / 2;
            if (held_[ord_[mid]].seq < seq) lo = mid + 1; else hi = mid;
        }
        return lo;
    }
    std::size_t find_held(std::uint64_t seq) const {
        const std::size_t i = lower(seq);
        return i < tail_ && held_[ord_[i]].seq == seq ? i : kNone;
    }
    void insert_held(std::uint32_t slot) {
        if (tail_ == hold_) {  // no room at the back: slide the live part to the front
            std::memmove(ord_.data(), ord_.data() + head_, n_held() * sizeof(std::uint32_t));
            tail_ -= head_;
            head_ = 0;
        }
        const std::size_t i = lower(held_[slot].seq);
        std::memmove(ord_.data() + i + 1, ord_.data() + i, (tail_ - i) * sizeof(std::uint32_t));
        ord_[i] = slot;
        ++tail_;
    }
    // Was the run at `expected` asked for at least timeout_ns before the kernel received
    // this packet? Then a timely reply would have been read before it, however far
    // behind the receiver is (the kernel's timestamps and now_ns() share one clock).
    bool waited_out(std::int64_t t_kernel) const {
        if (!request_on || request_seq != expected) return false;
        std::int64_t waited;  // times come from Python too: any int64, so no overflow
        if (__builtin_sub_overflow(t_kernel, asked_at, &waited)) return t_kernel > asked_at;
        return waited >= timeout_ns;
    }
    // Count messages expected .. end-1 as lost; deliver what is then in sequence.
    void give_up(std::uint64_t end) {
        st.lost += end - expected;
        expected = st.next_seq = end;
        request_on = false;
        drain();
    }

    // --8<-- [start:deliver]
    void deliver(std::uint64_t seq, std::uint64_t count, const std::uint8_t* blocks,
                 std::size_t len, std::int64_t t_kernel, std::int64_t t_user) {
        const std::uint64_t skip = expected - seq;  // messages already delivered
        std::size_t pos = 0;
        for (std::uint64_t i = 0; i < skip; ++i) pos += 2 + std::size_t{be16(blocks + pos)};
        std::memcpy(&out_[out_len_], blocks + pos, len - pos);
        out_len_ += len - pos;
        times_[2 * n_times_] = t_kernel;
        times_[2 * n_times_ + 1] = t_user;
        ++n_times_;
        st.duplicate_messages += skip;
        st.messages += count - skip;
        expected = st.next_seq = seq + count;
    }
    // --8<-- [end:deliver]

    void drain() {  // deliver the held-back packets that are now in sequence
        while (n_held()) {
            const std::uint32_t slot = ord_[head_];
            const Held h = held_[slot];
            if (h.seq > expected) return;
            if (++head_ == tail_) head_ = tail_ = 0;
            free_[n_free_++] = slot;
            if (h.seq + h.count <= expected) {
                ++st.duplicate_packets;
                st.duplicate_messages += h.count;
            } else {
                deliver(h.seq, h.count, &held_data_[slot * kMaxDatagram], h.len, h.t_kernel,
                        h.t_user);
            }
        }
    }
};

// The socket half: a UDP socket bound to 127.0.0.1, read in recvmmsg batches, each
// datagram with the kernel's receive timestamp (SO_TIMESTAMPNS).
class Receiver {
public:
    FeedCore core;
    int fd = -1;
    std::uint16_t port = 0;
    int request_port = -1;  // the re-request server's port on 127.0.0.1; -1: none
    std::size_t batch;
    bool spin;              // busy-wait with MSG_DONTWAIT instead of sleeping in poll(2)
    int busy_poll_error = -1;  // SO_BUSY_POLL: -1 not asked, 0 set, else the errno
    std::uint64_t batches = 0, batch_datagrams = 0;  // recvmmsg calls that returned data

    Receiver(int port_, int request_port_, std::uint64_t start, std::int64_t timeout,
             std::uint32_t retries, std::size_t batch_, int rcvbuf, bool spin_, int busy_poll_us,
             const std::string& session = {}, std::size_t hold = kMaxPending,
             std::uint64_t max_jump = kMaxJump)
        : core(start, timeout, retries, session, hold, max_jump), request_port(request_port_),
          batch(std::clamp<std::size_t>(batch_, 1, kMaxBatch)), spin(spin_),
          bufs_(kMaxBatch * kMaxDatagram) {
        fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) throw std::runtime_error("socket(): " + std::string(std::strerror(errno)));
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
        if (busy_poll_us > 0)  // the kernel may refuse it (CAP_NET_ADMIN): reported, not fatal
            busy_poll_error = setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &busy_poll_us,
                                         sizeof busy_poll_us) == 0 ? 0 : errno;
        sockaddr_in a = loopback(port_);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            const int e = errno;
            ::close(fd);
            throw std::runtime_error("bind(127.0.0.1:" + std::to_string(port_) +
                                     "): " + std::strerror(e));
        }
        socklen_t n = sizeof a;
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
        port = ntohs(a.sin_port);
        for (std::size_t i = 0; i < kMaxBatch; ++i) {
            iov_[i].iov_base = &bufs_[i * kMaxDatagram];
            iov_[i].iov_len = kMaxDatagram;
        }
    }
    ~Receiver() { if (fd >= 0) ::close(fd); }
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;

    // --8<-- [start:recvmmsg]
    // Wait up to timeout_ns for datagrams, then read batches of up to `batch` until the
    // socket is empty (or the delivery buffer needs emptying). Returns datagrams read.
    std::size_t poll_once(std::int64_t timeout_ns) {
        std::size_t total = 0;
        if (!wait(timeout_ns)) return 0;
        while (core.room(batch)) {
            for (std::size_t i = 0; i < batch; ++i) {  // the kernel rewrites these each call
                msgs_[i].msg_hdr = msghdr{};
                msgs_[i].msg_hdr.msg_iov = &iov_[i];
                msgs_[i].msg_hdr.msg_iovlen = 1;
                msgs_[i].msg_hdr.msg_control = ctrl_[i].data();
                msgs_[i].msg_hdr.msg_controllen = ctrl_[i].size();
            }
            const int n = recvmmsg(fd, msgs_.data(), static_cast<unsigned>(batch), MSG_DONTWAIT,
                                   nullptr);
            if (n <= 0) break;  // EAGAIN: the socket is empty
            const std::int64_t t_user = now_ns();
            ++batches;
            batch_datagrams += static_cast<std::uint64_t>(n);
            for (int i = 0; i < n; ++i) {
                const msghdr& h = msgs_[i].msg_hdr;
                if (h.msg_flags & MSG_TRUNC) {  // longer than any packet we accept
                    ++core.st.packets;
                    ++core.st.truncated;
                    continue;
                }
                core.on_packet(&bufs_[static_cast<std::size_t>(i) * kMaxDatagram],
                               msgs_[i].msg_len, kernel_time(h, t_user), t_user);
            }
            total += static_cast<std::size_t>(n);
            if (static_cast<std::size_t>(n) < batch) break;
        }
        return total;
    }
    // --8<-- [end:recvmmsg]

    // Send the request check_gap() asks for, if any (to 127.0.0.1:request_port only).
    void check_gap(std::int64_t now) {
        std::uint64_t seq = 0;
        std::uint32_t count = 0;
        if (!core.check_gap(now, request_port >= 0, seq, count)) return;
        std::uint8_t req[kMoldHeader];
        std::memcpy(req, core.session, 10);
        const std::uint64_t s = __builtin_bswap64(seq);
        const std::uint16_t c = __builtin_bswap16(static_cast<std::uint16_t>(count));
        std::memcpy(req + 10, &s, 8);
        std::memcpy(req + 18, &c, 2);
        sockaddr_in a = loopback(static_cast<std::uint16_t>(request_port));
        ::sendto(fd, req, sizeof req, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }

private:
    std::vector<std::uint8_t> bufs_;
    std::array<iovec, kMaxBatch> iov_{};
    std::array<mmsghdr, kMaxBatch> msgs_{};
    std::array<std::array<char, 64>, kMaxBatch> ctrl_{};

    static sockaddr_in loopback(std::uint16_t p) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(p);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1: the only address used
        return a;
    }

    bool wait(std::int64_t timeout_ns) {
        if (spin) {  // burn the core, never sleep: MSG_PEEK tells us a datagram is there
            const std::int64_t until = now_ns() + timeout_ns;
            char b;
            do {
                if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0) return true;
            } while (now_ns() < until);
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        const int ms = static_cast<int>(std::clamp<std::int64_t>((timeout_ns + 999'999) / 1'000'000, 0, 1000));
        return ::poll(&p, 1, ms) > 0;
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

// A sender for the benchmarks: every packet is built before the clock starts, then sent
// to 127.0.0.1:port with sendmmsg, up to `batch` datagrams per system call, flat out.
// (A Python sender pays an interpreter round trip per packet, and set the pace before.)
class Sender {
public:
    // raw: framed ITCH; starts[i], counts[i]: byte offset and message count of packet i,
    // whose first message has sequence first_seq[i].
    Sender(const std::uint8_t* raw, std::size_t raw_len, const std::int64_t* starts,
           const std::int64_t* ends, const std::uint64_t* first_seq, const std::uint16_t* counts,
           std::size_t n, int port, const std::string& session) {
        if (session.size() != 10) throw std::invalid_argument("a MoldUDP64 session is 10 bytes");
        std::memcpy(session_, session.data(), 10);
        offsets_.reserve(n + 1);
        offsets_.push_back(0);
        for (std::size_t i = 0; i < n; ++i) {
            if (starts[i] < 0 || ends[i] < starts[i] || static_cast<std::size_t>(ends[i]) > raw_len ||
                ends[i] - starts[i] > static_cast<std::int64_t>(kMaxDatagram - kMoldHeader))
                throw std::invalid_argument("sender: packet " + std::to_string(i) + " out of range");
            put_header(first_seq[i], counts[i]);
            buf_.insert(buf_.end(), raw + starts[i], raw + ends[i]);
            offsets_.push_back(buf_.size());
        }
        fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) throw std::runtime_error("socket(): " + std::string(std::strerror(errno)));
        const int sndbuf = 1 << 22;
        setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        dest_.sin_family = AF_INET;
        dest_.sin_port = htons(static_cast<std::uint16_t>(port));
        dest_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1: the only address used
    }
    ~Sender() { if (fd_ >= 0) ::close(fd_); }
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;
    std::size_t packets() const { return offsets_.size() - 1; }

    // --8<-- [start:sender]
    // Send packets [first, last) in sendmmsg calls of up to `batch`; returns how many
    // the kernel took (on loopback a datagram the receiver has no room for is dropped
    // there, after the kernel took it: the receiver's gaps count those).
    std::size_t send(std::size_t first, std::size_t last, std::size_t batch) {
        batch = std::clamp<std::size_t>(batch, 1, kMaxBatch);
        last = std::min(last, packets());
        std::size_t sent = 0;
        while (first < last) {
            const std::size_t n = std::min(batch, last - first);
            for (std::size_t i = 0; i < n; ++i) {
                iov_[i].iov_base = &buf_[offsets_[first + i]];
                iov_[i].iov_len = offsets_[first + i + 1] - offsets_[first + i];
                msgs_[i].msg_hdr = msghdr{};
                msgs_[i].msg_hdr.msg_name = &dest_;
                msgs_[i].msg_hdr.msg_namelen = sizeof dest_;
                msgs_[i].msg_hdr.msg_iov = &iov_[i];
                msgs_[i].msg_hdr.msg_iovlen = 1;
            }
            const int k = sendmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), 0);
            if (k <= 0) {
                if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue;
                throw std::runtime_error(std::string("sendmmsg(): ") + std::strerror(errno));
            }
            first += static_cast<std::size_t>(k);
            sent += static_cast<std::size_t>(k);
        }
        return sent;
    }
    // --8<-- [end:sender]

    // A heartbeat (count 0) or end of session (count 0xFFFF) carrying next_seq.
    void control(std::uint64_t next_seq, bool end) {
        std::uint8_t p[kMoldHeader];
        std::memcpy(p, session_, 10);
        const std::uint64_t s = __builtin_bswap64(next_seq);
        const std::uint16_t c = end ? 0xFFFF : 0;  // the same both ways round
        std::memcpy(p + 10, &s, 8);
        std::memcpy(p + 18, &c, 2);
        ::sendto(fd_, p, sizeof p, 0, reinterpret_cast<const sockaddr*>(&dest_), sizeof dest_);
    }

private:
    char session_[10];
    std::vector<std::uint8_t> buf_;       // every packet, back to back
    std::vector<std::size_t> offsets_;    // packet i is buf_[offsets_[i] .. offsets_[i+1])
    int fd_ = -1;
    sockaddr_in dest_{};
    std::array<iovec, kMaxBatch> iov_{};
    std::array<mmsghdr, kMaxBatch> msgs_{};

    void put_header(std::uint64_t seq, std::uint16_t count) {
        buf_.insert(buf_.end(), session_, session_ + 10);
        for (int i = 7; i >= 0; --i) buf_.push_back(static_cast<std::uint8_t>(seq >> (8 * i)));
        buf_.push_back(static_cast<std::uint8_t>(count >> 8));
        buf_.push_back(static_cast<std::uint8_t>(count));
    }
};

}  // namespace twinmatch::feed
