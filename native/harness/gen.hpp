// The exchange simulator behind `twinmatch gen`: synthetic ITCH 5.0 days and order flow.
//
// This is harness, not a twin: there is no naive (Python) simulator, because a readable
// per-message Python loop could not write 10 million messages in well under a minute, and
// nothing needs to be compared against it. What the tests compare instead is the feed it
// writes against an independent Python rebuild of the books (tests/test_gen.py).
//
// Two modes share one book per symbol and one matching routine:
//   * market: the feed an exchange publishes about its own matching (S R H A F E C X D U P).
//     An incoming marketable order is matched first (E/C against resting orders, best price
//     then FIFO) and only a remainder is shown, as an A/F: the aggressor itself never is.
//   * flow: the incoming orders a matching engine receives (S R H, A that may cross, D, U).
//     The simulator matches silently so that every D/U names an order that still rests.
//
// Reproducible on any machine: a xoshiro256** generator seeded with splitmix64, integer
// arithmetic everywhere except a few IEEE-exact double operations (+ - * / and compares,
// never libm's exp/log/pow, whose last bits differ between C libraries).
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace twinmatch::gen {

// --8<-- [start:rng]
// splitmix64 turns one 64-bit seed into well-mixed state words; xoshiro256** is the
// generator itself (Blackman & Vigna): fast, small, and the same sequence everywhere.
class Rng {
public:
    explicit Rng(std::uint64_t seed) {
        for (auto& word : s_) {
            seed += 0x9E3779B97F4A7C15ull;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            word = z ^ (z >> 31);
        }
    }
    std::uint64_t next() {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    // A number in [0, n) (n > 0) by multiply-and-shift (Lemire): no division, no loop.
    std::uint64_t below(std::uint64_t n) {
        return static_cast<std::uint64_t>((static_cast<U128>(next()) * n) >> 64);
    }
    // True with probability per_million / 1e6.
    bool chance(std::uint32_t per_million) { return below(1'000'000) < per_million; }
    // Failures before the first success (success chance stop_per_million), at most cap.
    std::uint32_t geometric(std::uint32_t stop_per_million, std::uint32_t cap) {
        std::uint32_t k = 0;
        while (k < cap && !chance(stop_per_million)) ++k;
        return k;
    }
    // A double in [0, 1) from the top 53 bits: exact, so identical on every machine.
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    __extension__ typedef unsigned __int128 U128;  // GCC/Clang's 128-bit integer
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t s_[4]{};
};
// --8<-- [end:rng]

// Big-endian stores: ITCH is big-endian on the wire whatever the machine.
inline void put16(std::uint8_t* p, std::uint64_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void put32(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
inline void put48(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 6; ++i) p[i] = static_cast<std::uint8_t>(v >> (40 - 8 * i));
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}
inline std::uint64_t get_be(const std::uint8_t* p, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
    return v;
}

constexpr std::uint64_t kSecond = 1'000'000'000ull;
constexpr std::uint64_t kHour = 3600 * kSecond;
// The day's clock (ns since midnight). Order activity runs in market hours only.
constexpr std::uint64_t kStartOfMessages = 3 * kHour;             // S 'O' 03:00
constexpr std::uint64_t kSystemStart = 4 * kHour;                 // S 'S' 04:00
constexpr std::uint64_t kMarketOpen = 9 * kHour + 30 * 60 * kSecond;  // S 'Q' 09:30
constexpr std::uint64_t kMarketClose = 16 * kHour;                // S 'M' 16:00
constexpr std::uint64_t kSystemEnd = 20 * kHour;                  // S 'E' 20:00
constexpr std::uint64_t kEndOfMessages = 20 * kHour + 5 * 60 * kSecond;  // S 'C' 20:05

constexpr std::uint32_t kNil = 0xFFFFFFFFu;
constexpr std::uint64_t kMaxSymbols = 60'000;
constexpr std::uint64_t kTrailer = 3;  // S 'M', 'E', 'C'

struct Config {
    std::uint64_t seed = 1;
    std::uint64_t messages = 1'000'000;  // exact number of messages in the file
    std::uint32_t symbols = 500;
    bool flow = false;                   // order-flow mode (see the top of this file)
    // Market mode: also the messages that change no book (Q crosses, B breaks, I
    // imbalances, h operational halts) and C prints away from the resting price. Off by
    // default: a day without them is byte for byte what it was before they existed.
    bool all_types = false;
    // Market mode: when the day's events happen. Flat (false, the default, byte for byte
    // the day as before) spreads them evenly over market hours; intraday (true) is the
    // IntradayClock below: a busy open and close, a quiet midday, bursts within seconds.
    bool intraday = false;
};

// --8<-- [start:intraday]
// An intraday clock: event times from a self-exciting (Hawkes) process in discrete
// bins, so that a real-shaped burst exists to be measured (chapter 15). Stated
// parameters (a reader's "open, lunch, close" U, and bursts that fade within seconds):
//   * baseline weight w(t): 4 at 09:30 falling linearly to 1 at 10:00, 1 until 15:30,
//     rising linearly to 3 at 16:00;
//   * self-excitation: each event adds to the intensity of the following 10 ms bins a
//     kick that decays by a factor 0.98 per bin (an e-folding time of about half a
//     second); the branching ratio (events each event begets, on average) is 0.7;
//   * the scale is re-fitted at every bin so that the remaining messages fill the
//     remaining weight: the day still has exactly the messages asked for, and ends
//     by 16:00.
// Only + - * / and compares on doubles (never libm's exp or log, whose last bits differ
// between C libraries): waiting times are exponential by von Neumann's comparison
// method, and the decay is one multiplication per bin.
struct IntradayClock {
    static constexpr std::uint64_t kBin = 10'000'000;          // 10 ms
    static constexpr double kDecay = 0.98;                      // per bin
    static constexpr double kBranching = 0.7;
    static constexpr std::uint64_t kRamp = 30 * 60 * 1'000'000'000ull;  // 30 minutes
    static constexpr double kOpenWeight = 4.0, kCloseWeight = 3.0;
// --8<-- [end:intraday]

    // Baseline weight at t (ns since the open), and its integral from t to the close
    // (in weight-seconds): piecewise linear, so both are exact sums of trapezoids.
    static double weight(std::uint64_t t, std::uint64_t day) {
        if (t < kRamp) return kOpenWeight - (kOpenWeight - 1.0) * (double(t) / double(kRamp));
        if (t + kRamp > day) {
            const double into = double(t + kRamp - day) / double(kRamp);
            return 1.0 + (kCloseWeight - 1.0) * into;
        }
        return 1.0;
    }
    static double weight_left(std::uint64_t t, std::uint64_t day) {
        if (t >= day) return 0.0;
        const std::uint64_t knots[2] = {kRamp, day - kRamp};
        double sum = 0.0;
        std::uint64_t a = t;
        for (std::uint64_t knot : knots) {
            if (a < knot) {
                sum += 0.5 * (weight(a, day) + weight(knot, day)) * (double(knot - a) * 1e-9);
                a = knot;
            }
        }
        sum += 0.5 * (weight(a, day) + weight(day, day)) * (double(day - a) * 1e-9);
        return sum;
    }
};

// --8<-- [start:structures]
// A resting order lives in one pool slot. prev/next link it into its price level's FIFO
// queue (an intrusive doubly linked list: O(1) removal from the middle of a queue), and
// live_pos is its place in its symbol's list of live orders (O(1) random choice).
struct Order {
    std::uint64_t ref;
    std::uint32_t price;
    std::uint32_t shares;
    std::uint32_t prev;
    std::uint32_t next;
    std::uint32_t live_pos;
    std::uint16_t sym;
    std::uint8_t side;  // 0 buy, 1 sell
};

struct Level {
    std::uint32_t head = kNil;
    std::uint32_t tail = kNil;
};

struct Symbol {
    char name[8];           // space padded, as on the wire
    std::uint32_t tick;     // price step: 100 (one cent), or 1 below $1
    std::uint32_t floor;    // lowest and highest price the simulator quotes
    std::uint32_t cap;
    std::uint32_t last;     // last trade price: the anchor when the book is empty
    std::uint32_t target;   // live orders the book is steered towards
    std::uint16_t tracking = 0;
    // Both sides sorted ascending by price: best bid = last key, best ask = first key.
    std::map<std::uint32_t, Level> levels[2];
    std::vector<std::uint32_t> live;
};
// --8<-- [end:structures]

class Simulator {
public:
    explicit Simulator(const Config& cfg) : cfg_(cfg), rng_(cfg.seed) {
        if (cfg.symbols == 0 || cfg.symbols > kMaxSymbols)
            throw std::invalid_argument("symbols must be 1.." + std::to_string(kMaxSymbols));
        if (cfg.messages < minimum_messages(cfg.symbols))
            throw std::invalid_argument(
                "messages must be at least " + std::to_string(minimum_messages(cfg.symbols)) +
                " for " + std::to_string(cfg.symbols) + " symbols (the S, R and H messages)");
        make_symbols();
    }

    static std::uint64_t minimum_messages(std::uint64_t symbols) { return 6 + 2 * symbols; }

    // Appends whole framed messages to out until it holds at least min_bytes or the day
    // is over. Returns false once every message has been written.
    bool fill(std::vector<std::uint8_t>& out, std::size_t min_bytes) {
        out_ = &out;
        while (out.size() < min_bytes && phase_ != Phase::Done) step();
        out_ = nullptr;
        return phase_ != Phase::Done;
    }

    bool done() const { return phase_ == Phase::Done; }
    std::uint64_t emitted() const { return emitted_; }
    const std::array<std::uint64_t, 256>& counts() const { return counts_; }
    std::size_t live_orders() const { return pool_.size() - free_.size(); }
    const std::vector<Symbol>& symbols() const { return syms_; }

    // --8<-- [start:books_csv]
    // The books CSV of DESIGN.md: one row per resting order, by locate, side (B first),
    // price ascending, then place in the level's queue.
    std::string books_csv() const {
        std::string s = "locate,stock,side,price,priority,order_ref,shares\n";
        char buf[24];
        auto num = [&](std::uint64_t v) {
            auto r = std::to_chars(buf, buf + sizeof buf, v);
            s.append(buf, r.ptr);
        };
        for (std::size_t i = 0; i < syms_.size(); ++i) {
            const Symbol& sym = syms_[i];
            std::string stock(sym.name, 8);
            stock.erase(stock.find_last_not_of(' ') + 1);
            for (int side = 0; side < 2; ++side) {
                for (const auto& [price, level] : sym.levels[side]) {
                    std::uint64_t priority = 0;
                    for (std::uint32_t k = level.head; k != kNil; k = pool_[k].next) {
                        num(i + 1);
                        s += ',';
                        s += stock;
                        s += side == 0 ? ",B," : ",S,";
                        num(price);
                        s += ',';
                        num(priority++);
                        s += ',';
                        num(pool_[k].ref);
                        s += ',';
                        num(pool_[k].shares);
                        s += '\n';
                    }
                }
            }
        }
        return s;
    }
    // --8<-- [end:books_csv]

private:
    enum class Phase { Header, Day, Trailer, Done };

    // ---- symbols ---------------------------------------------------------------------

    void make_symbols() {
        // Unique names of 1-5 letters, mostly 3-4, sorted: NASDAQ assigns locates
        // alphabetically, from 1.
        std::set<std::string> names;
        while (names.size() < cfg_.symbols) {
            const std::uint64_t r = rng_.below(100);
            const int len = r < 2 ? 1 : r < 10 ? 2 : r < 45 ? 3 : r < 95 ? 4 : 5;
            std::string n;
            for (int i = 0; i < len; ++i) n += static_cast<char>('A' + rng_.below(26));
            names.insert(n);
        }
        syms_.resize(cfg_.symbols);
        std::size_t i = 0;
        for (const auto& n : names) {
            std::memset(syms_[i].name, ' ', 8);
            std::memcpy(syms_[i].name, n.data(), n.size());
            ++i;
        }
        // Popularity: Zipf (weight 1/rank) over a random order of the symbols, so the
        // busiest symbol is not simply the first alphabetically.
        std::vector<std::uint32_t> order(cfg_.symbols);
        for (std::uint32_t k = 0; k < cfg_.symbols; ++k) order[k] = k;
        for (std::uint32_t k = cfg_.symbols - 1; k > 0; --k)
            std::swap(order[k], order[rng_.below(k + 1)]);
        std::vector<double> weight(cfg_.symbols);
        for (std::uint32_t rank = 0; rank < cfg_.symbols; ++rank) {
            weight[order[rank]] = 1.0 / static_cast<double>(rank + 1);
            syms_[order[rank]].target = 16 + 3000 / (rank + 1);
        }
        cumulative_.resize(cfg_.symbols);
        double total = 0;
        for (std::uint32_t k = 0; k < cfg_.symbols; ++k) cumulative_[k] = total += weight[k];
        // Price ranges from penny stocks to four-figure ones (ITCH units: 1/10,000 dollar).
        static constexpr std::uint32_t lo[] = {2'000, 10'000, 50'000, 200'000, 1'000'000,
                                               5'000'000};
        static constexpr std::uint32_t hi[] = {9'000, 50'000, 200'000, 1'000'000, 5'000'000,
                                               30'000'000};
        static constexpr std::uint32_t band_weight[] = {5, 15, 25, 30, 18, 7};  // per 100
        for (auto& s : syms_) {
            std::uint64_t r = rng_.below(100);
            int band = 0;
            while (r >= band_weight[band]) r -= band_weight[band++];
            s.tick = band == 0 ? 1 : 100;
            const std::uint32_t start = round_to(
                lo[band] + static_cast<std::uint32_t>(rng_.below(hi[band] - lo[band])), s.tick);
            s.last = start;
            s.floor = std::max(s.tick, round_to(start / 4, s.tick));
            s.cap = band == 0 ? 9'999 : round_to(std::min<std::uint64_t>(start * 4ull,
                                                                         1'999'999'900ull),
                                                 s.tick);
        }
    }

    static std::uint32_t round_to(std::uint64_t v, std::uint32_t tick) {
        return static_cast<std::uint32_t>(v / tick * tick);
    }

    std::uint32_t pick_symbol() {
        const double u = rng_.unit() * cumulative_.back();
        auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
        if (it == cumulative_.end()) --it;
        return static_cast<std::uint32_t>(it - cumulative_.begin());
    }

    // ---- emitting messages -----------------------------------------------------------

    // Reserves one framed message (2-byte length + body) and writes the common header;
    // returns the body so the caller fills in the fields from offset 11.
    std::uint8_t* begin(char type, std::uint16_t locate, std::uint16_t tracking,
                        std::size_t len) {
        auto& out = *out_;
        const std::size_t at = out.size();
        out.resize(at + 2 + len);
        std::uint8_t* p = out.data() + at;
        put16(p, len);
        p += 2;
        p[0] = static_cast<std::uint8_t>(type);
        put16(p + 1, locate);
        put16(p + 3, tracking);
        ts_ += 1;  // strictly increasing, one ns at least between messages
        put48(p + 5, ts_);
        ++counts_[static_cast<std::uint8_t>(type)];
        ++emitted_;
        return p;
    }
    std::uint8_t* begin_sym(char type, std::uint16_t sym, std::size_t len) {
        return begin(type, static_cast<std::uint16_t>(sym + 1), ++syms_[sym].tracking, len);
    }

    void emit_system(char code) { begin('S', 0, 0, 12)[11] = static_cast<std::uint8_t>(code); }

    void emit_directory(std::uint16_t sym) {
        std::uint8_t* p = begin_sym('R', sym, 39);
        std::memcpy(p + 11, syms_[sym].name, 8);
        p[19] = "QGS"[sym % 3];  // market category: Global Select, Global, Capital
        p[20] = 'N';             // financial status: normal
        put32(p + 21, 100);      // round lot
        p[25] = 'N';
        p[26] = 'C';             // common stock
        p[27] = 'Z';
        p[28] = ' ';
        p[29] = 'P';             // live/production
        p[30] = 'N';
        p[31] = 'N';
        p[32] = '2';
        p[33] = 'N';
        put32(p + 34, 0);
        p[38] = 'N';
    }

    void emit_trading(std::uint16_t sym) {
        std::uint8_t* p = begin_sym('H', sym, 25);
        std::memcpy(p + 11, syms_[sym].name, 8);
        p[19] = 'T';  // trading
        p[20] = ' ';
        std::memcpy(p + 21, "    ", 4);
    }

    void emit_add(const Order& o, bool mpid) {
        std::uint8_t* p = begin_sym(mpid ? 'F' : 'A', o.sym, mpid ? 40 : 36);
        put64(p + 11, o.ref);
        p[19] = o.side == 0 ? 'B' : 'S';
        put32(p + 20, o.shares);
        std::memcpy(p + 24, syms_[o.sym].name, 8);
        put32(p + 32, o.price);
        if (mpid) {
            static constexpr const char* kMpids[] = {"GSCO", "MSCO", "JPMS", "UBSS",
                                                     "CDRG", "VIRT", "SUSQ", "NITE"};
            std::memcpy(p + 36, kMpids[rng_.below(8)], 4);
        }
    }

    void emit_execution(const Order& o, std::uint32_t shares) {
        const bool with_price = rng_.chance(100'000);  // one execution in ten is a C
        std::uint8_t* p = begin_sym(with_price ? 'C' : 'E', o.sym, with_price ? 36 : 31);
        put64(p + 11, o.ref);
        put32(p + 19, shares);
        put64(p + 23, ++match_);
        if (with_price) {
            // Printable N: the shares print later in a bulk trade. The execution price is
            // the resting price, or (all_types) a few ticks either side of it: a C's price
            // is its print's, and never moves the resting order.
            p[31] = rng_.chance(200'000) ? 'N' : 'Y';
            put32(p + 32, cfg_.all_types ? away(o) : o.price);
        }
    }

    // A print price 1-3 ticks above or below the resting order's, within the symbol's
    // range (it may land on the resting price itself at the range's edge).
    std::uint32_t away(const Order& o) {
        const std::int64_t tick = syms_[o.sym].tick;
        const std::int64_t steps = 1 + static_cast<std::int64_t>(rng_.below(3));
        const std::int64_t price = o.price + (rng_.below(2) ? steps : -steps) * tick;
        return static_cast<std::uint32_t>(std::clamp<std::int64_t>(
            price, syms_[o.sym].floor, syms_[o.sym].cap));
    }

    // --8<-- [start:no_book]
    // all_types: one of the messages that change no book (about 2 events in 100). Q: a
    // cross printed in bulk (8-byte shares); B: a break of an earlier print's match
    // number; I: an auction imbalance around the last price; h: an operational halt on
    // one market centre, and its resumption.
    void no_book_event(std::uint16_t sym) {
        Symbol& s = syms_[sym];
        const std::uint64_t kind = rng_.below(4);
        if (kind == 0) {
            std::uint8_t* p = begin_sym('Q', sym, 40);
            put64(p + 11, 100ull * (1 + rng_.below(100'000)));
            std::memcpy(p + 19, s.name, 8);
            put32(p + 27, s.last);
            put64(p + 31, ++match_);
            p[39] = "OCHI"[rng_.below(4)];  // opening, closing, halt/IPO, intraday
        } else if (kind == 1 && match_ > 0) {
            put64(begin_sym('B', sym, 19) + 11, 1 + rng_.below(match_));
        } else if (kind <= 2) {
            std::uint8_t* p = begin_sym('I', sym, 50);
            put64(p + 11, 100ull * rng_.below(50'000));   // paired
            put64(p + 19, 100ull * rng_.below(5'000));    // imbalance
            p[27] = "BSNO"[rng_.below(4)];
            std::memcpy(p + 28, s.name, 8);
            const std::uint32_t near = s.last, far = s.last + s.tick * (1 + rng_.below(5));
            put32(p + 36, far);
            put32(p + 40, near);
            put32(p + 44, s.last);
            p[48] = "OCH"[rng_.below(3)];
            p[49] = ' ';
        } else {
            for (const char action : {'H', 'T'}) {  // halted, then trading again
                std::uint8_t* p = begin_sym('h', sym, 21);
                std::memcpy(p + 11, s.name, 8);
                p[19] = "QBX"[rng_.below(3)];  // Nasdaq, BX, PSX
                p[20] = static_cast<std::uint8_t>(action);
            }
        }
    }
    // --8<-- [end:no_book]

    // ---- the books ---------------------------------------------------------------------

    std::uint32_t insert(std::uint16_t sym, std::uint8_t side, std::uint32_t price,
                         std::uint32_t shares, std::uint64_t ref) {
        std::uint32_t k;
        if (!free_.empty()) {
            k = free_.back();
            free_.pop_back();
        } else {
            k = static_cast<std::uint32_t>(pool_.size());
            pool_.emplace_back();
        }
        Symbol& s = syms_[sym];
        Level& level = s.levels[side][price];
        pool_[k] = Order{ref, price, shares, level.tail, kNil,
                         static_cast<std::uint32_t>(s.live.size()), sym, side};
        if (level.tail != kNil) pool_[level.tail].next = k; else level.head = k;
        level.tail = k;
        s.live.push_back(k);
        return k;
    }

    void remove(std::uint32_t k) {
        const Order o = pool_[k];
        Symbol& s = syms_[o.sym];
        auto it = s.levels[o.side].find(o.price);
        Level& level = it->second;
        if (o.prev != kNil) pool_[o.prev].next = o.next; else level.head = o.next;
        if (o.next != kNil) pool_[o.next].prev = o.prev; else level.tail = o.prev;
        if (level.head == kNil) s.levels[o.side].erase(it);
        // swap-remove from the live list, fixing the moved order's position
        const std::uint32_t moved = s.live.back();
        s.live[o.live_pos] = moved;
        pool_[moved].live_pos = o.live_pos;
        s.live.pop_back();
        free_.push_back(k);
    }

    bool has(const Symbol& s, int side) const { return !s.levels[side].empty(); }
    std::uint32_t best(const Symbol& s, int side) const {
        return side == 0 ? s.levels[0].rbegin()->first : s.levels[1].begin()->first;
    }

    // --8<-- [start:match]
    // An incoming order on `side` trades against the opposite side while it crosses:
    // best price first, FIFO within a price, each fill at the resting order's price.
    // Emits an E or C per fill when `visible`; stops after max_fills fills.
    void match(std::uint16_t sym, std::uint8_t side, std::uint32_t limit,
               std::uint32_t& remaining, bool visible, std::uint32_t max_fills) {
        Symbol& s = syms_[sym];
        auto& opposite = s.levels[side ^ 1];
        std::uint32_t fills = 0;
        while (remaining > 0 && !opposite.empty() && fills < max_fills) {
            const std::uint32_t price = best(s, side ^ 1);
            if (side == 0 ? price > limit : price < limit) break;
            const std::uint32_t k = opposite.find(price)->second.head;
            const std::uint32_t q = std::min(remaining, pool_[k].shares);
            if (visible) emit_execution(pool_[k], q);
            remaining -= q;
            pool_[k].shares -= q;
            s.last = price;
            ++fills;
            if (pool_[k].shares == 0) remove(k);
        }
    }
    // --8<-- [end:match]

    // ---- choosing orders -----------------------------------------------------------------

    std::uint32_t quantity() {
        const std::uint64_t r = rng_.below(100);
        if (r < 78) return static_cast<std::uint32_t>(100 * (1 + rng_.below(10)));
        if (r < 95) return static_cast<std::uint32_t>(1 + rng_.below(99));  // odd lot
        return static_cast<std::uint32_t>(100 * (10 + rng_.below(41)));
    }

    // --8<-- [start:price]
    // A price for a new resting order on `side` that does not cross: mostly a few ticks
    // behind the best price on its side (geometric, so most sit at or near the touch),
    // sometimes improving a wide spread. Returns 0 if no such price exists.
    std::uint32_t passive_price(const Symbol& s, std::uint8_t side) {
        const std::int64_t tick = s.tick;
        const bool bid = has(s, 0), ask = has(s, 1);
        const std::int64_t lo = side == 0 ? s.floor : (bid ? best(s, 0) + tick : s.floor);
        const std::int64_t hi = side == 0 ? (ask ? best(s, 1) - tick : s.cap) : s.cap;
        if (lo > hi) return 0;
        const std::int64_t away = tick * rng_.geometric(300'000, 60);
        std::int64_t price;
        if (has(s, side)) {
            const std::int64_t own = best(s, side);
            const std::int64_t spread = bid && ask ? (best(s, 1) - best(s, 0)) / tick : 0;
            const std::uint32_t improve = spread >= 2
                ? static_cast<std::uint32_t>(std::min<std::int64_t>(150'000 + 100'000 * (spread - 2),
                                                                    900'000))
                : 0;
            if (improve && rng_.chance(improve))
                price = side == 0 ? own + tick : own - tick;
            else
                price = side == 0 ? own - away : own + away;
        } else if (has(s, side ^ 1)) {
            price = side == 0 ? best(s, 1) - tick - away : best(s, 0) + tick + away;
        } else {
            price = side == 0 ? s.last - tick - away : s.last + tick + away;
        }
        return static_cast<std::uint32_t>(std::clamp(price, lo, hi));
    }
    // --8<-- [end:price]

    // A limit price through the opposite touch (0 to a few ticks beyond it).
    std::uint32_t marketable_price(const Symbol& s, std::uint8_t side) {
        const std::int64_t through = static_cast<std::int64_t>(s.tick) * rng_.geometric(550'000, 5);
        const std::int64_t touch = best(s, side ^ 1);
        const std::int64_t price = side == 0 ? touch + through : touch - through;
        return static_cast<std::uint32_t>(std::clamp<std::int64_t>(price, s.floor, s.cap));
    }

    std::uint32_t pick_live(const Symbol& s) {
        return s.live[rng_.below(s.live.size())];
    }

    // ---- the day ---------------------------------------------------------------------------

    void step() {
        switch (phase_) {
            case Phase::Header: header(); break;
            case Phase::Day: event(); break;
            case Phase::Trailer: trailer(); break;
            case Phase::Done: break;
        }
    }

    void header() {
        ts_ = kStartOfMessages - 1;
        emit_system('O');
        ts_ += 1000;
        for (std::uint16_t k = 0; k < syms_.size(); ++k) {
            emit_directory(k);
            ts_ += 1000;  // a microsecond apart
        }
        ts_ = kSystemStart - 1;
        emit_system('S');
        for (std::uint16_t k = 0; k < syms_.size(); ++k) {
            ts_ += 1000;
            emit_trading(k);
        }
        ts_ = kMarketOpen - 1;
        emit_system('Q');
        phase_ = Phase::Day;
    }

    void trailer() {
        ts_ = std::max(ts_, kMarketClose - 1);
        emit_system('M');
        ts_ = kSystemEnd - 1;
        emit_system('E');
        ts_ = kEndOfMessages - 1;
        emit_system('C');
        phase_ = Phase::Done;
    }

    // One event: a symbol by popularity, then what happens to its book (1+ messages).
    void event() {
        const std::uint64_t left = cfg_.messages - kTrailer - emitted_;
        if (left == 0) {
            phase_ = Phase::Trailer;
            return;
        }
        // Spread the remaining messages evenly over the remaining market hours: the gap
        // before this event is uniform in [0, 2 * average].
        if (cfg_.intraday) {
            ts_ = std::max(ts_, intraday_next(left));
        } else {
            const std::uint64_t time_left = kMarketClose > ts_ ? kMarketClose - ts_ : 0;
            ts_ += rng_.below(2 * time_left / (left + 1) + 1);
        }
        const std::uint16_t sym = static_cast<std::uint16_t>(pick_symbol());
        // Near the end only single-message events, so the file has exactly cfg_.messages.
        const bool room = left > 64;
        if (cfg_.flow) flow_event(sym); else market_event(sym, room);
    }

    // --8<-- [start:exp1]
    // An exponential waiting time of mean 1 (von Neumann, 1951): draw u1 >= u2 >= ...
    // until the run stops falling; an odd run length accepts u1 (plus the rejections so
    // far), an even one rejects. Comparisons and additions only: the same on every
    // machine.
    double exp1() {
        double whole = 0.0;
        for (int round = 0; round < 64; ++round) {  // 64 rejections: chance e^-64
            const double u1 = rng_.unit();
            double prev = u1;
            std::uint32_t run = 1;
            for (; run < 64; ++run) {
                const double u = rng_.unit();
                if (u > prev) break;
                prev = u;
            }
            if (run % 2 == 1) return whole + u1;
            whole += 1.0;
        }
        return whole;
    }
    // --8<-- [end:exp1]

    // --8<-- [start:intraday_next]
    // The time (ns since midnight) of the next event on the intraday clock. Inside a bin
    // the intensity is constant, so the wait is exponential; a wait past the bin's end
    // moves to the next bin (the exponential forgets, so drawing again there is exact).
    std::uint64_t intraday_next(std::uint64_t left) {
        using C = IntradayClock;
        const std::uint64_t day = kMarketClose - kMarketOpen;
        // messages per event so far (an event is 1+ messages), to turn messages into events
        const std::uint64_t header = minimum_messages(cfg_.symbols) - kTrailer;
        const double per_event = double(emitted_ - header + 1) / double(day_events_ + 1);
        for (std::uint64_t guard = 0; !tail_ && guard < 2 * day / C::kBin + 2; ++guard) {
            if (bin_end_ == 0 || cursor_ >= bin_end_) {  // a new bin: decay, kick, re-fit
                if (bin_end_ != 0) {
                    excite_ = (excite_ + double(bin_events_) * kick()) * C::kDecay;
                    cursor_ = bin_end_;
                }
                bin_events_ = 0;
                bin_end_ = cursor_ - cursor_ % C::kBin + C::kBin;
                const double room = C::weight_left(cursor_, day);
                if (cursor_ + C::kBin >= day || room <= 0.0) {  // the last bin: flat
                    tail_ = true;
                    break;
                }
                // events still to come, over the weight left: the base rate that fills it
                const double target = double(left) / per_event / room;
                rate_ = (1.0 - C::kBranching) * target * C::weight(cursor_, day) + excite_;
            }
            const double wait_s = exp1() / rate_;
            const double wait_ns = wait_s * 1e9;
            if (wait_ns < double(bin_end_ - cursor_)) {
                cursor_ += static_cast<std::uint64_t>(wait_ns);
                ++bin_events_;
                ++day_events_;
                return kMarketOpen + cursor_;
            }
            cursor_ = bin_end_;
        }
        // The last bin (or a day squeezed past its weight): spread what is left evenly.
        const std::uint64_t now = std::max(ts_, kMarketOpen + cursor_);
        const std::uint64_t time_left = kMarketClose > now ? kMarketClose - now : 0;
        ++day_events_;
        return now + rng_.below(2 * time_left / (left + 1) + 1);
    }
    // The kick one event gives the intensity (events/s) of the next bin: summed over the
    // bins after it (a geometric series) it begets kBranching events on average.
    static double kick() {
        using C = IntradayClock;
        return C::kBranching * (1.0 - C::kDecay) / (double(C::kBin) * 1e-9);
    }
    // --8<-- [end:intraday_next]

    enum class Op { Add, Delete, Cancel, Replace, Aggress, Hidden };

    // Steer each book towards its target size: an empty-ish book mostly grows, an
    // overfull one mostly shrinks; in between the weights below decide.
    Op steer(const Symbol& s, Op op) {
        const std::uint64_t live = s.live.size(), target = s.target;
        const bool removes = op == Op::Delete || op == Op::Cancel || op == Op::Replace;
        if (removes && live < target && rng_.below(target) >= live) return Op::Add;
        if (op == Op::Add && live > target && rng_.below(target) < live - target)
            return Op::Delete;
        return op;
    }

    // --8<-- [start:market_event]
    void market_event(std::uint16_t sym, bool room) {
        Symbol& s = syms_[sym];
        if (cfg_.all_types && room && rng_.chance(20'000)) {
            no_book_event(sym);
            return;
        }
        // Per 1,000 events: cancels (D + X) outnumber executions about 20:1.
        const std::uint64_t r = rng_.below(1000);
        Op op = r < 454 ? Op::Add : r < 834 ? Op::Delete : r < 879 ? Op::Cancel
              : r < 979 ? Op::Replace : r < 987 ? Op::Aggress : Op::Hidden;
        op = steer(s, op);
        switch (op) {
            case Op::Add: add_passive(sym); break;
            case Op::Delete: {
                const std::uint32_t k = pick_live(s);
                put64(begin_sym('D', sym, 19) + 11, pool_[k].ref);
                remove(k);
                break;
            }
            case Op::Cancel: {  // partial: the order keeps its place in the queue
                const std::uint32_t k = pick_live(s);
                Order& o = pool_[k];
                if (o.shares < 2) {
                    put64(begin_sym('D', sym, 19) + 11, o.ref);
                    remove(k);
                    break;
                }
                const auto cancelled = static_cast<std::uint32_t>(1 + rng_.below(o.shares - 1));
                std::uint8_t* p = begin_sym('X', sym, 23);
                put64(p + 11, o.ref);
                put32(p + 19, cancelled);
                o.shares -= cancelled;
                break;
            }
            case Op::Replace: replace(sym, false); break;
            case Op::Aggress: {
                const std::uint8_t side = static_cast<std::uint8_t>(rng_.below(2));
                if (!room || !has(s, side ^ 1)) {
                    add_passive(sym);
                    break;
                }
                const std::uint32_t limit = marketable_price(s, side);
                std::uint32_t remaining = quantity() * static_cast<std::uint32_t>(1 + rng_.below(3));
                const std::uint32_t max_fills = 32;
                match(sym, side, limit, remaining, true, max_fills);
                // The remainder rests (and is shown) unless the order was immediate-or-
                // cancel, or hit the fill limit with liquidity still at its price.
                const bool crossed = has(s, side ^ 1) &&
                    (side == 0 ? best(s, 1) <= limit : best(s, 0) >= limit);
                if (remaining > 0 && !crossed && rng_.chance(600'000)) {
                    const std::uint32_t k = insert(sym, side, limit, remaining, next_ref_++);
                    const bool mpid = rng_.chance(150'000);
                    emit_add(pool_[k], mpid);
                }
                break;
            }
            case Op::Hidden: {  // a fill against a non-displayed order: no book change
                std::uint32_t price = s.last;
                if (has(s, 0) && has(s, 1)) {
                    const std::uint32_t bid = best(s, 0), ask = best(s, 1);
                    price = bid + s.tick * static_cast<std::uint32_t>(
                                           rng_.below((ask - bid) / s.tick + 1));
                }
                std::uint8_t* p = begin_sym('P', sym, 44);
                put64(p + 11, 0);
                p[19] = 'B';
                put32(p + 20, quantity());
                std::memcpy(p + 24, s.name, 8);
                put32(p + 32, price);
                put64(p + 36, ++match_);
                break;
            }
        }
    }
    // --8<-- [end:market_event]

    void add_passive(std::uint16_t sym) {
        Symbol& s = syms_[sym];
        auto side = static_cast<std::uint8_t>(rng_.below(2));
        std::uint32_t price = passive_price(s, side);
        if (price == 0) {
            side ^= 1;
            price = passive_price(s, side);
        }
        if (price == 0) throw std::logic_error("gen: no passive price on either side");
        const std::uint32_t shares = quantity();
        const std::uint32_t k = insert(sym, side, price, shares, next_ref_++);
        const bool mpid = !cfg_.flow && rng_.chance(150'000);  // flow mode: A only
        emit_add(pool_[k], mpid);
    }

    // U: the order leaves, a new reference enters at a nearby price with new shares, at
    // the back of its level's queue. In flow mode it may be priced through the touch.
    void replace(std::uint16_t sym, bool may_cross) {
        Symbol& s = syms_[sym];
        const std::uint32_t k = pick_live(s);
        const Order old = pool_[k];
        remove(k);
        const std::int64_t tick = s.tick;
        std::int64_t price = old.price + tick * (static_cast<std::int64_t>(rng_.below(5)) - 2);
        std::int64_t lo = s.floor, hi = s.cap;
        const bool cross = may_cross && has(s, old.side ^ 1) && rng_.chance(50'000);
        if (cross) {
            price = marketable_price(s, old.side);
        } else {
            // Not through the opposite touch. The old price was inside [lo, hi] (the book
            // was not crossed), so the range is never empty.
            if (old.side == 0 && has(s, 1)) hi = best(s, 1) - tick;
            if (old.side == 1 && has(s, 0)) lo = best(s, 0) + tick;
            price = std::clamp(price, lo, hi);
        }
        const std::uint32_t shares = quantity();
        const std::uint64_t ref = next_ref_++;
        std::uint8_t* p = begin_sym('U', sym, 35);
        put64(p + 11, old.ref);
        put64(p + 19, ref);
        put32(p + 27, shares);
        put32(p + 31, static_cast<std::uint32_t>(price));
        std::uint32_t remaining = shares;
        if (cross) match(sym, old.side, static_cast<std::uint32_t>(price), remaining, false, kNil);
        if (remaining > 0) insert(sym, old.side, static_cast<std::uint32_t>(price), remaining, ref);
    }

    // --8<-- [start:flow_event]
    // Order flow: what a matching engine receives. Adds may cross (the engine matches
    // them; the simulator does too, silently, so that later D/U name live orders).
    void flow_event(std::uint16_t sym) {
        Symbol& s = syms_[sym];
        const std::uint64_t r = rng_.below(1000);
        Op op = steer(s, r < 520 ? Op::Add : r < 900 ? Op::Delete : Op::Replace);
        if (op == Op::Add) {
            const auto side = static_cast<std::uint8_t>(rng_.below(2));
            if (has(s, side ^ 1) && rng_.chance(60'000)) {
                const std::uint32_t price = marketable_price(s, side);
                const std::uint64_t ref = next_ref_++;
                std::uint32_t remaining = quantity();
                Order incoming{ref, price, remaining, kNil, kNil, 0, sym, side};
                emit_add(incoming, false);
                match(sym, side, price, remaining, false, kNil);
                if (remaining > 0) insert(sym, side, price, remaining, ref);
            } else {
                add_passive(sym);
            }
        } else if (op == Op::Delete) {
            const std::uint32_t k = pick_live(s);
            put64(begin_sym('D', sym, 19) + 11, pool_[k].ref);
            remove(k);
        } else {
            replace(sym, true);
        }
    }
    // --8<-- [end:flow_event]

    Config cfg_;
    Rng rng_;
    Phase phase_ = Phase::Header;
    std::vector<Symbol> syms_;
    std::vector<double> cumulative_;
    std::vector<Order> pool_;
    std::vector<std::uint32_t> free_;
    std::vector<std::uint8_t>* out_ = nullptr;
    std::array<std::uint64_t, 256> counts_{};
    std::uint64_t ts_ = 0;
    std::uint64_t emitted_ = 0;
    std::uint64_t next_ref_ = 1;
    std::uint64_t match_ = 0;
    // The intraday clock's state (used only when cfg_.intraday).
    std::uint64_t cursor_ = 0;       // the process's time, ns since the open
    std::uint64_t bin_end_ = 0;      // end of the current bin (0: none started yet)
    double rate_ = 0.0;              // events/s in the current bin
    double excite_ = 0.0;            // the self-excited part of the intensity, events/s
    std::uint64_t bin_events_ = 0;   // events in the current bin (kick the next bins)
    std::uint64_t day_events_ = 0;
    bool tail_ = false;              // past the last bin: the flat rule for what is left
};

// ---- PCAP of MoldUDP64 -----------------------------------------------------------------

// --8<-- [start:pcap_writer]
// Packs framed ITCH messages (the raw file's records are exactly MoldUDP64's message
// blocks) into MoldUDP64 packets inside Ethernet/IPv4/UDP frames of a nanosecond pcap.
// A packet closes when the next message would not fit an Ethernet MTU or arrives more
// than window_ns after the packet's first one; after heartbeat_ns without a message
// the session sends a heartbeat (count 0), and finish() ends with end-of-session (0xFFFF).
class MoldPcapWriter {
public:
    static constexpr std::size_t kMtu = 1500;                        // IPv4 packet, bytes
    static constexpr std::size_t kHeaders = 14 + 20 + 8;             // Ethernet + IPv4 + UDP
    static constexpr std::size_t kMoldHeader = 20;
    static constexpr std::size_t kMaxBlocks = kMtu - 20 - 8 - kMoldHeader;  // 1452

    MoldPcapWriter(const std::string& session, std::uint64_t window_ns,
                   std::uint64_t heartbeat_ns, std::uint64_t epoch_s)
        : window_ns_(window_ns), heartbeat_ns_(heartbeat_ns), epoch_s_(epoch_s) {
        if (heartbeat_ns == 0) throw std::invalid_argument("heartbeat_ns must be > 0");
        std::memset(session_, ' ', 10);
        std::memcpy(session_, session.data(), std::min<std::size_t>(session.size(), 10));
    }

    // The 24-byte global header: nanosecond timestamps (magic a1b23c4d), little-endian.
    static void global_header(std::vector<std::uint8_t>& out) {
        const std::uint32_t fields[] = {0xA1B23C4Du, 0x00040002u, 0, 0, 65535, 1};
        for (std::uint32_t v : fields)
            for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    }

    // Whole framed messages in; finished packets appended to out. Throws on a cut record.
    void feed(const std::uint8_t* data, std::size_t n, std::vector<std::uint8_t>& out) {
        std::size_t off = 0;
        while (off < n) {
            if (n - off < 2) throw std::invalid_argument(cut(off));
            const std::size_t len = get_be(data + off, 2);
            if (len < 11 || n - off - 2 < len) throw std::invalid_argument(cut(off));
            const std::uint64_t ts = get_be(data + off + 2 + 5, 6);
            if (started_ && ts > last_ts_ + heartbeat_ns_) {
                flush(out);
                for (std::uint64_t t = last_sent_ + heartbeat_ns_; t < ts; t += heartbeat_ns_) {
                    packet(out, t, 0, nullptr, 0);
                    ++heartbeats_;
                }
            }
            if (count_ > 0 && (blocks_.size() + 2 + len > kMaxBlocks || ts > first_ts_ + window_ns_))
                flush(out);
            if (count_ == 0) first_ts_ = ts;
            blocks_.insert(blocks_.end(), data + off, data + off + 2 + len);
            ++count_;
            last_ts_ = ts;
            started_ = true;
            off += 2 + len;
        }
    }

    void finish(std::vector<std::uint8_t>& out) {
        flush(out);
        packet(out, last_ts_ + 1, 0xFFFF, nullptr, 0);
    }

    std::uint64_t packets() const { return packets_; }
    std::uint64_t heartbeats() const { return heartbeats_; }
    std::uint64_t next_seq() const { return seq_; }

private:
    static std::string cut(std::size_t off) {
        return "pcap writer: message cut short at byte " + std::to_string(off) + " of the chunk";
    }

    void flush(std::vector<std::uint8_t>& out) {
        if (count_ == 0) return;
        packet(out, last_ts_, count_, blocks_.data(), blocks_.size());
        seq_ += count_;
        count_ = 0;
        blocks_.clear();
    }

    void packet(std::vector<std::uint8_t>& out, std::uint64_t ts, std::uint16_t count,
                const std::uint8_t* blocks, std::size_t size) {
        const std::size_t frame = kHeaders + kMoldHeader + size;
        const std::size_t at = out.size();
        out.resize(at + 16 + frame);
        std::uint8_t* p = out.data() + at;
        // pcap record header, little-endian like the global header
        const std::uint64_t sec = epoch_s_ + ts / kSecond, ns = ts % kSecond;
        const std::uint32_t rec[] = {static_cast<std::uint32_t>(sec), static_cast<std::uint32_t>(ns),
                                     static_cast<std::uint32_t>(frame),
                                     static_cast<std::uint32_t>(frame)};
        for (int f = 0; f < 4; ++f)
            for (int i = 0; i < 4; ++i) p[4 * f + i] = static_cast<std::uint8_t>(rec[f] >> (8 * i));
        p += 16;
        // Ethernet: multicast MAC of 233.54.12.111, a locally administered source MAC
        static constexpr std::uint8_t eth[14] = {0x01, 0x00, 0x5e, 0x36, 0x0c, 0x6f, 0x02, 0x00,
                                                 0x00, 0x00, 0x00, 0x01, 0x08, 0x00};
        std::memcpy(p, eth, 14);
        std::uint8_t* ip = p + 14;
        const std::size_t ip_len = 20 + 8 + kMoldHeader + size;
        const std::uint8_t ip_head[20] = {0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0,
                                          10, 0, 0, 1, 233, 54, 12, 111};
        std::memcpy(ip, ip_head, 20);
        put16(ip + 2, ip_len);
        put16(ip + 4, ip_id_++);
        std::uint32_t sum = 0;  // the IPv4 header checksum: ones' complement of 16-bit words
        for (int i = 0; i < 20; i += 2) sum += static_cast<std::uint32_t>(get_be(ip + i, 2));
        while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
        put16(ip + 10, ~sum & 0xFFFF);
        std::uint8_t* udp = ip + 20;
        put16(udp, 26477);
        put16(udp + 2, 26477);
        put16(udp + 4, 8 + kMoldHeader + size);
        put16(udp + 6, 0);  // no UDP checksum (allowed over IPv4)
        std::uint8_t* mold = udp + 8;
        std::memcpy(mold, session_, 10);
        put64(mold + 10, seq_);
        put16(mold + 18, count);
        if (size) std::memcpy(mold + 20, blocks, size);
        last_sent_ = ts;
        ++packets_;
    }

    char session_[10];
    std::uint64_t window_ns_, heartbeat_ns_, epoch_s_;
    std::vector<std::uint8_t> blocks_;
    std::uint16_t count_ = 0;
    std::uint64_t first_ts_ = 0, last_ts_ = 0, last_sent_ = 0;
    bool started_ = false;
    std::uint64_t seq_ = 1;
    std::uint16_t ip_id_ = 0;
    std::uint64_t packets_ = 0, heartbeats_ = 0;
};
// --8<-- [end:pcap_writer]

// ---- CSV of messages ----------------------------------------------------------------------

// One CSV row per message; a field the message does not have is left empty. The side
// column also holds S's event code and H's trading state (as in EVENT_DTYPE); prices are
// integers in ITCH units (1/10,000 dollar), stocks without their padding.
inline constexpr const char* kMessagesCsvHeader =
    "type,locate,tracking,timestamp,order_ref,new_order_ref,side,shares,price,match_number,"
    "printable,stock,mpid\n";

inline void messages_csv(const std::uint8_t* data, std::size_t n, std::string& s) {
    char buf[24];
    auto num = [&](std::uint64_t v) {
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        s.append(buf, r.ptr);
    };
    auto text = [&](const std::uint8_t* p, std::size_t len) {
        while (len > 0 && p[len - 1] == ' ') --len;
        s.append(reinterpret_cast<const char*>(p), len);
    };
    std::size_t off = 0;
    while (off < n) {
        if (n - off < 2) throw std::invalid_argument("csv: message cut short at byte " + std::to_string(off));
        const std::size_t len = get_be(data + off, 2);
        if (len < 11 || n - off - 2 < len)
            throw std::invalid_argument("csv: message cut short at byte " + std::to_string(off));
        const std::uint8_t* m = data + off + 2;
        const char type = static_cast<char>(m[0]);
        // The fields each type has, at their ITCH offsets (0 = absent).
        struct Layout { std::size_t size, ref, new_ref, side, shares, price, match, printable, stock, mpid; };
        Layout L{};
        switch (type) {
            case 'S': L = {12, 0, 0, 11, 0, 0, 0, 0, 0, 0}; break;
            case 'R': L = {39, 0, 0, 0, 0, 0, 0, 0, 11, 0}; break;
            case 'H': L = {25, 0, 0, 19, 0, 0, 0, 0, 11, 0}; break;
            case 'A': L = {36, 11, 0, 19, 20, 32, 0, 0, 24, 0}; break;
            case 'F': L = {40, 11, 0, 19, 20, 32, 0, 0, 24, 36}; break;
            case 'E': L = {31, 11, 0, 0, 19, 0, 23, 0, 0, 0}; break;
            case 'C': L = {36, 11, 0, 0, 19, 32, 23, 31, 0, 0}; break;
            case 'X': L = {23, 11, 0, 0, 19, 0, 0, 0, 0, 0}; break;
            case 'D': L = {19, 11, 0, 0, 0, 0, 0, 0, 0, 0}; break;
            case 'U': L = {35, 11, 19, 0, 27, 31, 0, 0, 0, 0}; break;
            case 'P': L = {44, 11, 0, 19, 20, 32, 36, 0, 24, 0}; break;
            // Q's 8-byte shares go in order_ref, its cross type in printable (EVENT_DTYPE)
            case 'Q': L = {40, 11, 0, 0, 0, 27, 31, 39, 19, 0}; break;
            case 'B': L = {19, 0, 0, 0, 0, 0, 11, 0, 0, 0}; break;
            case 'I': L = {50, 0, 0, 0, 0, 0, 0, 0, 28, 0}; break;
            case 'h': L = {21, 0, 0, 0, 0, 0, 0, 0, 11, 0}; break;
            default: L = {11, 0, 0, 0, 0, 0, 0, 0, 0, 0}; break;  // header fields only
        }
        if (len < L.size)
            throw std::invalid_argument("csv: message '" + std::string(1, type) + "' too short at byte " +
                                        std::to_string(off));
        s += type;
        s += ',';
        num(get_be(m + 1, 2));
        s += ',';
        num(get_be(m + 3, 2));
        s += ',';
        num(get_be(m + 5, 6));
        s += ',';
        if (L.ref) num(get_be(m + L.ref, 8));
        s += ',';
        if (L.new_ref) num(get_be(m + L.new_ref, 8));
        s += ',';
        if (L.side) s += static_cast<char>(m[L.side]);
        s += ',';
        if (L.shares) num(get_be(m + L.shares, 4));
        s += ',';
        if (L.price) num(get_be(m + L.price, 4));
        s += ',';
        if (L.match) num(get_be(m + L.match, 8));
        s += ',';
        if (L.printable) s += static_cast<char>(m[L.printable]);
        s += ',';
        if (L.stock) text(m + L.stock, 8);
        s += ',';
        if (L.mpid) text(m + L.mpid, 4);
        s += '\n';
        off += 2 + len;
    }
}

}  // namespace twinmatch::gen
