// Order files, the optimized twin: CSV orders and LOBSTER message files parsed in place
// from a read-only byte buffer into preallocated OPS_DTYPE / LOBSTER_DTYPE records.
// The rules (header detection, blank lines, which problem wins) are naive/orders.py's;
// an error is reported as (problem, line, field) and formatted in optimized/orders.py.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dtypes.hpp"

namespace twinmatch::orders {

// The numbers are the indices of optimized/orders.py's PROBLEM_NAMES (tests/test_contract.py).
enum class Problem : std::uint8_t {
    Ok = 0, FieldCount, Missing, NotNumber, Negative, OutOfRange, BadSide, BadType,
    BadDirection, TooPrecise, Capacity,
};

struct Error {
    Problem problem = Problem::Ok;
    std::uint64_t line = 0;     // 1-based
    std::uint32_t field = 0;    // 0-based index of the bad field
    std::uint32_t nfields = 0;  // for FieldCount: how many fields the line had
};

constexpr std::uint64_t kU32Max = 0xFFFFFFFFull;
constexpr std::uint64_t kU64Max = ~std::uint64_t{0};
constexpr std::uint64_t kI64Max = 0x7FFFFFFFFFFFFFFFull;

// A [b, e) slice of the input; nothing is copied.
struct Span {
    const std::uint8_t* b;
    const std::uint8_t* e;
    std::size_t size() const { return static_cast<std::size_t>(e - b); }
    bool empty() const { return b == e; }
};

inline bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }
inline bool is_space(std::uint8_t c) { return c == ' ' || c == '\t'; }

inline Span strip(Span s) {
    while (s.b < s.e && is_space(*s.b)) ++s.b;
    while (s.e > s.b && is_space(s.e[-1])) --s.e;
    return s;
}

inline bool all_digits(Span s) {  // like Python's bytes.isdigit(): false when empty
    if (s.empty()) return false;
    for (const std::uint8_t* p = s.b; p < s.e; ++p)
        if (!is_digit(*p)) return false;
    return true;
}

// Digits -> value; false if it does not fit in 64 bits (Python's int never overflows,
// so every caller turns "too big" into the problem the naive twin reports for it).
inline bool digits_u64(Span s, std::uint64_t& v) {
    v = 0;
    for (const std::uint8_t* p = s.b; p < s.e; ++p) {
        const std::uint64_t d = *p - '0';
        if (v > (kU64Max - d) / 10) return false;
        v = v * 10 + d;
    }
    return true;
}

// --8<-- [start:parse_field]
inline Problem parse_uint(Span t, std::uint64_t max, std::uint64_t& v) {
    if (t.empty()) return Problem::Missing;
    if (all_digits(t))
        return digits_u64(t, v) && v <= max ? Problem::Ok : Problem::OutOfRange;
    if (*t.b == '-' && all_digits({t.b + 1, t.e})) return Problem::Negative;
    return Problem::NotNumber;
}
// --8<-- [end:parse_field]

// An optionally negative integer: sign and magnitude, `fits` false past 64 bits.
inline Problem parse_signed(Span t, bool& negative, std::uint64_t& magnitude, bool& fits) {
    if (t.empty()) return Problem::Missing;
    negative = *t.b == '-';
    const Span digits{t.b + (negative ? 1 : 0), t.e};
    if (!all_digits(digits)) return Problem::NotNumber;
    fits = digits_u64(digits, magnitude);
    return Problem::Ok;
}

// A number that must be one of a few small values (side, type, direction).
inline Problem parse_choice(Span t, const std::int64_t* allowed, std::size_t n, Problem bad,
                            std::int64_t& v) {
    bool negative = false, fits = false;
    std::uint64_t mag = 0;
    if (const Problem p = parse_signed(t, negative, mag, fits); p != Problem::Ok) return p;
    if (!fits || mag > 1000) return bad;  // far outside every allowed set
    v = negative ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
    for (std::size_t i = 0; i < n; ++i)
        if (allowed[i] == v) return Problem::Ok;
    return bad;
}

// Any int64 (LOBSTER halt rows' price).
inline Problem parse_i64(Span t, std::int64_t& v) {
    bool negative = false, fits = false;
    std::uint64_t mag = 0;
    if (const Problem p = parse_signed(t, negative, mag, fits); p != Problem::Ok) return p;
    if (!fits || mag > kI64Max + (negative ? 1 : 0)) return Problem::OutOfRange;
    // -2**63 has no positive int64 twin: negate in unsigned arithmetic, then convert.
    v = negative ? static_cast<std::int64_t>(0 - mag) : static_cast<std::int64_t>(mag);
    return Problem::Ok;
}

