// Order entry, the optimized twin: SoupBinTCP + OUCH 5.0 in front of the matching
// engine (chapter 12). The same two halves as naive/entry.py:
//
// * Exchange: the protocol's logic. One inbound OUCH message from a logged-in user
// appends outbound messages to the users' sequenced logs (one per user for the day; a
// message's sequence number is its place in the log, from 1). The engine is
// market.hpp's Market in match mode, one event per message. * MarketData: the
// exchange's own ITCH 5.0 feed (A F E P X D U, and S and R), made from the same events
// as the OUCH messages; the rules are in naive/entry.py's MarketData. * Server: one
// thread, non-blocking sockets, epoll. A session's output *is* its user's log from the
// session's offset on (plus a few bytes of session packets): nothing is copied per
// message, a replay is a write from an offset, and a client that does not read costs no
// memory beyond the log, which is kept anyway.
//
// No allocation per message once warmed up: logs, order table and fill vector are
// reserved at start and grow by doubling (amortized); the UserRefNum maps are flat open
// addressing tables that only rehash on growth. Every choice the spec leaves open is
// marked "(a project choice)" or UNVERIFIED, in the same words as naive/entry.py.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dtypes.hpp"
#include "market.hpp"

namespace twinmatch::entry {

// --8<-- [start:stats]
// The counters of Server.stats(), in contract.soupbin.STAT_KEYS order (a test checks
// it).
enum Stat : int {
    Connections, Logins, LoginRejectedAuth, LoginRejectedSession, Logouts, PacketsIn,
    MessagesIn, MessagesOut, HeartbeatsOut, Replayed, BadLength, TooLong, UnknownPacket,
    BeforeLogin, LoginTimeout, IdleTimeout, EofMidPacket, TooManyConnections, SlowConsumer,
    UnknownMessage, BadMessageLength, Ignored, Rejected, MarketDataOut, MarketDataErrors,
    PreloginEvicted, DescriptorsExhausted, DebugIn, kStats
};
// --8<-- [end:stats]

inline constexpr std::size_t kMaxPacket = 1024;         // contract.soupbin.MAX_PACKET
inline constexpr std::uint64_t kOpenNs = 34'200'000'000'000ULL;  // 09:30, the fixed clock
inline constexpr std::uint32_t kPriceMax = 1'999'999'900;
inline constexpr std::uint64_t kMarketCross = 0x7FFFFFFF, kMarket = 2'000'000'000;
inline constexpr std::uint32_t kMaxQty = 1'000'000;     // exclusive

// Big-endian field access, byte by byte: the wire is never overlaid with a struct
// (order-entry.md pitfall 3), and this compiles to a load and a bswap.
inline std::uint16_t get16(const std::uint8_t* p) { return std::uint16_t(p[0] << 8 | p[1]); }
inline std::uint32_t get32(const std::uint8_t* p) {
    return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}
inline std::uint64_t get64(const std::uint8_t* p) {
    return std::uint64_t(get32(p)) << 32 | get32(p + 4);
}
inline void put16(std::uint8_t* p, std::uint16_t v) { p[0] = std::uint8_t(v >> 8); p[1] = std::uint8_t(v); }
inline void put32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::uint8_t(v >> (24 - 8 * i));
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = std::uint8_t(v >> (56 - 8 * i));
}

struct Config {
    std::vector<std::string> users, passwords;  // upper case (SoupBinTCP: case-insensitive)
    std::vector<std::array<char, 8>> symbols;   // space padded
    std::array<char, 10> session{};             // left-padded with spaces
    std::int64_t heartbeat_ms = 1000, idle_timeout_ms = 15000, login_timeout_ms = 30000;
    std::size_t max_sessions = 64, prelogin_max = 16, out_limit = 1 << 20;
    int sndbuf = 0;                             // SO_SNDBUF of each connection (0: the kernel's)
    bool fixed_clock = false;
};

// UserRefNum -> order slot, a flat table (linear probing, backward-shift deletion): no
// node allocated per order, rehash only when it doubles. Key 0 marks an empty slot:
// UserRefNums start at 1 and a stale one (0 included) never gets this far.
class UrnMap {
public:
    UrnMap() { keys_.assign(64, 0); vals_.assign(64, 0); }
    std::uint32_t* find(std::uint32_t k) {
        for (std::size_t i = k & mask(); keys_[i] != 0; i = (i + 1) & mask())
            if (keys_[i] == k) return &vals_[i];
        return nullptr;
    }
    void put(std::uint32_t k, std::uint32_t v) {
        if (2 * (n_ + 1) > keys_.size()) grow();
        std::size_t i = k & mask();
        while (keys_[i] != 0 && keys_[i] != k) i = (i + 1) & mask();
        if (keys_[i] == 0) ++n_;
        keys_[i] = k;
        vals_[i] = v;
    }
    void erase(std::uint32_t k) {
        std::size_t i = k & mask();
        while (keys_[i] != k) {
            if (keys_[i] == 0) return;
            i = (i + 1) & mask();
        }
        --n_;
        // Shift back every later key of the run that may live at i (its home is not
        // in (i, j]), so a probe never meets a hole before its key.
        for (std::size_t j = (i + 1) & mask(); keys_[j] != 0; j = (j + 1) & mask()) {
            const std::size_t home = keys_[j] & mask();
            if (((j - home) & mask()) >= ((j - i) & mask())) {
                keys_[i] = keys_[j];
                vals_[i] = vals_[j];
                i = j;
            }
        }
        keys_[i] = 0;
    }
    template <class Fn> void each(Fn&& fn) const {
        for (std::size_t i = 0; i < keys_.size(); ++i) if (keys_[i] != 0) fn(keys_[i], vals_[i]);
    }
    std::size_t size() const { return n_; }

private:
    std::size_t mask() const { return keys_.size() - 1; }
    void grow() {
        std::vector<std::uint32_t> k(keys_.size() * 2, 0), v(keys_.size() * 2, 0);
        k.swap(keys_);
        v.swap(vals_);
        n_ = 0;
        for (std::size_t i = 0; i < k.size(); ++i) if (k[i] != 0) put(k[i], v[i]);
    }
    std::vector<std::uint32_t> keys_, vals_;
    std::size_t n_ = 0;
};

struct Order {          // a live order as its owner sees it
    std::uint64_t ref;  // Order Reference Number = the engine's order id
    std::uint32_t user, urn, price, total, executed;
    std::uint16_t locate;
    char side, tif, display, capacity, ise, cross;
    char clordid[14];
    bool live;          // false once forgotten: a slot goes back to the free list once
};

// --8<-- [start:log_array]
// A session's sequenced messages only grow: SoupBinTCP keeps every one for the
// session's life (a client may log in again and ask for any of them). A std::vector
// would copy all of it at each doubling, and at hundreds of megabytes that copy is a
// pause in which no session is served (the witness-under-flood benchmark's tail was
// those doublings). Here the array lives in reserved address space (PROT_NONE:
// neither backed nor charged) made usable 2 MiB at a time; if the reservation fills,
// mremap moves the page tables, never the bytes.
template <class T>
class LogArray {
    static_assert(std::is_trivially_copyable_v<T>);

public:
    LogArray() = default;
    ~LogArray() { if (base_ != nullptr) munmap(base_, reserved_); }
    LogArray(const LogArray&) = delete;
    LogArray& operator=(const LogArray&) = delete;

