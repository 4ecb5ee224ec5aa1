// From an ITCH day to research tables: the optimized twin of naive/tables.py.
//
// The rules are written there first (read its docstring); this file applies the same rules
// with the chapter 5 market (market.hpp, book mode) and writes each table as columns: one
// growable block of bytes per column, appended to in place, handed to numpy as whole
// arrays by the binding (tables_bind.cpp). No Python object is made per row, and nothing here
// touches Python.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <string>
#include <vector>

#include "dtypes.hpp"
#include "itch.hpp"
#include "market.hpp"

namespace twinmatch::tables {

// --8<-- [start:column]
// One column: its values back to back in little-endian order (numpy's "<u8" etc. on the
// machines this builds for), so the binding can hand the bytes to numpy as they are.
// A malloc'd buffer grown by realloc (a big block grows in place, by remapping pages, with
// nothing copied or zero-filled): a value is one bounds check and one small memcpy. After
// take(), the next batch starts with room for as many bytes as the last one had.
struct Column {
    std::string name;
    std::size_t width;  // bytes per value

    Column(std::string n, std::size_t w) : name(std::move(n)), width(w) {}
    Column(Column&& o) noexcept
        : name(std::move(o.name)), width(o.width), data_(o.data_), cap_(o.cap_), used_(o.used_),
          hint_(o.hint_) {
        o.data_ = nullptr;
        o.cap_ = o.used_ = 0;
    }
    Column(const Column&) = delete;
    Column& operator=(const Column&) = delete;
    Column& operator=(Column&&) = delete;
    ~Column() { std::free(data_); }

    template <class T>
    [[gnu::always_inline]] void push(T v) {
        static_assert(std::is_trivially_copyable_v<T>);
        write(&v, sizeof v);
    }
    void push_bytes(const void* p, std::size_t n) { write(p, n); }  // fixed-width text ("S8")
    std::size_t size() const { return used_; }

