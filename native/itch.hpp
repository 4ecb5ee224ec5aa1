// Reading NASDAQ TotalView-ITCH 5.0 without copying: the optimized twin of
// naive/itch.py.
//
// The decoder walks a read-only byte buffer (bytes, mmap, numpy) in place. Each message
// layout is a struct of byte arrays that mirrors the wire exactly (sizes
// static_asserted against the spec), and every multi-byte field is read big-endian by a
// small loader. Nothing here allocates or touches Python; the binding (itch_bind.cpp)
// owns memory.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "dtypes.hpp"

namespace twinmatch::itch {

// --8<-- [start:byteswap]
// ITCH integers are big-endian; x86 and ARM are little-endian. memcpy is the portable
// way to load from an address with no alignment promise (a cast + dereference would be
// undefined behaviour); compilers turn it into one load, and the bswap into one
// instruction. (std::byteswap arrives only in C++23.)
inline std::uint16_t be16(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap16(v);
    return v;
}
inline std::uint32_t be32(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
    return v;
}
inline std::uint64_t be64(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
    return v;
}
// The 6-byte timestamp: a 2-byte and a 4-byte load, never an 8-byte load that would
// read two bytes past the field (and, for a message at the end of a buffer, past the
// buffer).
inline std::uint64_t be48(const std::uint8_t* p) {
    return (std::uint64_t{be16(p)} << 32) | be32(p + 2);
}

// Wire field types: plain byte arrays, so they have alignment 1 and a struct made of
// them has no padding anywhere. get() does the byte swap.
struct U16 { std::uint8_t b[2]; std::uint16_t get() const { return be16(b); } };
struct U32 { std::uint8_t b[4]; std::uint32_t get() const { return be32(b); } };
struct U48 { std::uint8_t b[6]; std::uint64_t get() const { return be48(b); } };
struct U64 { std::uint8_t b[8]; std::uint64_t get() const { return be64(b); } };
using Char = std::uint8_t;  // a one-byte ASCII code ('B', 'Y', ...)
template <std::size_t N> using Alpha = std::array<char, N>;  // space padded text
// --8<-- [end:byteswap]

// --8<-- [start:structs]
// One struct per message, field for field as in the spec (offsets count from the type
// byte). pack(1) states the intent; with byte-array fields there is nothing to pack,
// and the static_asserts prove the sizes equal the spec's lengths.
#pragma pack(push, 1)
struct Header {             // every message starts with these 11 bytes
    Char type;
    U16 locate;
    U16 tracking;
    U48 timestamp;
};
struct SystemEvent { Header h; Char event_code; };                                // S
struct StockDirectory {                                                            // R
    Header h; Alpha<8> stock; Char market_category; Char financial_status;
    U32 round_lot_size; Char round_lots_only; Char issue_classification;
    Alpha<2> issue_sub_type; Char authenticity; Char short_sale_threshold; Char ipo_flag;
    Char luld_tier; Char etp_flag; U32 etp_leverage_factor; Char inverse_indicator;
};
struct StockTradingAction { Header h; Alpha<8> stock; Char trading_state; Char reserved;  // H
                            Alpha<4> reason; };
struct RegSho { Header h; Alpha<8> stock; Char action; };                         // Y
struct MarketParticipantPosition { Header h; Alpha<4> mpid; Alpha<8> stock;        // L
                                   Char primary_mm; Char mm_mode; Char state; };
struct MwcbDeclineLevel { Header h; U64 level1; U64 level2; U64 level3; };        // V
struct MwcbStatus { Header h; Char breached_level; };                             // W
struct IpoQuotingPeriod { Header h; Alpha<8> stock; U32 release_time;              // K
                          Char release_qualifier; U32 ipo_price; };
struct LuldAuctionCollar { Header h; Alpha<8> stock; U32 reference_price;          // J
                           U32 upper_price; U32 lower_price; U32 extension; };
struct OperationalHalt { Header h; Alpha<8> stock; Char market_code; Char action; };  // h
struct AddOrder { Header h; U64 order_ref; Char side; U32 shares; Alpha<8> stock;  // A
                  U32 price; };
struct AddOrderMpid { Header h; U64 order_ref; Char side; U32 shares;              // F
                      Alpha<8> stock; U32 price; Alpha<4> mpid; };
struct OrderExecuted { Header h; U64 order_ref; U32 shares; U64 match_number; };   // E
struct OrderExecutedWithPrice { Header h; U64 order_ref; U32 shares;               // C
                                U64 match_number; Char printable; U32 price; };
struct OrderCancel { Header h; U64 order_ref; U32 shares; };                      // X
struct OrderDelete { Header h; U64 order_ref; };                                  // D
struct OrderReplace { Header h; U64 order_ref; U64 new_order_ref; U32 shares;      // U
                      U32 price; };
struct Trade { Header h; U64 order_ref; Char side; U32 shares; Alpha<8> stock;     // P
               U32 price; U64 match_number; };
struct CrossTrade { Header h; U64 shares; Alpha<8> stock; U32 price;               // Q
                    U64 match_number; Char cross_type; };
struct BrokenTrade { Header h; U64 match_number; };                               // B
struct Noii { Header h; U64 paired_shares; U64 imbalance_shares; Char direction;   // I
              Alpha<8> stock; U32 far_price; U32 near_price; U32 reference_price;
              Char cross_type; Char price_variation; };
struct Rpii { Header h; Alpha<8> stock; Char interest_flag; };                    // N
struct Dlcr { Header h; Alpha<8> stock; Char open_eligibility; U32 min_price;      // O
              U32 max_price; U32 near_price; U64 near_time; U32 lower_collar;
              U32 upper_collar; };
#pragma pack(pop)

static_assert(sizeof(Header) == 11);
static_assert(sizeof(SystemEvent) == 12 && sizeof(StockDirectory) == 39);
static_assert(sizeof(StockTradingAction) == 25 && sizeof(RegSho) == 20);
static_assert(sizeof(MarketParticipantPosition) == 26 && sizeof(MwcbDeclineLevel) == 35);
static_assert(sizeof(MwcbStatus) == 12 && sizeof(IpoQuotingPeriod) == 28);
static_assert(sizeof(LuldAuctionCollar) == 35 && sizeof(OperationalHalt) == 21);
static_assert(sizeof(AddOrder) == 36 && sizeof(AddOrderMpid) == 40);
static_assert(sizeof(OrderExecuted) == 31 && sizeof(OrderExecutedWithPrice) == 36);
static_assert(sizeof(OrderCancel) == 23 && sizeof(OrderDelete) == 19);
static_assert(sizeof(OrderReplace) == 35 && sizeof(Trade) == 44);
static_assert(sizeof(CrossTrade) == 40 && sizeof(BrokenTrade) == 19);
static_assert(sizeof(Noii) == 50 && sizeof(Rpii) == 20 && sizeof(Dlcr) == 48);
static_assert(offsetof(AddOrder, price) == 32 && offsetof(OrderReplace, price) == 31);
// --8<-- [end:structs]

// Each type's fixed length, indexed by the type byte; 0 = unknown type (skip and
// count).
inline constexpr std::array<std::uint8_t, 256> kLength = [] {
    std::array<std::uint8_t, 256> t{};
    t['S'] = sizeof(SystemEvent);        t['R'] = sizeof(StockDirectory);
    t['H'] = sizeof(StockTradingAction); t['Y'] = sizeof(RegSho);
    t['L'] = sizeof(MarketParticipantPosition); t['V'] = sizeof(MwcbDeclineLevel);
    t['W'] = sizeof(MwcbStatus);         t['K'] = sizeof(IpoQuotingPeriod);
    t['J'] = sizeof(LuldAuctionCollar);  t['h'] = sizeof(OperationalHalt);
    t['A'] = sizeof(AddOrder);           t['F'] = sizeof(AddOrderMpid);
    t['E'] = sizeof(OrderExecuted);      t['C'] = sizeof(OrderExecutedWithPrice);
    t['X'] = sizeof(OrderCancel);        t['D'] = sizeof(OrderDelete);
    t['U'] = sizeof(OrderReplace);       t['P'] = sizeof(Trade);
    t['Q'] = sizeof(CrossTrade);         t['B'] = sizeof(BrokenTrade);
    t['I'] = sizeof(Noii);               t['N'] = sizeof(Rpii);
    t['O'] = sizeof(Dlcr);
    return t;
}();

// The smallest record (prefix + message) that yields an event is an S: a buffer of n
// bytes yields at most n / kMinEventRecord events, so the caller can size the output
// once.
inline constexpr std::size_t kMinEventRecord = 2 + sizeof(SystemEvent);
static_assert(sizeof(SystemEvent) <= sizeof(OrderDelete) && sizeof(SystemEvent) <= sizeof(BrokenTrade));

// Reason codes: the indices of ITCH_REASONS in contract/itch_errors.py (checked by
// tests/test_contract.py through native/contract_bind.cpp).
enum class Error : std::uint8_t { Ok = 0, TruncatedPrefix = 1, TruncatedBody = 2,
                                  ZeroLength = 3, BadLength = 4 };

struct ScanResult {
    std::size_t consumed = 0;   // bytes of whole records decoded (error: the bad record's offset)
    std::size_t events = 0;     // events written to out
    Error error = Error::Ok;    // ZeroLength / BadLength; a partial tail is not an error here
    std::uint8_t error_type = 0;
    std::uint16_t error_length = 0;
};

// --8<-- [start:read_field]
// Read one field of wire struct T straight from the message at p: offsetof gives the
// field's position (checked against the spec above), its type gives width and byte
// order. Each read is one small load (+ bswap). Copying whole structs out first is
// legal too, but GCC turns a 36-byte copy into a slow `rep movs`; and casting p to
// `const T*` and reading through it would be undefined behaviour (no T object lives at
// p).
template <class F>
inline auto read_field(const std::uint8_t* q) {
    if constexpr (std::is_same_v<F, Char>) return *q;
    else if constexpr (std::is_same_v<F, U16>) return be16(q);
    else if constexpr (std::is_same_v<F, U32>) return be32(q);
    else if constexpr (std::is_same_v<F, U48>) return be48(q);
    else return be64(q);
}
#define ITCH_READ(T, field, p) read_field<decltype(T::field)>((p) + offsetof(T, field))
#define ITCH_STOCK(T, p, e) \
    std::memcpy((e).stock, (p) + offsetof(T, stock), sizeof (e).stock)
// --8<-- [end:read_field]

// --8<-- [start:decode_one]
// shares and price sit side by side in the event (offsets 32 and 36) and go in with one
// 8-byte store. Code that reads the event back may load both at once (Market's add
// does), and a load that spans two separate stores cannot take its bytes from the store
// buffer: it waits until both stores have reached the cache (a perf profile of
// Market::run_itch showed that wait as the hottest instruction of an add).
inline void put_shares_price(ItchEvent& e, std::uint32_t shares, std::uint32_t price) {
    static_assert(std::endian::native == std::endian::little, "shares is the low half");
    const std::uint64_t both = std::uint64_t(shares) | (std::uint64_t(price) << 32);
    std::memcpy(reinterpret_cast<unsigned char*>(&e) + offsetof(ItchEvent, shares), &both,
                sizeof both);
}

// Fill the event for one whole message; returns false if this type makes no event.
// Precondition: p points at the type byte and kLength[type] bytes are readable.
inline bool decode_event(const std::uint8_t* p, ItchEvent& e) {
    const std::uint8_t type = p[0];
    e = ItchEvent{};
    e.timestamp = ITCH_READ(Header, timestamp, p);
    e.locate = ITCH_READ(Header, locate, p);
    e.type = type;
    switch (type) {
        case 'A':
            e.order_ref = ITCH_READ(AddOrder, order_ref, p);
            e.side = ITCH_READ(AddOrder, side, p);
            put_shares_price(e, ITCH_READ(AddOrder, shares, p), ITCH_READ(AddOrder, price, p));
            ITCH_STOCK(AddOrder, p, e);
            return true;
        case 'F':
            e.order_ref = ITCH_READ(AddOrderMpid, order_ref, p);
            e.side = ITCH_READ(AddOrderMpid, side, p);
            put_shares_price(e, ITCH_READ(AddOrderMpid, shares, p),
                             ITCH_READ(AddOrderMpid, price, p));
            ITCH_STOCK(AddOrderMpid, p, e);
            return true;
        case 'E':
            e.order_ref = ITCH_READ(OrderExecuted, order_ref, p);
            put_shares_price(e, ITCH_READ(OrderExecuted, shares, p), 0);
            e.match_number = ITCH_READ(OrderExecuted, match_number, p);
            return true;
        case 'C':
            e.order_ref = ITCH_READ(OrderExecutedWithPrice, order_ref, p);
            put_shares_price(e, ITCH_READ(OrderExecutedWithPrice, shares, p),
                             ITCH_READ(OrderExecutedWithPrice, price, p));
            e.match_number = ITCH_READ(OrderExecutedWithPrice, match_number, p);
            e.printable = ITCH_READ(OrderExecutedWithPrice, printable, p);
            return true;
        case 'X':
            e.order_ref = ITCH_READ(OrderCancel, order_ref, p);
            put_shares_price(e, ITCH_READ(OrderCancel, shares, p), 0);
            return true;
        case 'D':
            e.order_ref = ITCH_READ(OrderDelete, order_ref, p);
            return true;
        case 'U':
            e.order_ref = ITCH_READ(OrderReplace, order_ref, p);
            e.new_order_ref = ITCH_READ(OrderReplace, new_order_ref, p);
            put_shares_price(e, ITCH_READ(OrderReplace, shares, p),
                             ITCH_READ(OrderReplace, price, p));
            return true;
        case 'P':
            e.order_ref = ITCH_READ(Trade, order_ref, p);
            e.side = ITCH_READ(Trade, side, p);
            put_shares_price(e, ITCH_READ(Trade, shares, p), ITCH_READ(Trade, price, p));
            e.match_number = ITCH_READ(Trade, match_number, p);
            ITCH_STOCK(Trade, p, e);
            return true;
        case 'Q':  // u64 cross shares travel in order_ref (see EVENT_DTYPE)
            e.order_ref = ITCH_READ(CrossTrade, shares, p);
            put_shares_price(e, 0, ITCH_READ(CrossTrade, price, p));
            e.match_number = ITCH_READ(CrossTrade, match_number, p);
            e.printable = ITCH_READ(CrossTrade, cross_type, p);
            ITCH_STOCK(CrossTrade, p, e);
            return true;
        case 'B':
            e.match_number = ITCH_READ(BrokenTrade, match_number, p);
            return true;
        case 'S':
            e.side = ITCH_READ(SystemEvent, event_code, p);
            return true;
        case 'R':
            ITCH_STOCK(StockDirectory, p, e);
            return true;
        case 'H':
            e.side = ITCH_READ(StockTradingAction, trading_state, p);
            ITCH_STOCK(StockTradingAction, p, e);
            return true;
        default:
            return false;
    }
}
// --8<-- [end:decode_one]

// --8<-- [start:decode_loop]
// One record at buf[0, n): check it, count its type, decode it into *out. consumed 0
// means the record is partial (or buf is empty); an error names what is wrong with it.
// Every read is bounds-checked first, so any input is safe. The pipeline, which takes
// records one at a time, calls this directly; scan_scalar below loops over it.
inline ScanResult decode_one(const std::uint8_t* buf, std::size_t n, ItchEvent* out,
                             std::uint64_t* counts) {
    ScanResult r;
    if (n < 2) return r;
    const std::size_t len = be16(buf);
    if (len == 0) {
        r.error = Error::ZeroLength;
        return r;
    }
    if (n - 2 < len) return r;  // partial record
    const std::uint8_t* msg = buf + 2;
    const std::uint8_t type = msg[0];
    const std::size_t want = kLength[type];
    if (want != 0 && want != len) {
        r.error = Error::BadLength;
        r.error_type = type;
        r.error_length = static_cast<std::uint16_t>(len);
        return r;
    }
    ++counts[type];
    // Unknown types (want == 0) are skipped; known ones have exactly `want` bytes.
    if (want != 0 && decode_event(msg, *out)) r.events = 1;
    r.consumed = 2 + len;
    return r;
}

// Decode the whole records at the start of buf[0, n): write events to out (room for
// n / kMinEventRecord), count every record's type in counts[256], stop at a partial
// record (the caller decides if more bytes are coming) or a bad one (reported, with
// `consumed` at its first byte).
inline ScanResult scan_scalar(const std::uint8_t* buf, std::size_t n, ItchEvent* out,
                              std::uint64_t* counts) {
    ScanResult r;
    ItchEvent* const first = out;
    for (;;) {
        const ScanResult one = decode_one(buf + r.consumed, n - r.consumed, out, counts);
        if (one.error != Error::Ok) {
            r.error = one.error;
            r.error_type = one.error_type;
            r.error_length = one.error_length;
            break;
        }
        if (one.consumed == 0) break;  // partial record, or nothing left
        r.consumed += one.consumed;
        out += one.events;
    }
    r.events = static_cast<std::size_t>(out - first);
    return r;
}
// --8<-- [end:decode_loop]

// --8<-- [start:simd]
// --8<-- [start:simd_table]
// The same loop with one AVX-512 VBMI instruction doing all of decode_event's work.
//
// What the scalar loop above cannot avoid: (1) a branch per message on its type, which
// a random mix of A/D/U types makes unpredictable; (2) its output: ordinary stores into
// memory that is not in cache make the CPU first read each line in ("read for
// ownership"); (3) the framing chain (the next record's offset needs this record's
// length), which no decoder avoids. Chapter 3's table has a row for each loop
// ("Optimized" runs this one when the CPU has it, "Optimized, portable loop" the scalar
// one).
//
// Here every event field is a byte of the message (byte-swapped for integers) or zero,
// so per type a 64-entry table says "output byte j = message byte idx[j]" and VPERMB
// applies it to the whole message at once: no switch, no per-field loads. Events
// collect in a small buffer in L1 and leave in 64-byte "streaming" stores that skip the
// read for ownership; they are used only for outputs too large to stay in the caches
// anyway.
struct alignas(64) EventShuffle {  // each 64-byte index row in one cache line
    // index[type][j]: the message byte that event byte j is copied from
    std::array<std::array<std::uint8_t, 64>, 256> index{};
    // bit j of keep[type] set: event byte j comes from the message (clear: it is zero)
    std::array<std::uint64_t, 256> keep{};
    std::array<std::uint8_t, 256> makes_event{};
// --8<-- [end:simd_table]
};
// --8<-- [end:simd_table]

// Built at compile time from the same struct offsets decode_event uses.
inline constexpr EventShuffle kShuffle = [] {
    EventShuffle t{};
    auto& ix = t.index;
    auto& keep = t.keep;
    // Copy `width` message bytes from `from` to event byte `to`, reversed (big-endian
    // integer -> little-endian) or straight (chars and stock text).
    auto put = [&](std::uint8_t type, std::size_t to, std::size_t from, std::size_t width,
                   bool swap) {
        for (std::size_t b = 0; b < width; ++b) {
            ix[type][to + b] = static_cast<std::uint8_t>(swap ? from + width - 1 - b : from + b);
            keep[type] |= std::uint64_t{1} << (to + b);
        }
    };
#define EV(type, evfield, T, field) \
    put(type, offsetof(ItchEvent, evfield), offsetof(T, field), sizeof(T::field), \
        !std::is_same_v<decltype(T::field), Char> && !std::is_same_v<decltype(T::field), Alpha<8>>)
    for (std::uint8_t type : {'A', 'F', 'E', 'C', 'X', 'D', 'U', 'P', 'Q', 'B', 'S', 'R', 'H'}) {
        t.makes_event[type] = 1;
        EV(type, timestamp, Header, timestamp);
        EV(type, locate, Header, locate);
        EV(type, type, Header, type);
    }
    EV('A', order_ref, AddOrder, order_ref);   EV('A', side, AddOrder, side);
    EV('A', shares, AddOrder, shares);         EV('A', price, AddOrder, price);
    EV('A', stock, AddOrder, stock);
    EV('F', order_ref, AddOrderMpid, order_ref); EV('F', side, AddOrderMpid, side);
    EV('F', shares, AddOrderMpid, shares);       EV('F', price, AddOrderMpid, price);
    EV('F', stock, AddOrderMpid, stock);
    EV('E', order_ref, OrderExecuted, order_ref); EV('E', shares, OrderExecuted, shares);
    EV('E', match_number, OrderExecuted, match_number);
    EV('C', order_ref, OrderExecutedWithPrice, order_ref);
    EV('C', shares, OrderExecutedWithPrice, shares);
    EV('C', match_number, OrderExecutedWithPrice, match_number);
    EV('C', printable, OrderExecutedWithPrice, printable);
    EV('C', price, OrderExecutedWithPrice, price);
    EV('X', order_ref, OrderCancel, order_ref); EV('X', shares, OrderCancel, shares);
    EV('D', order_ref, OrderDelete, order_ref);
    EV('U', order_ref, OrderReplace, order_ref); EV('U', new_order_ref, OrderReplace, new_order_ref);
    EV('U', shares, OrderReplace, shares);       EV('U', price, OrderReplace, price);
    EV('P', order_ref, Trade, order_ref); EV('P', side, Trade, side);
    EV('P', shares, Trade, shares);       EV('P', price, Trade, price);
    EV('P', match_number, Trade, match_number); EV('P', stock, Trade, stock);
    EV('Q', order_ref, CrossTrade, shares); EV('Q', price, CrossTrade, price);  // see 'Q' above
    EV('Q', match_number, CrossTrade, match_number); EV('Q', printable, CrossTrade, cross_type);
    EV('Q', stock, CrossTrade, stock);
    EV('B', match_number, BrokenTrade, match_number);
    EV('S', side, SystemEvent, event_code);
    EV('R', stock, StockDirectory, stock);
    EV('H', side, StockTradingAction, trading_state); EV('H', stock, StockTradingAction, stock);
#undef EV
    return t;
}();

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TWINMATCH_ITCH_VBMI 1
// Compiled for AVX-512 VBMI whatever the build flags; only called when the CPU has it.
#define TWINMATCH_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

// Copy `count` staged events to out; `streaming`: out is 64-byte aligned and the size a
// multiple of 64, so whole cache lines go straight to memory.
TWINMATCH_VBMI_TARGET
inline void copy_events(ItchEvent* out, const std::uint8_t* stage, std::size_t count,
                        bool streaming) {
    const std::size_t bytes = count * sizeof(ItchEvent);
    if (!streaming) {
        std::memcpy(out, stage, bytes);
        return;
    }
    auto* to = reinterpret_cast<__m512i*>(out);
    for (std::size_t i = 0; i < bytes / 64; ++i)
        _mm512_stream_si512(to + i, _mm512_load_si512(stage + 64 * i));
}

// --8<-- [start:simd_loop]
TWINMATCH_VBMI_TARGET
inline ScanResult scan_vbmi(const std::uint8_t* buf, std::size_t n, ItchEvent* out,
                            std::uint64_t* counts, bool streaming) {
    constexpr std::size_t kStage = 128;  // events per flush: 7 KiB = 112 cache lines, in L1
    static_assert(kStage * sizeof(ItchEvent) % 64 == 0);
    // 64-byte stores of 56-byte events: the last one spills 8 bytes, hence the +1.
    alignas(64) std::uint8_t stage[(kStage + 1) * sizeof(ItchEvent)];
    std::size_t staged = 0;
    // Streaming stores need 64-byte aligned targets; flushes keep the alignment.
    streaming = streaming && reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
    auto flush = [&] {
        copy_events(out, stage, staged, streaming && staged == kStage);
        out += staged;
        staged = 0;
    };
    ScanResult r;
    std::size_t off = 0;
    ItchEvent* const first = out;
    while (n - off >= 2) {
        // Lengths are < 256 for every known type: the common case reads just the low
        // byte, which shortens the record-to-record dependency by the byte swap.
        std::size_t len = buf[off + 1];
        if (buf[off] != 0) len = be16(buf + off);
        if (len == 0) {
            r.error = Error::ZeroLength;
            break;
        }
        if (n - off - 2 < len) break;  // partial record
        const std::uint8_t* msg = buf + off + 2;
        const std::uint8_t type = msg[0];
        const std::size_t want = kLength[type];
        if (want != len) [[unlikely]] {
            if (want != 0) {
                r.error = Error::BadLength;
                r.error_type = type;
                r.error_length = static_cast<std::uint16_t>(len);
                break;
            }
            ++counts[type];  // unknown type: counted, skipped
            off += 2 + len;
            continue;
        }
        ++counts[type];
        // Load exactly `len` bytes (the mask stops the load at the record's end, and
        // masked-off bytes are never touched), permute them into an event, zero the
        // rest.
        const __m512i bytes = _mm512_maskz_loadu_epi8((std::uint64_t{1} << len) - 1, msg);
        const __m512i index = _mm512_loadu_si512(kShuffle.index[type].data());
        const __m512i event = _mm512_maskz_permutexvar_epi8(kShuffle.keep[type], index, bytes);
        _mm512_storeu_si512(stage + staged * sizeof(ItchEvent), event);
        staged += kShuffle.makes_event[type];  // a non-event type is overwritten next time
        if (staged == kStage) flush();
        off += 2 + len;
    }
    flush();
    if (streaming) _mm_sfence();  // streaming stores are weakly ordered: publish them
    r.consumed = off;
    r.events = static_cast<std::size_t>(out - first);
    return r;
}

// --8<-- [end:simd_loop]

inline bool cpu_has_vbmi() {
    static const bool has = __builtin_cpu_supports("avx512f") &&
                            __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vbmi");
    return has;
}
#else
inline bool cpu_has_vbmi() { return false; }
#endif

// --8<-- [start:simd_dispatch]
// Streaming stores bypass the caches: only when the output can reach 1 MiB (room for
// n / kMinEventRecord events), too large to be read back from a core's own caches; a
// smaller one stays cached for whoever reads it next.
inline constexpr std::size_t kStreamingBytes = 1u << 20;

// Decode (see scan_scalar) with the fastest loop this CPU supports; `simd = false`
// forces the portable loop (tests run both).
inline ScanResult scan(const std::uint8_t* buf, std::size_t n, ItchEvent* out,
                       std::uint64_t* counts, bool simd = true) {
#ifdef TWINMATCH_ITCH_VBMI
    if (simd && cpu_has_vbmi()) {
        const bool streaming =
            n / kMinEventRecord * sizeof(ItchEvent) >= kStreamingBytes;
        return scan_vbmi(buf, n, out, counts, streaming);
    }
#endif
    return scan_scalar(buf, n, out, counts);
}
// --8<-- [end:simd_dispatch]
// --8<-- [end:simd]

// --8<-- [start:sum_bytes]
// The bandwidth ceiling for the benchmarks: one sequential pass that reads every byte
// and does as little as possible with it (the sum of its 8-byte words, then the tail
// bytes, mod 2^64). The adds go to several independent accumulators: with one, each add
// waits for the one before it, and the loop measures the add's latency, not what memory
// can deliver. Wide loads (16 bytes with SSE2, which every x86-64 has; 32 with AVX2,
// picked at run time) need fewer instructions a byte.
inline std::uint64_t sum_tail(const std::uint8_t* buf, std::size_t i, std::size_t n,
                              std::uint64_t s) {
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, buf + i, 8);
        s += w;
    }
    for (; i < n; ++i) s += buf[i];
    return s;
}
// --8<-- [end:sum_bytes]
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// --8<-- [start:sum_bytes_avx2]
__attribute__((target("avx2")))
inline std::uint64_t sum_bytes_avx2(const std::uint8_t* buf, std::size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;  // four independent chains
    std::size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        // (no helper lambda: a lambda is not compiled for the function's avx2 target)
        const auto* p = reinterpret_cast<const __m256i*>(buf + i);
        a = _mm256_add_epi64(a, _mm256_loadu_si256(p));
        b = _mm256_add_epi64(b, _mm256_loadu_si256(p + 1));
        c = _mm256_add_epi64(c, _mm256_loadu_si256(p + 2));
        d = _mm256_add_epi64(d, _mm256_loadu_si256(p + 3));
    }
    alignas(32) std::uint64_t lanes[4];
    __m256i all = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), all);
    return sum_tail(buf, i, n, lanes[0] + lanes[1] + lanes[2] + lanes[3]);
}
// --8<-- [end:sum_bytes_avx2]
inline std::uint64_t sum_bytes_sse2(const std::uint8_t* buf, std::size_t n) {
    __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const auto* p = reinterpret_cast<const __m128i*>(buf + i);
        a = _mm_add_epi64(a, _mm_loadu_si128(p));
        b = _mm_add_epi64(b, _mm_loadu_si128(p + 1));
        c = _mm_add_epi64(c, _mm_loadu_si128(p + 2));
        d = _mm_add_epi64(d, _mm_loadu_si128(p + 3));
    }
    alignas(16) std::uint64_t lanes[2];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes),
                    _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d)));
    return sum_tail(buf, i, n, lanes[0] + lanes[1]);
}
#endif
// --8<-- [start:sum_bytes_dispatch]
inline std::uint64_t sum_bytes(const std::uint8_t* buf, std::size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool avx2 = __builtin_cpu_supports("avx2");
    return avx2 ? sum_bytes_avx2(buf, n) : sum_bytes_sse2(buf, n);
#else
    std::uint64_t s[4] = {0, 0, 0, 0};  // four independent chains, 32 bytes a step
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int k = 0; k < 4; ++k) {
            std::uint64_t w;
            std::memcpy(&w, buf + i + 8 * k, 8);
            s[k] += w;
        }
    }
    return sum_tail(buf, i, n, s[0] + s[1] + s[2] + s[3]);
#endif
}
// --8<-- [end:sum_bytes_dispatch]

}  // namespace twinmatch::itch