    std::size_t size() const { return size_; }
    T* data() { return reinterpret_cast<T*>(base_); }
    const T* data() const { return reinterpret_cast<const T*>(base_); }
    T& operator[](std::size_t i) { return data()[i]; }
    const T& operator[](std::size_t i) const { return data()[i]; }
    // Longer only (a log never shrinks); std::bad_alloc before anything changes.
    void resize(std::size_t n) {
        if (n * sizeof(T) > usable_) [[unlikely]] grow(n * sizeof(T));
        size_ = n;
    }
    void push_back(const T& v) {
        resize(size_ + 1);
        data()[size_ - 1] = v;
    }
    // --8<-- [end:log_array]

private:
    static constexpr std::size_t kStep = std::size_t(1) << 21;   // 2 MiB made usable
    static constexpr std::size_t kFirst = std::size_t(1) << 34;  // 16 GiB of addresses

    [[gnu::noinline]] void grow(std::size_t bytes) {
        const std::size_t want = (bytes + kStep - 1) & ~(kStep - 1);
        if (want > reserved_) enlarge(want);
        if (mprotect(base_ + usable_, want - usable_, PROT_READ | PROT_WRITE) != 0)
            throw std::bad_alloc();
        usable_ = want;
    }
    // The first reservation (halved until granted: a ulimit -v, a crowded address
    // space), or a move into one twice the size.
    void enlarge(std::size_t want) {
        if (base_ == nullptr) {
            for (std::size_t b = std::max(kFirst, want); b >= want; b /= 2) {
                void* p = mmap(nullptr, b, PROT_NONE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (p != MAP_FAILED) {
                    base_ = static_cast<std::uint8_t*>(p);
                    reserved_ = b;
                    return;
                }
            }
            throw std::bad_alloc();
        }
        // mremap moves one mapping: make the whole reservation usable first (one
        // protection, so one mapping), then move it into twice the size.
        if (usable_ < reserved_) {
            if (mprotect(base_ + usable_, reserved_ - usable_, PROT_READ | PROT_WRITE) != 0)
                throw std::bad_alloc();
            usable_ = reserved_;
        }
        const std::size_t b = std::max(want, reserved_ * 2);
        void* p = mremap(base_, reserved_, b, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) throw std::bad_alloc();
        base_ = static_cast<std::uint8_t*>(p);
        reserved_ = usable_ = b;  // the moved mapping is usable throughout
    }
    std::uint8_t* base_ = nullptr;
    std::size_t reserved_ = 0, usable_ = 0, size_ = 0;
};

struct UserLog {
    LogArray<std::uint8_t> bytes;      // framed S packets, back to back
    LogArray<std::uint64_t> ends;      // ends[k] = end of sequence k + 1 in bytes
    std::uint32_t last_urn = 0;
    UrnMap live;                       // UserRefNum -> index into Exchange::orders_
};

// --8<-- [start:market_data]
// The exchange's ITCH 5.0 feed, framed as an ITCH file (a 2-byte length before each
// message), byte for byte what naive/entry.py's MarketData writes: the same rules (an
// order appears when it rests; E for a fill against a displayed order, P with reference
// 0 and side B for a hidden one; X, D; U only for a replace that rests in full at
// once). Appended to one buffer that the server writes out after each round of input:
// no allocation per message once the buffer has reached its working size.
class MarketData {
public:
    // `published` counts the messages (Exchange's stats[MarketDataOut]; one writer).
    // `on` false: nobody listens (no --itch-out), so nothing is made at all.
    MarketData(const Config& cfg, std::atomic<std::uint64_t>& published, std::uint64_t ts, bool on)
        : cfg_(cfg), published_(published), on_(on) {
        if (!on_) return;
        out_.reserve(1 << 16);
        for (const std::string& u : cfg.users) {   // the MPID: the user's first 4 letters
            std::array<char, 4> m;
            m.fill(' ');
            std::copy_n(u.begin(), std::min<std::size_t>(4, u.size()), m.begin());
            mpids_.push_back(m);
        }
        system(ts, 'O');
        for (std::size_t i = 0; i < cfg.symbols.size(); ++i) {
            std::uint8_t* p = put('R', std::uint16_t(i + 1), ts, 39);
            std::memcpy(p + 11, cfg.symbols[i].data(), 8);
            p[19] = 'Q';   // Market Category: NASDAQ Global Select
            p[20] = 'N';   // Financial Status: normal
            put32(p + 21, 100);   // Round Lot Size
            std::memcpy(p + 25, "NCZ PNN2N", 9);   // lots only, class, subtype, auth, SSR, IPO, LULD, ETP
            put32(p + 34, 0);     // ETP Leverage Factor
            p[38] = 'N';          // Inverse Indicator
        }
        system(ts, 'S');
        system(ts, 'Q');
    }
    void system(std::uint64_t ts, char code) {
        if (on_) put('S', 0, ts, 12)[11] = std::uint8_t(code);
    }
    void end(std::uint64_t ts) { system(ts, 'M'); system(ts, 'E'); system(ts, 'C'); }

    void add(std::uint64_t ts, const Order& o, std::uint32_t shares) {
        if (!on_) return;
        if (o.display == 'N') return;                 // hidden: never on the feed
        const bool mpid = o.display == 'A';
        std::uint8_t* p = put(mpid ? 'F' : 'A', loc(o), ts, mpid ? 40 : 36);
        put64(p + 11, o.ref);
        p[19] = o.side == 'B' ? 'B' : 'S';            // T and E sell
        put32(p + 20, shares);
        std::memcpy(p + 24, cfg_.symbols[o.locate].data(), 8);
        put32(p + 32, o.price);
        if (mpid) std::memcpy(p + 36, mpids_[o.user].data(), 4);
    }
    void executed(std::uint64_t ts, const Order& o, std::uint32_t shares, std::uint32_t price,
                  std::uint64_t match) {
        if (!on_) return;
        if (o.display == 'N') {                       // P: reference 0, side B (since 2014)
            std::uint8_t* p = put('P', loc(o), ts, 44);
            put64(p + 11, 0);
            p[19] = 'B';
            put32(p + 20, shares);
            std::memcpy(p + 24, cfg_.symbols[o.locate].data(), 8);
            put32(p + 32, price);
            put64(p + 36, match);
            return;
        }
        std::uint8_t* p = put('E', loc(o), ts, 31);
        put64(p + 11, o.ref);
        put32(p + 19, shares);
        put64(p + 23, match);
    }
    void cancel(std::uint64_t ts, const Order& o, std::uint32_t shares) {
        if (!on_) return;
        if (o.display == 'N') return;
        std::uint8_t* p = put('X', loc(o), ts, 23);
        put64(p + 11, o.ref);
        put32(p + 19, shares);
    }
    void remove(std::uint64_t ts, const Order& o) {   // D (delete is a C++ keyword)
        if (!on_) return;
        if (o.display == 'N') return;
        put64(put('D', loc(o), ts, 19) + 11, o.ref);
    }
    void replace(std::uint64_t ts, std::uint64_t old_ref, const Order& o, std::uint32_t shares) {
        if (!on_) return;
        if (o.display == 'N') return;
        std::uint8_t* p = put('U', loc(o), ts, 35);
        put64(p + 11, old_ref);
        put64(p + 19, o.ref);
        put32(p + 27, shares);
        put32(p + 31, o.price);
    }