    // The values so far: a malloc'd block of `size` bytes that the caller now owns (and
    // frees with std::free); the column is empty afterwards.
    struct Owned {
        std::uint8_t* data;
        std::size_t size;
    };
    Owned take() {
        if (data_ == nullptr) grow(1);  // never a null block, even for no rows
        Owned out{data_, used_};
        hint_ = std::max(hint_, used_);
        data_ = nullptr;
        cap_ = used_ = 0;
        return out;
    }

private:
    [[gnu::always_inline]] void write(const void* p, std::size_t n) {
        if (cap_ - used_ < n) [[unlikely]] grow(n);
        std::memcpy(data_ + used_, p, n);
        used_ += n;
    }
    [[gnu::noinline]] void grow(std::size_t n) {
        const std::size_t cap = std::max({2 * cap_, used_ + n, hint_, std::size_t(4096)});
        auto* d = static_cast<std::uint8_t*>(std::realloc(data_, cap));
        if (d == nullptr) throw std::bad_alloc();
        data_ = d;
        cap_ = cap;
    }
    std::uint8_t* data_ = nullptr;
    std::size_t cap_ = 0, used_ = 0;
    std::size_t hint_ = 0;  // the largest batch so far, in bytes
};

// A table: its columns in contract/tables.py's order. Every row appends to each.
struct Table {
    bool on = false;
    std::vector<Column> cols;
    void add(const char* name, std::size_t width) { cols.emplace_back(name, width); }
    std::size_t rows() const {
        return cols.empty() ? 0 : cols[0].size() / cols[0].width;
    }
};
// --8<-- [end:column]

enum TableId : int { kBbo = 0, kTrades, kMessages, kDepth, kHalts, kNoii, kSymbols, kTables,
                     kLobster = kTables, kAllTables };  // lobster: `twinmatch lobster` only

// The result of feed(): bytes of whole records used; an error at the record after them.
struct FeedResult {
    std::size_t consumed = 0;
    itch::Error error = itch::Error::Ok;
    std::uint8_t error_type = 0;
    std::uint16_t error_length = 0;
};

class TableBuilder {
public:
    // on[k]: table k wanted; symbols: 8-byte space-padded names (empty: every symbol).
    TableBuilder(const std::array<bool, kTables>& on, std::vector<std::array<char, 8>> symbols,
                 std::uint32_t depth, std::uint32_t lobster)
        : market_(Mode::Book), filter_(std::move(symbols)), depth_(depth), lobster_(lobster),
          loc_(65536), last_depth_(65536) {
        for (PerLocate& l : loc_) l.wanted = filter_.empty() ? 1 : 0;
        for (int k = 0; k < kTables; ++k) t_[k].on = on[k];
        if (lobster_ > 1000) throw std::invalid_argument("lobster levels must be 0..1000");
        common(t_[kBbo]);
        add_all(t_[kBbo], {{"bid_price", 4}, {"bid_size", 8}, {"bid_orders", 4},
                           {"ask_price", 4}, {"ask_size", 8}, {"ask_orders", 4},
                           {"trading_state", 1}});
        common(t_[kTrades]);
        add_all(t_[kTrades], {{"kind", 1}, {"order_ref", 8}, {"side", 1}, {"price", 4},
                              {"shares", 8}, {"match_number", 8}, {"cross_type", 1}});
        common(t_[kMessages]);
        add_all(t_[kMessages], {{"type", 1}, {"order_ref", 8}, {"new_order_ref", 8},
                                {"side", 1}, {"price", 4}, {"shares", 4}, {"prev_price", 4},
                                {"prev_shares", 4}, {"exec_price", 4}, {"match_number", 8},
                                {"printable", 1}});
        common(t_[kDepth]);
        for (const char* side : {"bid", "ask"})
            for (auto [what, width] : {std::pair{"price", 4}, {"size", 8}, {"orders", 4}})
                for (std::uint32_t k = 1; k <= depth_; ++k)
                    t_[kDepth].add((std::string(side) + "_" + what + "_" + std::to_string(k)).c_str(),
                                   static_cast<std::size_t>(width));
        common(t_[kHalts]);
        add_all(t_[kHalts], {{"kind", 1}, {"state", 1}, {"reason", 4}, {"market_code", 1}});
        common(t_[kNoii]);
        add_all(t_[kNoii], {{"paired_shares", 8}, {"imbalance_shares", 8}, {"direction", 1},
                            {"far_price", 4}, {"near_price", 4}, {"reference_price", 4},
                            {"cross_type", 1}, {"price_variation", 1}});
        common(t_[kSymbols]);
        add_all(t_[kSymbols], {{"market_category", 1}, {"financial_status", 1},
                               {"round_lot_size", 4}, {"round_lots_only", 1},
                               {"issue_classification", 1}, {"issue_sub_type", 2},
                               {"authenticity", 1}, {"short_sale_threshold", 1},
                               {"ipo_flag", 1}, {"luld_tier", 1}, {"etp_flag", 1},
                               {"etp_leverage_factor", 4}, {"inverse_indicator", 1}});
        t_[kLobster].on = lobster_ > 0;
        common(t_[kLobster]);
        add_all(t_[kLobster], {{"type", 1}, {"order_id", 8}, {"size", 8}, {"price", 8},
                               {"direction", 1}});
        for (std::uint32_t k = 1; k <= lobster_; ++k)
            for (const char* c : {"ask_price_", "ask_size_", "bid_price_", "bid_size_"})
                t_[kLobster].add((std::string(c) + std::to_string(k)).c_str(), 8);
        scratch_.resize(2 * (std::max(depth_, lobster_) + 1));
        fills_.reserve(16);
    }