// Seconds with up to 9 decimals -> nanoseconds, exactly (no floating point).
inline Problem parse_time_ns(Span t, std::int64_t& ns) {
    if (t.empty()) return Problem::Missing;
    const std::uint8_t* dot = static_cast<const std::uint8_t*>(std::memchr(t.b, '.', t.size()));
    const Span whole{t.b, dot ? dot : t.e};
    const Span frac{dot ? dot + 1 : t.e, t.e};
    const bool frac_ok = !dot || all_digits(frac);
    if (!whole.empty() && *whole.b == '-' && all_digits({whole.b + 1, whole.e}) && frac_ok)
        return Problem::Negative;
    if (!all_digits(whole) || !frac_ok) return Problem::NotNumber;
    if (frac.size() > 9) return Problem::TooPrecise;
    std::uint64_t f = 0, secs = 0;
    for (const std::uint8_t* p = frac.b; p < frac.e; ++p) f = f * 10 + (*p - '0');
    for (std::size_t i = frac.size(); i < 9; ++i) f *= 10;
    if (!digits_u64(whole, secs) || secs > (kI64Max - f) / 1'000'000'000ull)
        return Problem::OutOfRange;
    ns = static_cast<std::int64_t>(secs * 1'000'000'000ull + f);
    return Problem::Ok;
}

// Where a piece of a file starts (the file is parsed a piece of whole lines at a time, see
// contract/order_files.py): its first line's number, and whether the header line has been
// looked for yet. parse_csv / parse_lobster update header_checked for the next piece.
struct LineState {
    std::uint64_t first_line = 1;
    bool header_checked = false;
};

// Walks the lines of a buffer: skips a UTF-8 BOM (at the file's start), blank lines and a
// header (first non-blank line whose first field does not start with a digit or '-'),
// strips one '\r'.
class Lines {
public:
    Lines(const std::uint8_t* data, std::size_t n, LineState& state)
        : p_(data), end_(data + n), line_(state.first_line - 1), state_(state) {
        if (state.first_line == 1 && n >= 3 && data[0] == 0xEF && data[1] == 0xBB &&
            data[2] == 0xBF)
            p_ += 3;
    }

    // The next data line's fields (up to N kept, all counted); false at the end.
    template <std::size_t N>
    bool next(Span (&fields)[N], std::size_t& nfields, std::uint64_t& line) {
        while (!done_) {
            // memchr on an empty range could be handed a null pointer: skip the call.
            const auto* nl = p_ == end_ ? nullptr
                : static_cast<const std::uint8_t*>(std::memchr(p_, '\n', end_ - p_));
            Span s{p_, nl ? nl : end_};
            if (nl) p_ = nl + 1; else done_ = true;
            line = ++line_;
            if (blank(s)) continue;
            if (s.e[-1] == '\r') --s.e;
            nfields = split(s, fields);
            if (!state_.header_checked) {
                state_.header_checked = true;
                const Span first = fields[0];
                if (first.empty() || !(is_digit(*first.b) || *first.b == '-')) continue;
            }
            return true;
        }
        return false;
    }

private:
    const std::uint8_t* p_;
    const std::uint8_t* end_;
    std::uint64_t line_ = 0;
    bool done_ = false;
    LineState& state_;

    static bool blank(Span s) {
        for (const std::uint8_t* q = s.b; q < s.e; ++q)
            if (!is_space(*q) && *q != '\r') return false;
        return true;
    }

    template <std::size_t N>
    static std::size_t split(Span s, Span (&fields)[N]) {
        std::size_t n = 0;
        const std::uint8_t* start = s.b;
        for (const std::uint8_t* q = s.b;; ++q) {
            if (q == s.e || *q == ',') {
                if (n < N) fields[n] = strip({start, q});
                ++n;
                if (q == s.e) break;
                start = q + 1;
            }
        }
        return n;
    }
};

// --8<-- [start:read_csv]
// CSV orders -> OpRecords; returns the number written (out holds `cap` records).
inline std::size_t parse_csv(const std::uint8_t* data, std::size_t n, OpRecord* out,
                             std::size_t cap, Error& err, LineState& state) {
    Lines lines(data, n, state);
    Span f[4];
    std::size_t nf = 0, count = 0;
    std::uint64_t line = 0;
    static constexpr std::int64_t kSides[] = {0, 1};
    while (lines.next(f, nf, line)) {
        auto fail = [&](Problem p, std::uint32_t field) {
            err = {p, line, field, static_cast<std::uint32_t>(nf)};
            return count;
        };
        if (nf != 4) return fail(Problem::FieldCount, 0);
        if (count == cap) return fail(Problem::Capacity, 0);
        std::uint64_t id = 0, price = 0, qty = 0;
        std::int64_t side = 0;
        Problem p;
        if ((p = parse_uint(f[0], kU64Max, id)) != Problem::Ok) return fail(p, 0);
        if ((p = parse_uint(f[1], kU32Max, price)) != Problem::Ok) return fail(p, 1);
        if ((p = parse_uint(f[2], kU32Max, qty)) != Problem::Ok) return fail(p, 2);
        if ((p = parse_choice(f[3], kSides, 2, Problem::BadSide, side)) != Problem::Ok)
            return fail(p, 3);
        OpRecord& r = out[count++];
        r = OpRecord{};
        r.order_id = id;
        r.price = static_cast<std::uint32_t>(price);
        r.qty = static_cast<std::uint32_t>(qty);
        r.op = static_cast<std::uint8_t>(qty == 0     ? OpCode::Cancel
                                         : price == 0 ? OpCode::Market
                                                      : OpCode::Limit);
        r.side = static_cast<std::uint8_t>(side);
    }
    return count;
}
// --8<-- [end:read_csv]

inline std::size_t parse_lobster(const std::uint8_t* data, std::size_t n, LobsterRecord* out,
                                 std::size_t cap, Error& err, LineState& state) {
    Lines lines(data, n, state);
    Span f[6];
    std::size_t nf = 0, count = 0;
    std::uint64_t line = 0;
    static constexpr std::int64_t kTypes[] = {1, 2, 3, 4, 5, 6, 7};
    static constexpr std::int64_t kDirections[] = {1, -1};
    while (lines.next(f, nf, line)) {
        auto fail = [&](Problem p, std::uint32_t field) {
            err = {p, line, field, static_cast<std::uint32_t>(nf)};
            return count;
        };
        if (nf != 6) return fail(Problem::FieldCount, 0);
        if (count == cap) return fail(Problem::Capacity, 0);
        LobsterRecord r{};
        std::int64_t type = 0, direction = 0, price = 0;
        std::uint64_t id = 0, size = 0, uprice = 0;
        Problem p;
        if ((p = parse_time_ns(f[0], r.time)) != Problem::Ok) return fail(p, 0);
        if ((p = parse_choice(f[1], kTypes, 7, Problem::BadType, type)) != Problem::Ok)
            return fail(p, 1);
        if ((p = parse_uint(f[2], kU64Max, id)) != Problem::Ok) return fail(p, 2);
        if ((p = parse_uint(f[3], kU32Max, size)) != Problem::Ok) return fail(p, 3);
        if (type == 7) {  // halt rows carry -1 / 0 / 1
            if ((p = parse_i64(f[4], price)) != Problem::Ok) return fail(p, 4);
        } else {
            if ((p = parse_uint(f[4], kU32Max, uprice)) != Problem::Ok) return fail(p, 4);
            price = static_cast<std::int64_t>(uprice);
        }
        if ((p = parse_choice(f[5], kDirections, 2, Problem::BadDirection, direction)) !=
            Problem::Ok)
            return fail(p, 5);
        r.order_id = id;
        r.price = price;
        r.size = static_cast<std::uint32_t>(size);
        r.type = static_cast<std::uint8_t>(type);
        r.direction = static_cast<std::int8_t>(direction);
        out[count++] = r;
    }
    return count;
}

// --8<-- [start:lobster_to_ops]
// skipped[0..3]: hidden executions, cross trades, halts, other types.
// `in` is raw bytes: a numpy array handed in by a caller may sit at any address, so
// each record is memcpy'd into an aligned local instead of being read through a cast
// pointer.
inline std::size_t lobster_to_ops(const std::uint8_t* in, std::size_t n, OpRecord* out,
                                  std::uint64_t (&skipped)[4]) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) {
        LobsterRecord m;
        std::memcpy(&m, in + i * sizeof(LobsterRecord), sizeof m);
        OpCode op;
        switch (m.type) {
            case 1: op = OpCode::Limit; break;
            case 2: op = OpCode::Reduce; break;
            case 3: op = OpCode::Cancel; break;
            case 4: op = OpCode::Execute; break;
            case 5: ++skipped[0]; continue;
            case 6: ++skipped[1]; continue;
            case 7: ++skipped[2]; continue;
            default: ++skipped[3]; continue;
        }
        OpRecord& r = out[count++];
        r = OpRecord{};
        r.order_id = m.order_id;
        r.price = static_cast<std::uint32_t>(m.price);  // mod 2**32, as the naive twin
        r.qty = m.size;
        r.op = static_cast<std::uint8_t>(op);
        r.side = m.direction == 1 ? 0 : 1;
    }
    return count;
}
// --8<-- [end:lobster_to_ops]

}  // namespace twinmatch::orders