    std::vector<std::uint8_t>& bytes() { return out_; }

private:
    static std::uint16_t loc(const Order& o) { return std::uint16_t(o.locate + 1); }
    // Room for one framed message of n bytes, its common header written (type, locate,
    // tracking 0, the 6-byte timestamp); returns the message's first byte.
    std::uint8_t* put(char type, std::uint16_t locate, std::uint64_t ts, std::size_t n) {
        const std::size_t at = out_.size();
        out_.resize(at + 2 + n);
        std::uint8_t* p = &out_[at];
        put16(p, std::uint16_t(n));
        p += 2;
        p[0] = std::uint8_t(type);
        put16(p + 1, locate);
        put16(p + 3, 0);
        put16(p + 5, std::uint16_t(ts >> 32));        // 48 bits: the high 16, then the low 32
        put32(p + 7, std::uint32_t(ts));
        published_.store(published_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return p;
    }
    const Config& cfg_;
    std::vector<std::array<char, 4>> mpids_;
    std::atomic<std::uint64_t>& published_;
    bool on_;
    std::vector<std::uint8_t> out_;
};
// --8<-- [end:market_data]

// --8<-- [start:exchange]
class Exchange {
public:
    // publish: make the ITCH feed (MarketData); the server asks for it only when it has
    // somewhere to write it (--itch-out).
    explicit Exchange(const Config& cfg, bool publish = false)
        : cfg_(cfg), market_(Mode::Match), logs_(cfg.users.size()),
          feed_(cfg_, stats[MarketDataOut], clock(), publish) {
        orders_.reserve(1 << 12);
        free_.reserve(1 << 12);
        fills_.reserve(1 << 10);
        const std::uint64_t ts = clock();
        for (std::uint32_t u = 0; u < logs_.size(); ++u) system_event(u, ts, 'S');
    }
    std::atomic<std::uint64_t> stats[kStats]{};
    std::vector<std::uint32_t> dirty;   // users whose logs grew since the last flush