    Table& table(int k) { return t_[k]; }
    const Market& market() const { return market_; }
    // Test and benchmark hook: the market's look-ahead stages (feed() runs them, and the
    // builder's own hints, as Market::run_itch does: by default only past the cache).
    void set_lookahead_stages(unsigned stages) { market_.set_lookahead_stages(stages); }
    void set_lookahead(bool on) { market_.set_lookahead(on); }
    std::uint64_t messages() const { return seq_; }

    // One level as the tables show it: price, total shares, orders (all 0: no level).
    struct LevelRow {
        std::uint32_t price = 0;
        std::uint64_t size = 0;
        std::uint32_t orders = 0;
        bool operator==(const LevelRow&) const = default;
    };
    struct Bbo {
        LevelRow bid, ask;
        bool operator==(const Bbo&) const = default;
    };
    // --8<-- [start:feed]
    // The whole records at the start of buf[0, n): framing checked exactly as
    // itch::decode_one checks it (same errors), a partial record left for the next call.
    FeedResult feed(const std::uint8_t* buf, std::size_t n) {
        FeedResult r;
        std::size_t off = 0;
        Market::Lookahead la(buf, n, market_.stages_now());  // as in Market::run_itch
        market_.look_first(la);
        while (n - off >= 2) {
            if (la.st != 0) hint(la);
            const std::size_t len = itch::be16(buf + off);
            if (len == 0) {
                r.error = itch::Error::ZeroLength;
                break;
            }
            if (n - off - 2 < len) break;  // partial: the caller brings the rest
            const std::uint8_t* msg = buf + off + 2;
            const std::size_t want = itch::kLength[msg[0]];
            if (want != 0 && want != len) {
                r.error = itch::Error::BadLength;
                r.error_type = msg[0];
                r.error_length = static_cast<std::uint16_t>(len);
                break;
            }
            ++seq_;
            if (want != 0) message(msg);  // exactly `want` bytes readable
            off += 2 + len;
        }
        r.consumed = off;
        return r;
    }
    // --8<-- [end:feed]

private:
    // --8<-- [start:lookahead]
    // The builder's own lines, asked for beside the market's look-ahead: the locate's
    // line (kAhead records ahead) and the level's order count (an add: kAhead ahead,
    // its key is in the message; a reference: kLevel ahead, once the order's node has
    // come).
    [[gnu::always_inline]] void hint(Market::Lookahead& la) {
        market_.look_next(la);
        const Market::Ahead& a = *la.first;
        if (a.kind == 1) {
            __builtin_prefetch(&loc_[a.locate], 1);
        } else if (a.kind == 2) {
            __builtin_prefetch(&loc_[a.key >> 33], 1);
            level_orders_.prefetch(a.key);  // Ahead's add key is level_key's layout
        }
        if (const MarketOrder* o = la.order)
            level_orders_.prefetch(level_key(o->locate, Side(o->side & 1), o->price));
    }
    // --8<-- [end:lookahead]
    using Pair = std::pair<const char*, int>;
    static void add_all(Table& t, std::initializer_list<Pair> cs) {
        for (auto [name, width] : cs) t.add(name, static_cast<std::size_t>(width));
    }
    static void common(Table& t) {
        t.add("timestamp", 8);
        t.add("seq", 8);
        t.add("locate", 2);
        t.add("symbol", 8);
    }
    bool keep(int k, std::uint16_t locate) const { return t_[k].on && loc_[locate].wanted; }
    // The four columns every table starts with; returns the index of the next column.
    std::size_t put_common(Table& t, std::uint64_t ts, std::uint16_t locate) {
        t.cols[0].push(ts);
        t.cols[1].push(seq_);
        t.cols[2].push(locate);
        t.cols[3].push_bytes(loc_[locate].name.data(), 8);
        return 4;
    }

    // --8<-- [start:message]
    void message(const std::uint8_t* p) {
        using namespace itch;
        const std::uint8_t type = p[0];
        const std::uint16_t locate = ITCH_READ(Header, locate, p);
        const std::uint64_t ts = ITCH_READ(Header, timestamp, p);
        if (type == 'R') {
            std::memcpy(loc_[locate].name.data(), p + offsetof(StockDirectory, stock), 8);
            if (!filter_.empty()) loc_[locate].wanted = in_filter(loc_[locate].name);
            if (keep(kSymbols, locate)) {
                Table& t = t_[kSymbols];
                std::size_t c = put_common(t, ts, locate);
                t.cols[c++].push(ITCH_READ(StockDirectory, market_category, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, financial_status, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, round_lot_size, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, round_lots_only, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, issue_classification, p));
                t.cols[c++].push_bytes(p + offsetof(StockDirectory, issue_sub_type), 2);
                t.cols[c++].push(ITCH_READ(StockDirectory, authenticity, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, short_sale_threshold, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, ipo_flag, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, luld_tier, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, etp_flag, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, etp_leverage_factor, p));
                t.cols[c++].push(ITCH_READ(StockDirectory, inverse_indicator, p));
            }
        } else if (type == 'H') {
            loc_[locate].trading = ITCH_READ(StockTradingAction, trading_state, p);  // never a gate
            const std::int64_t halt = halt_price(loc_[locate].trading);
            if (halt != kNoHalt) lobster(ts, locate, {7, 0, 0, halt, -1});
            if (keep(kHalts, locate)) {
                Table& t = t_[kHalts];
                std::size_t c = put_common(t, ts, locate);
                t.cols[c++].push(std::uint8_t{'H'});
                t.cols[c++].push(loc_[locate].trading);
                t.cols[c++].push_bytes(p + offsetof(StockTradingAction, reason), 4);
                t.cols[c++].push(std::uint8_t{0});
            }
        } else if (type == 'h') {
            if (keep(kHalts, locate)) {
                Table& t = t_[kHalts];
                std::size_t c = put_common(t, ts, locate);
                t.cols[c++].push(std::uint8_t{'h'});
                t.cols[c++].push(ITCH_READ(OperationalHalt, action, p));
                const char none[4] = {0, 0, 0, 0};
                t.cols[c++].push_bytes(none, 4);
                t.cols[c++].push(ITCH_READ(OperationalHalt, market_code, p));
            }
        } else if (type == 'I') {
            if (keep(kNoii, locate)) {
                Table& t = t_[kNoii];
                std::size_t c = put_common(t, ts, locate);
                t.cols[c++].push(ITCH_READ(Noii, paired_shares, p));
                t.cols[c++].push(ITCH_READ(Noii, imbalance_shares, p));
                t.cols[c++].push(ITCH_READ(Noii, direction, p));
                t.cols[c++].push(ITCH_READ(Noii, far_price, p));
                t.cols[c++].push(ITCH_READ(Noii, near_price, p));
                t.cols[c++].push(ITCH_READ(Noii, reference_price, p));
                t.cols[c++].push(ITCH_READ(Noii, cross_type, p));
                t.cols[c++].push(ITCH_READ(Noii, price_variation, p));
            }
        }
        ItchEvent e;
        if (!decode_event(p, e)) return;
        switch (type) {
            case 'A': case 'F': case 'E': case 'C': case 'X': case 'D': case 'U':
                book(e);
                return;
            default:
                run(e);  // S R H P Q B: the market counts them (and keeps R, H)
                if (type == 'P' || type == 'Q' || type == 'B') trade(e, e.locate, Side::Buy, 0);
                if (type == 'P')  // a hidden order traded: LOBSTER type 5
                    lobster(ts, locate, {5, e.order_ref, e.shares, e.price,
                                         std::int8_t(e.side == 'B' ? 1 : -1)});
                else if (type == 'Q')  // the cross (shares in order_ref): type 6
                    lobster(ts, locate, {6, 0, e.order_ref, e.price, -1});
        }
    }
    // --8<-- [end:message]