    void bump(Stat s, std::uint64_t n = 1) {  // one writer: a relaxed add is enough
        stats[s].store(stats[s].load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    const Config& config() const { return cfg_; }
    UserLog& log(std::uint32_t u) { return logs_[u]; }
    const UserLog& log(std::uint32_t u) const { return logs_[u]; }
    // The ITCH bytes published since the caller last cleared them (the server writes
    // them).
    std::vector<std::uint8_t>& market_data() { return feed_.bytes(); }

    std::uint64_t clock() const {
        if (cfg_.fixed_clock) return kOpenNs + handled_;
        timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        return (std::uint64_t(t.tv_sec) % 86400) * 1'000'000'000ULL + std::uint64_t(t.tv_nsec);
    }
    void end_of_day() {
        const std::uint64_t ts = clock();
        for (std::uint32_t u = 0; u < logs_.size(); ++u) system_event(u, ts, 'E');
        feed_.end(ts);
    }

    // One OUCH message (the payload of a U packet) from logged-in user u.
    void handle(std::uint32_t u, const std::uint8_t* m, std::size_t n) {
        bump(MessagesIn);
        ++handled_;
        const char kind = n ? char(m[0]) : '\0';
        std::size_t fixed = 0, bare = 0;   // bare 0: the appendage block is required
        switch (kind) {
            case 'O': fixed = 47; break;
            case 'U': fixed = 40; break;
            case 'X': fixed = 11; bare = 9; break;
            case 'M': fixed = 12; bare = 10; break;
            case 'C': fixed = 19; break;
            default: return bump(UnknownMessage);  // D E Q and anything else (a project choice)
        }
        if (!length_ok(m, n, fixed, bare)) return bump(BadMessageLength);
        const std::uint64_t ts = clock();
        switch (kind) {
            case 'O': return enter(u, m, n, ts);
            case 'U': return replace(u, m, n, ts);
            case 'X': return cancel(u, m, ts);
            case 'M': return modify(u, m, ts);
            default: return mass_cancel(u, m, ts);
        }
    }
    // --8<-- [end:exchange]

private:
    static bool length_ok(const std::uint8_t* m, std::size_t n, std::size_t fixed, std::size_t bare) {
        if (bare != 0 && n == bare) return true;
        if (n < fixed || fixed + get16(m + fixed - 2) != n) return false;
        for (std::size_t i = fixed; i < n;) {   // whole TagValue elements, by their lengths
            const std::size_t len = m[i];
            if (len < 1 || i + 1 + len > n) return false;
            i += 1 + len;
        }
        return true;
    }

    // Append one OUCH message (already written at scratch_, n bytes) to u's log,
    // framed.
    void emit(std::uint32_t u, std::size_t n) {
        UserLog& l = logs_[u];
        const std::size_t at = l.bytes.size();
        l.bytes.resize(at + 3 + n);
        put16(&l.bytes[at], std::uint16_t(1 + n));
        l.bytes[at + 2] = 'S';
        std::memcpy(&l.bytes[at + 3], scratch_, n);
        l.ends.push_back(l.bytes.size());
        mark(u);
        bump(MessagesOut);
    }
    void mark(std::uint32_t u) {
        if (std::find(dirty.begin(), dirty.end(), u) == dirty.end()) dirty.push_back(u);
    }
    std::uint8_t* head(char type, std::uint64_t ts) {
        scratch_[0] = std::uint8_t(type);
        put64(scratch_ + 1, ts);
        return scratch_;
    }
    void system_event(std::uint32_t u, std::uint64_t ts, char code) {
        head('S', ts)[9] = std::uint8_t(code);
        emit(u, kSystemEvent);
    }
    void rejected(std::uint32_t u, std::uint64_t ts, std::uint32_t urn, std::uint16_t reason,
                  const std::uint8_t* clordid) {
        bump(Rejected);
        std::uint8_t* p = head('J', ts);
        put32(p + 9, urn);
        put16(p + 13, reason);
        std::memcpy(p + 15, clordid, 14);
        emit(u, kRejected);
    }
    void canceled(const Order& o, std::uint32_t qty, char reason, std::uint64_t ts) {
        std::uint8_t* p = head('C', ts);
        put32(p + 9, o.urn);
        put32(p + 13, qty);
        p[17] = std::uint8_t(reason);
        emit(o.user, kCanceled);
    }
    void executed(Order& o, const FillRecord& f, char flag, std::uint64_t match, std::uint64_t ts) {
        o.executed += f.qty;
        std::uint8_t* p = head('E', ts);
        put32(p + 9, o.urn);
        put32(p + 13, f.qty);
        put64(p + 17, f.price);
        p[25] = std::uint8_t(flag);
        put64(p + 26, match);
        put16(p + 34, 0);
        emit(o.user, kExecuted);
    }

    std::uint32_t slot_of(std::uint64_t ref) const { return ref_slot_[ref]; }
    std::uint32_t new_slot(std::uint64_t ref) {
        std::uint32_t i;
        if (!free_.empty()) { i = free_.back(); free_.pop_back(); }
        else { i = std::uint32_t(orders_.size()); orders_.emplace_back(); }
        if (ref_slot_.size() <= ref) ref_slot_.resize(std::max<std::size_t>(ref + 1, ref_slot_.size() * 2), 0);
        ref_slot_[ref] = i;
        return i;
    }
    void forget(std::uint32_t i) {
        Order& o = orders_[i];
        if (!o.live) return;
        o.live = false;
        UserLog& l = logs_[o.user];
        const std::uint32_t* at = l.live.find(o.urn);
        if (at != nullptr && *at == i) l.live.erase(o.urn);
        free_.push_back(i);
    }
    std::uint32_t left_of(const Order& o) const {
        std::uint16_t loc; Side s; std::uint32_t px, sh;
        return market_.order(o.ref, loc, s, px, sh) ? sh : 0;
    }
    // One event through the market (match mode): the same rules as naive.book.Book.
    void run(char type, const Order& o, std::uint64_t new_ref, std::uint32_t price, std::uint32_t shares) {
        ItchEvent e{};
        e.type = std::uint8_t(type);
        e.order_ref = o.ref;
        e.new_order_ref = new_ref;
        e.locate = o.locate;
        e.side = o.side == 'B' ? 'B' : 'S';   // T and E sell
        e.price = price;
        e.shares = shares;
        fills_.clear();
        market_.run(&e, 1, fills_);
    }

    std::int32_t locate_of(const std::uint8_t* sym) const {
        for (std::size_t i = 0; i < cfg_.symbols.size(); ++i)
            if (std::memcmp(cfg_.symbols[i].data(), sym, 8) == 0) return std::int32_t(i);
        return -1;
    }
    static bool one_of(char c, const char* set) { return c != 0 && std::strchr(set, c) != nullptr; }
    // An ExpireTime option (tag 15, u32 seconds, 1..86399) among the TagValues from
    // `at` to n; length_ok has already walked them, so every element is in bounds.
    static bool expire_time_ok(const std::uint8_t* m, std::size_t at, std::size_t n) {
        for (std::size_t i = at; i < n; i += 1 + std::size_t(m[i])) {
            if (m[i] != 5 || m[i + 1] != 15) continue;
            const std::uint32_t secs = get32(m + i + 2);
            if (secs != 0 && secs < 86'400) return true;
        }
        return false;
    }
    // Printable ASCII only, so no control byte is echoed back (naive: ouch.clordid_ok).
    static bool clordid_ok(const std::uint8_t* p) {
        for (int i = 0; i < 14; ++i) if (p[i] < 0x20 || p[i] > 0x7E) return false;
        return true;
    }

    // --8<-- [start:enter]
    // Where the spec has no code for a problem, the reason is Other (0x0F): "no code".
    std::uint16_t enter_problem(const std::uint8_t* m, std::size_t n, std::int32_t locate) const {
        const char side = char(m[5]), tif = char(m[26]), display = char(m[27]);
        const char capacity = char(m[28]), ise = char(m[29]), cross = char(m[30]);
        const std::uint32_t qty = get32(m + 6);
        const std::uint64_t price = get64(m + 18);
        if (!one_of(side, "BSTE")) return 0x0009;                 // Invalid Side
        if (qty == 0 || qty >= kMaxQty) return 0x0013;            // Invalid Quantity
        if (locate < 0) return 0x0017;                            // Invalid Symbol
        if (price == 0 || (price > kPriceMax && price != kMarketCross && price != kMarket))
            return 0x001D;                                        // Invalid Price
        if (!one_of(tif, "0356E")) return 0x000F;                 // no code: Other
        if (tif == '6' && !expire_time_ok(m, 47, n)) return 0x000F;   // no code: GTT, no expiry
        if (!one_of(display, "YNA")) return 0x0003;               // Invalid Display
        if (!one_of(capacity, "APRO")) return 0x000F;             // no code: bad Capacity
        if (ise != 'N') return 0x0008;   // ISO Not Allowed: no routing here (a project choice)
        if (cross != 'N') return 0x0014;                          // continuous market only
        if (!clordid_ok(m + 31)) return 0x000F;                   // no code: binary ClOrdID
        return 0;
    }

    void enter(std::uint32_t u, const std::uint8_t* m, std::size_t n, std::uint64_t ts) {
        const std::uint32_t urn = get32(m + 1), qty = get32(m + 6);
        const std::uint64_t price = get64(m + 18);
        UserLog& l = logs_[u];
        if (urn <= l.last_urn) return bump(Ignored);  // "assumed to be a retransmission"
        l.last_urn = urn;                             // accepted or rejected, it is used
        // (gaps are allowed here: whether NASDAQ allows them is UNVERIFIED)
        const std::int32_t locate = locate_of(m + 10);
        if (const std::uint16_t r = enter_problem(m, n, locate))
            return rejected(u, ts, urn, r, m + 31);
        const std::uint64_t ref = next_ref_++;
        const std::uint32_t i = new_slot(ref);
        Order& o = orders_[i];
        o = Order{ref, u, urn, std::uint32_t(price), qty, 0, std::uint16_t(locate), char(m[5]),
                  char(m[26]), char(m[27]), char(m[28]), char(m[29]), char(m[30]), {}, true};
        std::memcpy(o.clordid, m + 31, 14);
        std::uint8_t* p = head('A', ts);
        std::memcpy(p + 9, m + 1, 5);          // UserRefNum, Side
        std::memcpy(p + 14, m + 6, 4);         // Quantity
        std::memcpy(p + 18, m + 10, 8 + 8 + 2);  // Symbol, Price, TIF, Display
        put64(p + 36, ref);
        std::memcpy(p + 44, m + 28, 3);        // Capacity, ISE, CrossType
        p[47] = 'L';
        std::memcpy(p + 48, m + 31, 14);
        put16(p + 62, 0);
        emit(u, kAccepted);
        l.live.put(urn, i);
        const bool market = price == kMarketCross || price == kMarket;
        run('A', o, 0, market ? 0 : std::uint32_t(price), qty);  // price 0: sweeps, never rests
        std::uint32_t filled = 0;
        for (const FillRecord& f : fills_) filled += f.qty;
        settle(i, ts);
        after_match(i, market ? qty - filled : 0, ts);
    }
    // --8<-- [end:enter]

    // --8<-- [start:fills]
    // Each fill: an Executed to the resting order's owner (liquidity A), then one to
    // the aggressor's (R), with the same Match Number. fills_ stays untouched
    // meanwhile.
    void settle(std::uint32_t ai, std::uint64_t ts) {
        for (const FillRecord& f : fills_) {
            const std::uint32_t ri = slot_of(f.resting_id);
            const std::uint64_t match = next_match_++;
            executed(orders_[ri], f, 'A', match, ts);
            executed(orders_[ai], f, 'R', match, ts);
            feed_.executed(ts, orders_[ri], f.qty, f.price, match);
            if (left_of(orders_[ri]) == 0) forget(ri);
        }
    }
    // What rests is published: A/F, or U from `replaced` (the old reference, 0: none).
    void after_match(std::uint32_t i, std::uint32_t unfilled, std::uint64_t ts,
                     std::uint64_t replaced = 0) {
        Order& o = orders_[i];
        std::uint32_t left = left_of(o);
        if (left != 0 && o.tif == '3') {   // IOC: the remainder is canceled
            run('D', o, 0, 0, 0);
            unfilled = left;
            left = 0;
        }
        if (unfilled != 0) canceled(o, unfilled, 'I', ts);
        if (left == 0) forget(i);
        else if (replaced != 0) feed_.replace(ts, replaced, o, left);
        else feed_.add(ts, o, left);
    }
    // --8<-- [end:fills]

    void cancel_all(std::uint32_t i, std::uint64_t ts) {
        const std::uint32_t left = left_of(orders_[i]);
        run('D', orders_[i], 0, 0, 0);
        feed_.remove(ts, orders_[i]);
        canceled(orders_[i], left, 'U', ts);
        forget(i);
    }

    // --8<-- [start:replace]
    void replace(std::uint32_t u, const std::uint8_t* m, std::size_t n, std::uint64_t ts) {
        const std::uint32_t orig = get32(m + 1), urn = get32(m + 5), qty = get32(m + 9);
        const std::uint64_t price = get64(m + 13);
        const char tif = char(m[21]), display = char(m[22]), ise = char(m[23]);
        UserLog& l = logs_[u];
        const std::uint32_t* at = l.live.find(orig);
        if (at == nullptr || urn <= l.last_urn) return bump(Ignored);  // outcome 1
        const std::uint32_t i = *at;
        const std::int64_t outstanding = std::int64_t(qty) - orders_[i].executed;
        const bool no_expiry = tif == '6' && !expire_time_ok(m, 40, n);
        if (qty == 0 || qty >= kMaxQty || price == 0 || price > kPriceMax || !one_of(tif, "0356")
            || no_expiry || !one_of(display, "YNA") || ise != 'N' || !clordid_ok(m + 24)
            || outstanding <= 0)
            return cancel_all(i, ts);                                   // outcome 2
        l.last_urn = urn;
        const std::uint64_t ref = next_ref_++;
        l.live.erase(orig);
        run('U', orders_[i], ref, std::uint32_t(price), std::uint32_t(outstanding));
        // On the feed: U if it rests in full at once, seen as before; else D, fills, A.
        const bool as_u = fills_.empty() && display == orders_[i].display && tif != '3';
        const std::uint64_t old_ref = orders_[i].ref;
        if (!as_u) feed_.remove(ts, orders_[i]);
        Order& o = orders_[i];   // the same slot, under its new reference
        if (ref_slot_.size() <= ref) ref_slot_.resize(std::max<std::size_t>(ref + 1, ref_slot_.size() * 2), 0);
        ref_slot_[ref] = i;
        o.ref = ref; o.urn = urn; o.price = std::uint32_t(price); o.total = qty;
        o.tif = tif; o.display = display; o.ise = ise;
        std::memcpy(o.clordid, m + 24, 14);
        l.live.put(urn, i);
        std::uint8_t* p = head('U', ts);
        put32(p + 9, orig);
        put32(p + 13, urn);
        p[17] = std::uint8_t(o.side);
        put32(p + 18, std::uint32_t(outstanding));
        std::memcpy(p + 22, cfg_.symbols[o.locate].data(), 8);
        put64(p + 30, price);
        p[38] = std::uint8_t(tif);
        p[39] = std::uint8_t(display);
        put64(p + 40, ref);
        p[48] = std::uint8_t(o.capacity);
        p[49] = std::uint8_t(ise);
        p[50] = std::uint8_t(o.cross);
        p[51] = 'L';
        std::memcpy(p + 52, o.clordid, 14);
        put16(p + 66, 0);
        emit(u, kReplaced);
        settle(i, ts);
        after_match(i, 0, ts, as_u ? old_ref : 0);
    }
    // --8<-- [end:replace]

    // Cut a live order to `size` shares (0: cancel it); returns the decrement.
    std::uint32_t reduce_to(std::uint32_t i, std::uint32_t size, std::uint64_t ts) {
        const std::uint32_t left = left_of(orders_[i]);
        if (size >= left) return 0;
        if (size == 0) {
            run('D', orders_[i], 0, 0, 0);
            feed_.remove(ts, orders_[i]);
            forget(i);
        } else {
            run('X', orders_[i], 0, 0, left - size);   // keeps its place in the queue
            feed_.cancel(ts, orders_[i], left - size);
        }
        return left - size;
    }
    void cancel(std::uint32_t u, const std::uint8_t* m, std::uint64_t ts) {
        const std::uint32_t urn = get32(m + 1), size = get32(m + 5);
        const std::uint32_t* at = logs_[u].live.find(urn);
        if (at == nullptr) return bump(Ignored);    // superfluous cancels: ignored (spec §2.3)
        const std::uint32_t i = *at;
        const std::uint32_t taken = reduce_to(i, size, ts);
        if (taken == 0) return bump(Ignored);
        canceled(orders_[i], taken, 'U', ts);
    }
    void modify(std::uint32_t u, const std::uint8_t* m, std::uint64_t ts) {
        const std::uint32_t urn = get32(m + 1), size = get32(m + 6);
        const char side = char(m[5]);
        const std::uint32_t* at = logs_[u].live.find(urn);
        if (at == nullptr) return bump(Ignored);
        const std::uint32_t i = *at;
        Order& o = orders_[i];
        if (side != o.side && (!one_of(side, "STE") || !one_of(o.side, "STE")))
            return bump(Ignored);                   // only S <-> T <-> E (a project choice)
        o.side = side;
        reduce_to(i, size, ts);                     // increases are ignored, 0 cancels
        const std::uint32_t left = size == 0 ? 0 : left_of(o);
        std::uint8_t* p = head('M', ts);
        put32(p + 9, urn);
        p[13] = std::uint8_t(side);
        put32(p + 14, left);
        emit(u, kModified);
    }
    void mass_cancel(std::uint32_t u, const std::uint8_t* m, std::uint64_t ts) {
        const std::uint32_t urn = get32(m + 1);
        UserLog& l = logs_[u];
        if (urn <= l.last_urn) return bump(Ignored);
        l.last_urn = urn;
        static constexpr char kBlank[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
        const bool all = std::memcmp(m + 9, kBlank, 8) == 0;
        const std::int32_t locate = all ? -1 : locate_of(m + 9);
        scratch_urns_.clear();
        l.live.each([&](std::uint32_t k, std::uint32_t i) {
            if (all || std::int32_t(orders_[i].locate) == locate) scratch_urns_.push_back(k);
        });
        std::sort(scratch_urns_.begin(), scratch_urns_.end());   // by UserRefNum, as naive
        for (std::uint32_t k : scratch_urns_) cancel_all(*l.live.find(k), ts);
        std::uint8_t* p = head('X', ts);
        put32(p + 9, urn);
        std::memcpy(p + 13, m + 5, 12);   // Firm, Symbol
        put16(p + 25, 0);
        emit(u, kMassCancelResponse);
    }

    Config cfg_;
    Market market_;
    std::vector<UserLog> logs_;
    std::vector<Order> orders_;
    std::vector<std::uint32_t> free_;        // order slots to reuse
    std::vector<std::uint32_t> ref_slot_;    // Order Reference Number -> slot
    std::vector<FillRecord> fills_;
    std::vector<std::uint32_t> scratch_urns_;
    std::uint64_t next_ref_ = 1, next_match_ = 1, handled_ = 0;
    MarketData feed_;                        // after cfg_ and stats: it uses both
    std::uint8_t scratch_[128];              // the outbound message being built
    // The outbound sizes this exchange writes (contract/ouch.py; the test checks them
    // against the spec's table): the largest, Order Replaced, fits the scratch buffer.
    static constexpr std::size_t kSystemEvent = 10, kAccepted = 64, kReplaced = 68,
                                 kCanceled = 18, kExecuted = 36, kRejected = 29, kModified = 18,
                                 kMassCancelResponse = 27;
    static_assert(kReplaced <= sizeof(scratch_) && kAccepted <= sizeof(scratch_));
};

// --8<-- [start:session]
struct Session {
    int fd = -1;
    std::int32_t user = -1;                  // -1 until logged in
    std::uint8_t in[1 << 13];                // received bytes: at most one partial packet + room
    std::size_t have = 0;
    std::uint8_t ctrl[64];                   // session packets (A J H Z) not yet written
    std::size_t ctrl_len = 0, ctrl_off = 0;
    std::uint64_t sent = 0;                  // log bytes written
    std::uint64_t taken = 0, taken_seen = 0; // bytes the kernel took; at the last check
    std::int64_t last_in = 0, last_out = 0, deadline = 0, idle_ms = 0, progress = 0;
    std::uint64_t serial = 0;                // accept order: the oldest pre-login goes first
    std::int64_t read_ns = -1;               // the read whose answers wait to go out, or -1
    std::uint64_t read_mark = 0;             // where in the log those answers start
    bool closing = false;                    // close once ctrl is written (after a J)
    bool want_out = false;                   // EPOLLOUT asked for (the kernel was full)
};
// The input buffer holds a partial packet (at most 1 + kMaxPacket bytes) and still has
// room to receive into; the session packets queued at once (A 33, J 4, H 3, Z 3) fit
// ctrl.
static_assert(sizeof(Session::in) >= 2 * (2 + kMaxPacket));
static_assert(sizeof(Session::ctrl) >= 33 + 3 + 3);
// --8<-- [end:session]

inline std::int64_t now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

inline std::int64_t now_ms() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

class Server {
public:
    // itch_out: the file the exchange's ITCH feed is written to ("" : the feed is
    // dropped).
    Server(const Config& cfg, std::uint16_t port, const std::string& itch_out = "")
        : ex_(cfg, !itch_out.empty()), cfg_(cfg) {
        if (!itch_out.empty()) {
            itch_fd_ = ::open(itch_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (itch_fd_ < 0)
                throw std::runtime_error("cannot write " + itch_out + ": " + std::strerror(errno));
        }
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0) throw std::runtime_error("socket() failed");
        int one = 1;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);   // 127.0.0.1 only
        if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listen_fd_, 256) != 0) {
            ::close(listen_fd_);
            if (itch_fd_ >= 0) ::close(itch_fd_);
            throw std::runtime_error("bind/listen on 127.0.0.1:" + std::to_string(port) + " failed: " +
                                     std::strerror(errno));
        }
        socklen_t len = sizeof a;
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        add(listen_fd_, EPOLLIN, kListen);
        add(wake_, EPOLLIN, kWake);
        // Two pools in one table: max_sessions logged in, prelogin_max not yet (login
        // checks the first, accept the second), so idle connections never fill the
        // first.
        sessions_.resize(cfg.max_sessions + cfg.prelogin_max);
        for (auto& s : sessions_) s = std::make_unique<Session>();
        reserve_fd_ = open_reserve();
        timings_.reserve(kTimings);   // address space only until written
        by_user_.assign(cfg.users.size(), -1);
    }
    ~Server() {
        for (auto& s : sessions_) if (s->fd >= 0) ::close(s->fd);
        ::close(listen_fd_);
        ::close(ep_);
        ::close(wake_);
        if (itch_fd_ >= 0) ::close(itch_fd_);
        if (reserve_fd_ >= 0) ::close(reserve_fd_);
    }
    std::uint16_t port() const { return port_; }
    std::uint64_t stat(int k) const { return ex_.stats[k].load(std::memory_order_relaxed); }
    // Server-side read-to-write times (ns): from the read that brought a request to the
    // send that handed the kernel its first answer, one per read (the first kTimings).
    // Read them after run() has returned.
    const std::vector<std::int64_t>& timings() const { return timings_; }
    void stop() {   // any thread: run() ends within one epoll wait
        stop_.store(true, std::memory_order_release);
        const std::uint64_t one = 1;
        [[maybe_unused]] auto r = ::write(wake_, &one, sizeof one);
    }

    // --8<-- [start:loop]
    // The event loop; returns after stop(): End of Day, End of Session, close.
    void run() {
        epoll_event evs[64];
        while (!stop_.load(std::memory_order_acquire)) {
            const int n = ::epoll_wait(ep_, evs, 64, 20);   // at most 20 ms a turn
            for (int k = 0; k < n; ++k) {
                const std::uint64_t tag = evs[k].data.u64;
                if (tag == kListen) { accept_all(); continue; }
                if (tag == kWake) continue;
                Session& s = *sessions_[tag];
                if (s.fd < 0) continue;
                if (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(s, tag);
                if (s.fd >= 0 && (evs[k].events & EPOLLOUT)) flush(s, tag);
            }
            flush_dirty();
            write_market_data();
            timers();
        }
        finish();
    }
    // --8<-- [end:loop]

private:
    static constexpr std::uint64_t kListen = ~0ULL, kWake = ~0ULL - 1;

    void add(int fd, std::uint32_t events, std::uint64_t tag) {
        epoll_event e{};
        e.events = events;
        e.data.u64 = tag;
        ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e);
    }
    void want_out(Session& s, std::uint64_t tag, bool on) {
        epoll_event e{};
        e.events = EPOLLIN | (on ? EPOLLOUT : 0u);
        e.data.u64 = tag;
        ::epoll_ctl(ep_, EPOLL_CTL_MOD, s.fd, &e);
    }

    // --8<-- [start:accept]
    // A bounded batch per turn (the sessions get their turn too), each connection into
    // the pre-login pool; when that is full, its oldest member is closed to make room.
    void accept_all() {
        for (int k = 0; k < 16; ++k) {
            const int fd =
                ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE) shed();
                return;   // EAGAIN: no more waiting (or a transient error: next turn)
            }
            ex_.bump(Connections);
            const std::size_t none = sessions_.size();
            std::size_t slot = none, prelogin = 0, oldest = none;
            for (std::size_t i = 0; i < sessions_.size(); ++i) {
                const Session& o = *sessions_[i];
                if (o.fd < 0) { slot = std::min(slot, i); continue; }
                if (o.user >= 0) continue;
                ++prelogin;
                if (oldest == none || o.serial < sessions_[oldest]->serial) oldest = i;
            }
            if (prelogin >= cfg_.prelogin_max) {   // full: the oldest one goes
                drop(*sessions_[oldest], PreloginEvicted);
                slot = std::min(slot, oldest);
            }
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            const int snd = cfg_.sndbuf;
            if (snd > 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd);
            Session& s = *sessions_[slot];
            const std::int64_t now = now_ms();
            s = Session{};
            s.fd = fd;
            s.last_in = s.last_out = s.progress = now;
            s.deadline = now + cfg_.login_timeout_ms;
            s.idle_ms = cfg_.idle_timeout_ms;
            s.serial = ++serial_;
            add(fd, EPOLLIN, slot);
        }
    }