    [[gnu::always_inline]] void run(const ItchEvent& e) {
        fills_.clear();
        market_.step(e, fills_);
    }

    struct Order {
        bool live = false;
        std::uint16_t locate = 0;
        Side side = Side::Buy;
        std::uint32_t price = 0, shares = 0;
    };
    Order order(std::uint64_t ref) const {
        Order o;
        o.live = market_.order(ref, o.locate, o.side, o.price, o.shares);
        return o;
    }

    // --8<-- [start:book]
    // One A F E C X D U: apply it, then write the rows it causes if it changed a book
    // (as naive/tables.py decides it from the order before and after). The order after
    // is not looked up again: if the market refused nothing, the event applied, and what
    // it left follows from the event (an add rests as sent; X leaves shares - X; D and a
    // full execution leave nothing; U rests the new reference as sent, same locate and
    // side).
    void book(const ItchEvent& e) {
        const Order before = order(e.order_ref);
        const std::uint64_t refused = market_.refused();
        run(e);
        const std::uint8_t k = e.type;
        if (market_.refused() != refused) {  // counted by the market, changed nothing;
            // but an over-execution was printed by the exchange: its trade row stays
            if ((k == 'E' || k == 'C') && before.live && e.shares > before.shares &&
                (k == 'E' || e.printable == 'Y'))
                trade(e, before.locate, before.side, k == 'C' ? e.price : before.price);
            return;
        }
        if (k == 'A' || k == 'F') {
            const Side side = e.side == 'B' ? Side::Buy : Side::Sell;
            count_level(e.locate, side, e.price, +1);
            changed(e, e.locate, side, e.price, e.shares, 0, 0, 0);
            return;
        }
        if (!before.live) return;  // (refused above: an unknown reference)
        if (k == 'E' || k == 'C') {
            if (e.shares == before.shares) count_level(before.locate, before.side, before.price, -1);
            const std::uint32_t print = k == 'C' ? e.price : before.price;  // E: resting price
            changed(e, before.locate, before.side, before.price, e.shares, before.price,
                    before.shares, print);
            if (k == 'E' || e.printable == 'Y') trade(e, before.locate, before.side, print);
        } else if (k == 'X') {
            if (e.shares == before.shares) count_level(before.locate, before.side, before.price, -1);
            changed(e, before.locate, before.side, before.price, e.shares, before.price,
                    before.shares, 0);
        } else if (k == 'D') {
            count_level(before.locate, before.side, before.price, -1);
            changed(e, before.locate, before.side, before.price, before.shares,
                    before.price, before.shares, 0);
        } else {  // U
            count_level(before.locate, before.side, before.price, -1);
            count_level(before.locate, before.side, e.price, +1);
            changed(e, before.locate, before.side, e.price, e.shares, before.price,
                    before.shares, 0);
        }
    }

    // Orders resting at each (locate, side, price): the market's levels keep only their
    // total shares (a depth query counts the queue), and the bbo needs the count after
    // every message, so the builder keeps its own, in the market's hash map (reserve
    // before insert: no allocation unless the table has to grow).
    static std::uint64_t level_key(std::uint16_t locate, Side side, std::uint32_t price) {
        return (std::uint64_t(locate) << 33) | (std::uint64_t(side) << 32) | price;
    }
    void count_level(std::uint16_t locate, Side side, std::uint32_t price, int delta) {
        const std::uint64_t key = level_key(locate, side, price);
        if (std::uint32_t* n = level_orders_.value_of(key)) {  // one probe: update in place
            *n += static_cast<std::uint32_t>(delta);  // -1 only where an order left: n >= 1
            if (*n == 0) level_orders_.erase(key);
            return;
        }
        level_orders_.reserve_one();  // absent: the level's first order (delta is +1)
        level_orders_.insert(key, 1);
    }
    // The best level of one side: (price, total shares, orders), all 0 if empty. O(1):
    // the market's best price and level total, and the count above. `last` is the row
    // before this message: one message adds or removes at most one order of a side, and
    // never without changing its level's total (shares >= 1), except a replace that
    // keeps price and shares (its order count is unchanged too), so the same price and
    // total mean the same count, and the hash is not asked.
    LevelRow best(std::uint16_t locate, Side side, const LevelRow& last) const {
        std::uint64_t qty = 0;
        const std::uint32_t p = market_.best(locate, side, qty);
        if (p == 0) return LevelRow{};
        if (p == last.price && qty == last.size) return last;
        return LevelRow{p, qty, level_orders_.find(level_key(locate, side, p))};
    }
    // --8<-- [end:book]

    static std::uint8_t side_byte(Side s) { return s == Side::Buy ? 'B' : 'S'; }
    bool at_top(std::uint16_t locate, Side side, std::uint32_t p) const {
        const LevelRow& b = side == Side::Buy ? loc_[locate].bbo.bid : loc_[locate].bbo.ask;
        return b.price == 0 || (side == Side::Buy ? p >= b.price : p <= b.price);
    }

    void changed(const ItchEvent& e, std::uint16_t locate, Side side, std::uint32_t price,
                 std::uint32_t shares, std::uint32_t prev_price, std::uint32_t prev_shares,
                 std::uint32_t exec_price) {
        if (keep(kMessages, locate)) {
            Table& t = t_[kMessages];
            std::size_t c = put_common(t, e.timestamp, locate);
            t.cols[c++].push(e.type);
            t.cols[c++].push(e.order_ref);
            t.cols[c++].push(e.new_order_ref);
            t.cols[c++].push(side_byte(side));
            t.cols[c++].push(price);
            t.cols[c++].push(shares);
            t.cols[c++].push(prev_price);
            t.cols[c++].push(prev_shares);
            t.cols[c++].push(exec_price);
            t.cols[c++].push(e.match_number);
            t.cols[c++].push(std::uint8_t(e.type == 'C' ? e.printable : 0));
        }
        if (lobster_ != 0) lobster_book(e, locate, side, price, shares, prev_price, prev_shares);
        // The top can only have moved if the message touched a level at or better than its
        // side's best before it (loc_[locate].bbo is that best: it is brought up to date after
        // every message that could change it); a deeper level is not the top, before or
        // after, and most messages of a day are deeper.
        if (keep(kBbo, locate) &&
            (at_top(locate, side, price) || (prev_price != 0 && at_top(locate, side, prev_price)))) {
            const Bbo& was = loc_[locate].bbo;
            const LevelRow top[2] = {best(locate, Side::Buy, was.bid),
                                     best(locate, Side::Sell, was.ask)};
            Bbo now{top[0], top[1]};
            if (!(now == loc_[locate].bbo)) {
                loc_[locate].bbo = now;
                Table& t = t_[kBbo];
                std::size_t c = put_common(t, e.timestamp, locate);
                for (const LevelRow& l : top) {
                    t.cols[c++].push(l.price);
                    t.cols[c++].push(l.size);
                    t.cols[c++].push(l.orders);
                }
                t.cols[c++].push(loc_[locate].trading);
            }
        }
        if (keep(kDepth, locate)) {
            levels(locate, depth_, scratch_.data());
            std::unique_ptr<LevelRow[]>& last = last_depth_[locate];
            if (!last) last = std::make_unique<LevelRow[]>(2 * depth_);  // zeros: empty levels
            if (!std::equal(scratch_.begin(), scratch_.begin() + 2 * depth_, last.get())) {
                std::copy(scratch_.begin(), scratch_.begin() + 2 * depth_, last.get());
                Table& t = t_[kDepth];
                std::size_t c = put_common(t, e.timestamp, locate);
                for (int s = 0; s < 2; ++s) {
                    const LevelRow* l = scratch_.data() + s * depth_;
                    for (std::uint32_t i = 0; i < depth_; ++i) t.cols[c + i].push(l[i].price);
                    for (std::uint32_t i = 0; i < depth_; ++i) t.cols[c + depth_ + i].push(l[i].size);
                    for (std::uint32_t i = 0; i < depth_; ++i)
                        t.cols[c + 2 * depth_ + i].push(l[i].orders);
                    c += 3 * depth_;
                }
            }
        }
    }