    // --8<-- [end:accept]

    // --8<-- [start:shed]
    // No descriptor left to accept with (EMFILE/ENFILE), and the listening socket stays
    // readable: a loop that only retried would spin at 100% CPU. Give back the reserve
    // descriptor, accept the waiting connection and close it at once (the client sees a
    // close, not a hang), then take the reserve again. Without one: pause for 100 ms.
    void shed() {
        ex_.bump(DescriptorsExhausted);
        if (reserve_fd_ >= 0) {
            ::close(reserve_fd_);
            const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) ::close(fd);
            reserve_fd_ = open_reserve();
        }
        if (reserve_fd_ < 0 && paused_until_ == 0) {
            epoll_event e{};
            e.data.u64 = kListen;   // no events: the listening socket is not watched
            ::epoll_ctl(ep_, EPOLL_CTL_MOD, listen_fd_, &e);
            paused_until_ = now_ms() + 100;
        }
    }
    // --8<-- [end:shed]
    void resume_accepting(std::int64_t now) {
        if (paused_until_ == 0 || now < paused_until_) return;
        if (reserve_fd_ < 0) reserve_fd_ = open_reserve();
        paused_until_ = 0;
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u64 = kListen;
        ::epoll_ctl(ep_, EPOLL_CTL_MOD, listen_fd_, &e);
    }
    static int open_reserve() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

    void drop(Session& s, int reason) {
        if (reason >= 0) ex_.bump(Stat(reason));
        if (s.user >= 0) { by_user_[s.user] = -1; --logged_in_; }
        ::close(s.fd);   // also leaves the epoll set
        s.fd = -1;
        s.user = -1;
    }

    void ctrl(Session& s, const std::uint8_t* p, std::size_t n) {
        if (s.ctrl_len + n > sizeof s.ctrl) {   // only A J H Z go here: compact first
            std::memmove(s.ctrl, s.ctrl + s.ctrl_off, s.ctrl_len - s.ctrl_off);
            s.ctrl_len -= s.ctrl_off;
            s.ctrl_off = 0;
        }
        if (s.ctrl_len + n <= sizeof s.ctrl) {
            std::memcpy(s.ctrl + s.ctrl_len, p, n);
            s.ctrl_len += n;
        }
    }

    std::uint64_t log_end(const Session& s) const {
        return ex_.log(std::uint32_t(s.user)).bytes.size();
    }
    // --8<-- [start:turn]
    // One recv (at most 8 KiB) per session per turn of the loop: a session that sends
    // without pause is served in turns with everyone else (epoll reports it again next
    // turn, level-triggered), never read until it is empty while the others wait.
    void on_readable(Session& s, std::uint64_t tag) {
        {
            const ssize_t r = ::recv(s.fd, s.in + s.have, sizeof s.in - s.have, 0);
            if (r == 0) {   // the client is done sending: what it is owed still goes
                if (s.have) return drop(s, EofMidPacket);
                flush(s, tag);
                if (s.fd >= 0) drop(s, -1);
                return;
            }
            if (r < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
                return drop(s, s.have ? EofMidPacket : -1);   // a reset mid-packet
            }
            s.have += std::size_t(r);
            s.last_in = now_ms();
            // The server's share of a request's latency starts here, at its read; the
            // log's end now is where its answers will start (timings()).
            const std::int64_t read_ns = now_ns();
            const bool was_in = s.user >= 0;
            const std::uint64_t mark = was_in ? log_end(s) : 0;
            std::size_t at = 0;
            while (s.have - at >= 2) {
                const std::size_t len = get16(s.in + at);
                if (len == 0) return drop(s, BadLength);
                if (len > kMaxPacket) return drop(s, TooLong);
                if (s.have - at < 2 + len) break;   // a partial packet: the rest later
                ex_.bump(PacketsIn);
                if (!on_packet(s, s.in + at + 2, len)) return;
                at += 2 + len;
            }
            std::memmove(s.in, s.in + at, s.have - at);   // at most one partial packet
            s.have -= at;
            if (was_in && s.read_ns < 0 && log_end(s) > mark) {
                s.read_ns = read_ns;   // one read at a time: a later one waits its turn
                s.read_mark = mark;
            }
        }
        if (s.fd >= 0 && (pending(s) || s.closing)) flush(s, tag);
    }
    // --8<-- [end:turn]