    // --8<-- [start:lobster]
    // LOBSTER's rows for a message that changed a book (the rules: naive/tables.py). A
    // replace is a deletion (with the book between the two) and then a submission.
    struct LobsterMessage {
        std::uint8_t type;
        std::uint64_t id, size;
        std::int64_t price;
        std::int8_t direction;
    };
    static constexpr std::int64_t kNoHalt = 2;
    static std::int64_t halt_price(std::uint8_t state) {
        switch (state) {
            case 'H': case 'P': return -1;  // halted, paused (LOBSTER_HALT_PRICE in
            case 'Q': return 0;             // contract/tables.py: quoting again,
            case 'T': return 1;             // trading again)
            default: return kNoHalt;
        }
    }
    void lobster_book(const ItchEvent& e, std::uint16_t locate, Side side, std::uint32_t price,
                      std::uint32_t shares, std::uint32_t prev_price, std::uint32_t prev_shares) {
        const std::int8_t dir = side == Side::Buy ? 1 : -1;
        switch (e.type) {
            case 'A': case 'F': lobster(e.timestamp, locate, {1, e.order_ref, shares, price, dir}); break;
            case 'E': case 'C':  // at the resting order's price, whatever C printed
                lobster(e.timestamp, locate, {4, e.order_ref, shares, prev_price, dir}); break;
            case 'X': lobster(e.timestamp, locate, {2, e.order_ref, shares, prev_price, dir}); break;
            case 'D': lobster(e.timestamp, locate, {3, e.order_ref, prev_shares, prev_price, dir}); break;
            default:  // U
                lobster(e.timestamp, locate, {3, e.order_ref, prev_shares, prev_price, dir},
                        true, side, price, shares);
                lobster(e.timestamp, locate, {1, e.new_order_ref, shares, price, dir});
        }
    }
    // One row (regular session only): the message, then the book after it, leaving out
    // one order (side, price, shares) if `without` (the replace's new order).
    void lobster(std::uint64_t ts, std::uint16_t locate, LobsterMessage m, bool without = false,
                 Side w_side = Side::Buy, std::uint32_t w_price = 0, std::uint32_t w_shares = 0) {
        if (!keep(kLobster, locate) || ts < kLobsterStart || ts > kLobsterEnd) return;
        const std::uint32_t n = lobster_;
        LevelRow* book = scratch_.data();  // n + 1 levels per side
        levels(locate, n + 1, book);
        std::uint32_t kept[2] = {0, 0};
        for (int s = 0; s < 2; ++s) {
            LevelRow* lv = book + s * (n + 1);
            for (std::uint32_t i = 0; i < n + 1; ++i) {
                LevelRow l = lv[i];
                if (without && Side(s) == w_side && l.orders != 0 && l.price == w_price) {
                    l.size -= w_shares;
                    l.orders -= 1;
                }
                if (l.orders != 0) lv[kept[s]++] = l;  // in place: kept[s] <= i
            }
        }
        Table& t = t_[kLobster];
        std::size_t c = put_common(t, ts, locate);
        t.cols[c++].push(m.type);
        t.cols[c++].push(m.id);
        t.cols[c++].push(m.size);
        t.cols[c++].push(m.price);
        t.cols[c++].push(m.direction);
        for (std::uint32_t k = 0; k < n; ++k) {
            const LevelRow* ask = book + (n + 1) + k;
            const LevelRow* bid = book + k;
            t.cols[c++].push(k < kept[1] ? std::int64_t(ask->price) : kEmptyAsk);
            t.cols[c++].push(k < kept[1] ? ask->size : std::uint64_t{0});
            t.cols[c++].push(k < kept[0] ? std::int64_t(bid->price) : kEmptyBid);
            t.cols[c++].push(k < kept[0] ? bid->size : std::uint64_t{0});
        }
    }
    static constexpr std::uint64_t kLobsterStart = 34'200'000'000'000;  // 09:30:00
    static constexpr std::uint64_t kLobsterEnd = 57'600'000'000'000;    // 16:00:00
    static constexpr std::int64_t kEmptyAsk = 9'999'999'999, kEmptyBid = -9'999'999'999;
    // --8<-- [end:lobster]

    void trade(const ItchEvent& e, std::uint16_t locate, Side side, std::uint32_t price) {
        if (!keep(kTrades, locate)) return;
        Table& t = t_[kTrades];
        std::size_t c = put_common(t, e.timestamp, locate);
        std::uint64_t ref = 0, shares = 0;
        std::uint8_t sd = 0, cross = 0;
        switch (e.type) {
            case 'E': case 'C': ref = e.order_ref; sd = side_byte(side); shares = e.shares; break;
            case 'P': ref = e.order_ref; sd = e.side; price = e.price; shares = e.shares; break;
            case 'Q':  // the cross's shares travel in order_ref (see EVENT_DTYPE)
                price = e.price; shares = e.order_ref; cross = e.printable; break;
            default: price = 0; break;  // B: a break names only the match number
        }
        t.cols[c++].push(e.type);
        t.cols[c++].push(ref);
        t.cols[c++].push(sd);
        t.cols[c++].push(price);
        t.cols[c++].push(shares);
        t.cols[c++].push(e.match_number);
        t.cols[c++].push(cross);
    }

    // --8<-- [start:levels]
    // The top n levels of each side into out[0, n) (bids) and out[n, 2n) (asks); an
    // empty level is all zeros.
    void levels(std::uint16_t locate, std::uint32_t n, LevelRow* out) const {
        for (int s = 0; s < 2; ++s) {
            LevelRow* side = out + s * n;
            std::uint32_t i = 0;
            market_.depth_totals(
                locate, Side(s), n, [&](std::uint32_t price, std::uint64_t qty) {
                    side[i++] = LevelRow{
                        price, qty,
                        level_orders_.find(level_key(locate, Side(s), price))};
                });
            for (; i < n; ++i) side[i] = LevelRow{};
        }
    }
    // --8<-- [end:levels]

    bool in_filter(const std::array<char, 8>& name) const {
        for (const auto& f : filter_)
            if (f == name) return true;
        return false;
    }

    Market market_;
    GrowthBudget budget_;                      // no limit (the market's test hook)
    RefMap level_orders_{&budget_};            // level_key -> orders resting there
    std::vector<FillRecord> fills_;
    std::vector<std::array<char, 8>> filter_;
    std::uint32_t depth_;
    std::uint32_t lobster_;                    // LOBSTER levels (0: no lobster table)
    // What a message reads and writes about its locate, in one cache line (not four
    // arrays, four lines): on a day of thousands of symbols these lines do not stay in
    // the cache between two messages of the same symbol.
    struct alignas(64) PerLocate {
        Bbo bbo;                         // its last bbo row
        std::array<char, 8> name{};      // its R's stock bytes (zeros: none)
        std::uint8_t wanted = 1;         // rows kept (the symbol filter)
        std::uint8_t trading = 0;        // the last H's state (0: none)
    };
    static_assert(sizeof(PerLocate) == 64);
    std::vector<PerLocate> loc_;                // by locate
    std::vector<std::unique_ptr<LevelRow[]>> last_depth_;  // locate -> last depth row (lazily)
    std::vector<LevelRow> scratch_;
    std::array<Table, kAllTables> t_;
    std::uint64_t seq_ = 0;
};

}  // namespace twinmatch::tables