    // False when the session was closed.
    bool on_packet(Session& s, const std::uint8_t* p, std::size_t n) {
        const char kind = char(p[0]);
        if (kind == '+') { ex_.bump(DebugIn); return true; }   // ignored, always (§1.2)
        if (s.user < 0) {
            if (s.closing) return true;   // after a Login Rejected: nothing more is read
            if (kind != 'L') return drop(s, BeforeLogin), false;
            if (n != 47 && n != 52) return drop(s, BadLength), false;
            login(s, p, n, std::int32_t(slot_index(s)));
            return s.fd >= 0;
        }
        switch (kind) {
            case 'U': ex_.handle(std::uint32_t(s.user), p + 1, n - 1); return true;
            case 'R': if (n != 1) return drop(s, BadLength), false; return true;
            case 'O':
                if (n != 1) return drop(s, BadLength), false;
                ex_.bump(Logouts);
                return drop(s, -1), false;
            default: return drop(s, UnknownPacket), false;
        }
    }

    static std::string field(const std::uint8_t* p, std::size_t n) {   // stripped, upper
        std::size_t b = 0, e = n;
        while (b < e && p[b] == ' ') ++b;
        while (e > b && p[e - 1] == ' ') --e;
        std::string out(reinterpret_cast<const char*>(p + b), e - b);
        for (char& c : out) if (c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
        return out;
    }
    static bool decimal(const std::uint8_t* p, std::size_t n, std::uint64_t& v) {
        std::size_t b = 0, e = n;
        while (b < e && p[b] == ' ') ++b;
        while (e > b && p[e - 1] == ' ') --e;
        if (b == e) return false;
        // Past 2^64 - 1 the value stays there: such a number is past the end of any
        // log, which means "the next new message", so every 20-digit number reads the
        // same as in the naive twin's Python int.
        constexpr std::uint64_t kMax = ~0ULL;
        v = 0;
        for (std::size_t i = b; i < e; ++i) {
            if (p[i] < '0' || p[i] > '9') return false;
            const std::uint64_t d = p[i] - '0';
            v = v > (kMax - d) / 10 ? kMax : v * 10 + d;
        }
        return true;
    }

    // --8<-- [start:login]
    std::size_t slot_index(const Session& s) const {
        for (std::size_t i = 0; i < sessions_.size(); ++i) if (sessions_[i].get() == &s) return i;
        return 0;
    }
    void login(Session& s, const std::uint8_t* p, std::size_t n, std::int32_t slot) {   // p: type byte + payload
        const std::string user = field(p + 1, 6), password = field(p + 7, 10);
        std::int32_t u = -1;
        for (std::size_t i = 0; i < cfg_.users.size(); ++i)
            if (cfg_.users[i] == user) u = std::int32_t(i);
        if (u < 0 || cfg_.passwords[u] != password) return reject(s, 'A', LoginRejectedAuth);
        static constexpr std::uint8_t kBlank[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
        const bool blank = std::memcmp(p + 17, kBlank, 10) == 0;
        std::uint64_t seq = 0;
        if ((!blank && std::memcmp(p + 17, cfg_.session.data(), 10) != 0) || !decimal(p + 27, 20, seq)
            || by_user_[u] >= 0 || logged_in_ >= cfg_.max_sessions)
            // a named session that is not this run's, a sequence number that is not a
            // number, the user already logged in elsewhere, or max_sessions logged in
            // (the last three: a project choice)
            return reject(s, 'S', LoginRejectedSession);
        UserLog& log = ex_.log(std::uint32_t(u));
        const std::uint64_t count = log.ends.size();
        // 0: start with the next new message. Past the end: UNVERIFIED what NASDAQ
        // does; here it is treated as the next new message too (a project choice).
        if (seq == 0 || seq > count + 1) seq = count + 1;
        std::uint64_t hb = 0;
        if (n == 52 && decimal(p + 47, 5, hb) && hb != 0)   // 4.10: the client's timeout
            s.idle_ms = std::max<std::int64_t>(std::int64_t(hb), 10);
        s.user = u;
        by_user_[u] = slot;
        ++logged_in_;
        ex_.bump(Logins);
        ex_.bump(Replayed, count - (seq - 1));
        s.sent = seq == 1 ? 0 : log.ends[seq - 2];
        std::uint8_t a[33];
        put16(a, 31);
        a[2] = 'A';
        std::memcpy(a + 3, cfg_.session.data(), 10);
        std::memset(a + 13, ' ', 20);
        for (std::size_t i = 32; seq != 0; --i, seq /= 10) a[i] = std::uint8_t('0' + seq % 10);
        ctrl(s, a, sizeof a);
    }
    void reject(Session& s, char code, Stat stat) {
        const std::uint8_t j[4] = {0, 2, 'J', std::uint8_t(code)};
        ctrl(s, j, sizeof j);
        ex_.bump(stat);
        s.closing = true;   // closed once the J is written (then the server closes)
    }
    // --8<-- [end:login]

    // --8<-- [start:flush]
    // Write what is pending: session packets first, then the user's log from s.sent.
    // Never blocks: what the kernel does not take waits for EPOLLOUT.
    void flush(Session& s, std::uint64_t tag) {
        while (s.ctrl_off < s.ctrl_len) {
            const ssize_t w = ::send(s.fd, s.ctrl + s.ctrl_off, s.ctrl_len - s.ctrl_off, MSG_NOSIGNAL);
            if (w <= 0) return blocked(s, tag, w);
            s.ctrl_off += std::size_t(w);
            s.taken += std::uint64_t(w);
            s.last_out = now_ms();
        }
        s.ctrl_off = s.ctrl_len = 0;
        if (s.closing) return drop(s, -1);
        if (s.user >= 0) {
            const UserLog& log = ex_.log(std::uint32_t(s.user));
            while (s.sent < log.bytes.size()) {
                const ssize_t w = ::send(s.fd, log.bytes.data() + s.sent, log.bytes.size() - s.sent,
                                         MSG_NOSIGNAL);
                if (w <= 0) return blocked(s, tag, w);
                s.sent += std::uint64_t(w);
                s.taken += std::uint64_t(w);
                s.last_out = now_ms();
                if (s.read_ns >= 0 && s.sent > s.read_mark) {   // the first answer is out
                    if (timings_.size() < timings_.capacity())
                        timings_.push_back(now_ns() - s.read_ns);
                    s.read_ns = -1;
                }
            }
        }
        if (s.want_out) { want_out(s, tag, false); s.want_out = false; }
    }
    void blocked(Session& s, std::uint64_t tag, ssize_t w) {
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return drop(s, -1);
        if (!s.want_out) { want_out(s, tag, true); s.want_out = true; }
    }
    bool pending(const Session& s) const {
        return s.ctrl_off < s.ctrl_len ||
               (s.user >= 0 && s.sent < ex_.log(std::uint32_t(s.user)).bytes.size());
    }
    // --8<-- [end:flush]

    void flush_dirty() {
        std::sort(ex_.dirty.begin(), ex_.dirty.end());   // by user, as naive
        for (std::uint32_t u : ex_.dirty) {
            const std::int32_t slot = by_slot(u);
            if (slot >= 0) flush(*sessions_[slot], std::uint64_t(slot));
        }
        ex_.dirty.clear();
    }
    std::int32_t by_slot(std::uint32_t u) const { return by_user_[u]; }

    // What the exchange published since the last call, to the feed file (a blocking
    // write: a file, not a socket). A failed write is counted and ends the file.
    void write_market_data() {
        std::vector<std::uint8_t>& out = ex_.market_data();
        for (std::size_t at = 0; itch_fd_ >= 0 && at < out.size();) {
            const ssize_t w = ::write(itch_fd_, out.data() + at, out.size() - at);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) { ex_.bump(MarketDataErrors); ::close(itch_fd_); itch_fd_ = -1; break; }
            at += std::size_t(w);
        }
        out.clear();   // keeps its capacity: no allocation next round
    }

    // --8<-- [start:timers]
    // Every turn of the loop: a few compares per session.
    void timers() {
        const std::int64_t now = now_ms();
        resume_accepting(now);
        for (std::size_t i = 0; i < sessions_.size(); ++i) {
            Session& s = *sessions_[i];
            if (s.fd < 0) continue;
            if (s.user < 0) {
                if (now >= s.deadline) drop(s, LoginTimeout);
                continue;
            }
            if (now - s.last_in >= s.idle_ms) { drop(s, IdleTimeout); continue; }
            // A client with output waiting that took none of it for idle_ms does not
            // read.
            if (s.taken != s.taken_seen || !pending(s)) { s.taken_seen = s.taken; s.progress = now; }
            else if (now - s.progress >= s.idle_ms) { drop(s, SlowConsumer); continue; }
            if (!pending(s) && now - s.last_out >= cfg_.heartbeat_ms) {
                static constexpr std::uint8_t h[3] = {0, 1, 'H'};
                ex_.bump(HeartbeatsOut);
                ctrl(s, h, 3);
                flush(s, i);
            }
        }
    }
    // --8<-- [end:timers]

    // Bounded: each session gets at most ~500 ms in all to take its last bytes.
    void finish() {
        ex_.end_of_day();
        flush_dirty();
        write_market_data();
        if (itch_fd_ >= 0) { ::close(itch_fd_); itch_fd_ = -1; }
        const std::int64_t until = now_ms() + 500;
        for (std::size_t i = 0; i < sessions_.size(); ++i) {
            Session& s = *sessions_[i];
            if (s.fd < 0) continue;
            if (s.user >= 0) {
                while (pending(s) && now_ms() < until && s.fd >= 0) {
                    flush(s, i);
                    if (s.fd >= 0 && pending(s)) ::usleep(1000);
                }
                static constexpr std::uint8_t z[3] = {0, 1, 'Z'};
                if (s.fd >= 0) { ctrl(s, z, 3); flush(s, i); }
            }
            if (s.fd >= 0) drop(s, -1);
        }
    }

    Exchange ex_;
    Config cfg_;
    int listen_fd_ = -1, ep_ = -1, wake_ = -1, itch_fd_ = -1;
    std::uint16_t port_ = 0;
    std::vector<std::unique_ptr<Session>> sessions_;
    std::vector<std::int32_t> by_user_;      // user -> its session's slot, or -1
    std::atomic<bool> stop_{false};
    int reserve_fd_ = -1;                    // a spare descriptor, given back on EMFILE
    std::int64_t paused_until_ = 0;          // accepting paused (no reserve) until then
    std::uint64_t serial_ = 0;               // connections accepted, for their order
    std::size_t logged_in_ = 0;
    static constexpr std::size_t kTimings = 1 << 20;
    std::vector<std::int64_t> timings_;      // reserved at start: no allocation per sample
};

}  // namespace twinmatch::entry
