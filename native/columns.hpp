// Chapter 9: the decoders' events as an array of structs (ItchEvent, 56 bytes each) and
// as a struct of arrays (one column per field), and two workloads over both:
//   * the filter "every add order of stock S above price P" (indices, ascending),
//   * the aggregate "volume-weighted price per locate of the E executions".
// The rules are contract/columns.py's; naive/columns.py is the readable specification.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TWINMATCH_COLUMNS_X86 1
#endif

#include "dtypes.hpp"

namespace twinmatch::columns {

// One VWAP_DTYPE row of contract/columns.py.
struct VwapRow {
    std::uint16_t locate;
    std::uint8_t pad_[6];
    std::uint64_t executions;
    std::uint64_t unpriced;
    std::uint64_t shares;
    std::uint64_t notional_lo;
    std::uint64_t notional_hi;
};
static_assert(sizeof(VwapRow) == 48);
static_assert(offsetof(VwapRow, executions) == 8 && offsetof(VwapRow, notional_hi) == 40);

// A heap array aligned to a cache line (64 bytes), so that every column starts where a
// vector load of any width is aligned. The kernels below still use unaligned loads: a
// slice of a column (start > 0) is not aligned, and on current x86 cores an unaligned
// load of aligned data costs the same as an aligned one.
template <class T>
struct AlignedArray {
    struct Free {
        void operator()(T* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<T[], Free> data;
    std::size_t size = 0;

    explicit AlignedArray(std::size_t n = 0) : size(n) {
        // aligned_alloc wants a multiple of the alignment, and never 0 bytes.
        const std::size_t bytes = (n * sizeof(T) + 64) / 64 * 64;
        void* p = std::aligned_alloc(64, bytes);
        if (p == nullptr) throw std::bad_alloc();
        data.reset(static_cast<T*>(p));
    }
    T& operator[](std::size_t i) { return data[i]; }
    const T& operator[](std::size_t i) const { return data[i]; }
};

// --8<-- [start:soa]
// The struct of arrays: column[i] is field i of event i, for every field.
struct EventColumns {
    std::size_t n;
    AlignedArray<std::uint64_t> timestamp, order_ref, new_order_ref, match_number;
    AlignedArray<std::uint32_t> shares, price;
    AlignedArray<std::uint16_t> locate;
    AlignedArray<std::uint8_t> type, side, printable;
    AlignedArray<std::uint64_t> stock;  // the 8 stock bytes, one little-endian integer

    explicit EventColumns(const ItchEvent* ev, std::size_t count)
        : n(count), timestamp(count), order_ref(count), new_order_ref(count),
          match_number(count), shares(count), price(count), locate(count), type(count),
          side(count), printable(count), stock(count) {
        // One pass: read a record, write 11 columns.
        for (std::size_t i = 0; i < count; ++i) {
            timestamp[i] = ev[i].timestamp;
            order_ref[i] = ev[i].order_ref;
            new_order_ref[i] = ev[i].new_order_ref;
            match_number[i] = ev[i].match_number;
            shares[i] = ev[i].shares;
            price[i] = ev[i].price;
            locate[i] = ev[i].locate;
            type[i] = ev[i].type;
            side[i] = ev[i].side;
            printable[i] = ev[i].printable;
            std::memcpy(&stock[i], ev[i].stock, 8);  // no aliasing rules broken: a copy
        }
    }
};
// --8<-- [end:soa]

inline std::uint64_t stock_key(const char* stock8) {
    std::uint64_t k;
    std::memcpy(&k, stock8, 8);
    return k;
}

// --8<-- [start:filter_aos]
// The filter over the array of structs. Branch-free: every index is written and the
// count moves on only when the row matches, so no branch depends on the data; a row
// costs the same whether it matches or not. `out` has room for n indices.
inline std::size_t adds_above_aos(const ItchEvent* ev, std::size_t n, std::uint64_t key,
                                  std::uint32_t above, std::int64_t* out) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool add = ev[i].type == 'A' || ev[i].type == 'F';
        const bool hit = add & (stock_key(ev[i].stock) == key) & (ev[i].price > above);
        out[k] = static_cast<std::int64_t>(i);
        k += hit;
    }
    return k;
}
// --8<-- [end:filter_aos]

// --8<-- [start:filter_soa]
// The same loop over the columns [start, stop): it reads 13 bytes a row (type, stock,
// price) instead of touching the 56-byte record's cache line.
inline std::size_t adds_above_soa(const std::uint8_t* type, const std::uint64_t* stock,
                                  const std::uint32_t* price, std::size_t start,
                                  std::size_t stop, std::uint64_t key,
                                  std::uint32_t above, std::int64_t* out) {
    std::size_t k = 0;
    for (std::size_t i = start; i < stop; ++i) {
        const bool add = type[i] == 'A' || type[i] == 'F';
        const bool hit = add & (stock[i] == key) & (price[i] > above);
        out[k] = static_cast<std::int64_t>(i);
        k += hit;
    }
    return k;
}
// --8<-- [end:filter_soa]

#ifdef TWINMATCH_COLUMNS_X86
// Each SIMD kernel is compiled for its instruction set whatever the build flags and is
// only called when the CPU has it (cpu_level below): one binary, every x86-64 machine.
#define TWINMATCH_AVX2_TARGET __attribute__((target("avx2")))
#define TWINMATCH_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

// Write i + (the position of each set bit of `mask`), lowest first.
inline std::size_t emit(std::uint32_t mask, std::size_t i, std::int64_t* out, std::size_t k) {
    while (mask != 0) {
        out[k++] = static_cast<std::int64_t>(i + static_cast<std::size_t>(__builtin_ctz(mask)));
        mask &= mask - 1;  // clear the lowest set bit
    }
    return k;
}

// --8<-- [start:filter_avx2]
// AVX2: 8 rows per step. 256-bit registers hold 8 prices (u32) or 4 stock keys (u64),
// so the step compares 8 prices in one instruction and 8 keys in two, and squeezes each
// comparison into an 8-bit mask (one bit per row) that plain integer ANDs combine.
TWINMATCH_AVX2_TARGET inline std::size_t adds_above_avx2(
    const std::uint8_t* type, const std::uint64_t* stock, const std::uint32_t* price,
    std::size_t start, std::size_t stop, std::uint64_t key, std::uint32_t above,
    std::int64_t* out) {
    const __m256i keys = _mm256_set1_epi64x(static_cast<long long>(key));
    // AVX2 compares only signed integers: flipping the top bit of both sides maps
    // unsigned order onto signed order (0 -> INT32_MIN, 2^32-1 -> INT32_MAX).
    const __m256i flip = _mm256_set1_epi32(INT32_MIN);
    const __m256i limit =
        _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(above)), flip);
    const __m128i a = _mm_set1_epi8('A'), f = _mm_set1_epi8('F');
    std::size_t k = 0, i = start;
    for (; i + 8 <= stop; i += 8) {
        // loadu: an unaligned load, defined for any address (a start that is not a
        // multiple of 8 rows is not 32-byte aligned); see the chapter's sidebar.
        const __m128i t = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(type + i));
        const __m128i is_add = _mm_or_si128(_mm_cmpeq_epi8(t, a), _mm_cmpeq_epi8(t, f));
        const std::uint32_t m_type =
            static_cast<std::uint32_t>(_mm_movemask_epi8(is_add)) & 0xFF;
        const __m256i p =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(price + i));
        const __m256i gt = _mm256_cmpgt_epi32(_mm256_xor_si256(p, flip), limit);
        const auto m_price =
            static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(gt)));
        const __m256i s0 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(stock + i));
        const __m256i s1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(stock + i + 4));
        const auto m0 = static_cast<std::uint32_t>(
            _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(s0, keys))));
        const auto m1 = static_cast<std::uint32_t>(
            _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(s1, keys))));
        k = emit(m_type & m_price & (m0 | m1 << 4), i, out, k);
    }
    // The tail: fewer than 8 rows left, done by the scalar loop.
    return k + adds_above_soa(type, stock, price, i, stop, key, above, out + k);
}
// --8<-- [end:filter_avx2]

// --8<-- [start:filter_avx512]
// AVX-512: 16 rows per step, and the comparisons write mask registers directly (one bit
// per row), including an unsigned compare, so no sign trick and no movemask.
TWINMATCH_AVX512_TARGET inline std::size_t adds_above_avx512(
    const std::uint8_t* type, const std::uint64_t* stock, const std::uint32_t* price,
    std::size_t start, std::size_t stop, std::uint64_t key, std::uint32_t above,
    std::int64_t* out) {
    const __m512i keys = _mm512_set1_epi64(static_cast<long long>(key));
    const __m512i limit = _mm512_set1_epi32(static_cast<int>(above));
    const __m128i a = _mm_set1_epi8('A'), f = _mm_set1_epi8('F');
    std::size_t k = 0, i = start;
    for (; i + 16 <= stop; i += 16) {
        const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(type + i));
        const __mmask16 m_type = _mm_cmpeq_epi8_mask(t, a) | _mm_cmpeq_epi8_mask(t, f);
        const __mmask16 m_price =
            _mm512_cmpgt_epu32_mask(_mm512_loadu_si512(price + i), limit);
        const __mmask8 m0 =
            _mm512_cmpeq_epi64_mask(_mm512_loadu_si512(stock + i), keys);
        const __mmask8 m1 =
            _mm512_cmpeq_epi64_mask(_mm512_loadu_si512(stock + i + 8), keys);
        const std::uint32_t m_stock =
            static_cast<std::uint32_t>(m0) | static_cast<std::uint32_t>(m1) << 8;
        k = emit(static_cast<std::uint32_t>(m_type & m_price) & m_stock, i, out, k);
    }
    return k + adds_above_soa(type, stock, price, i, stop, key, above, out + k);
}
// --8<-- [end:filter_avx512]
#endif

// --8<-- [start:dispatch]
// Which kernel runs: chosen once, at run time, from what this CPU supports.
enum class Level { Scalar = 0, Avx2 = 1, Avx512 = 2 };

inline Level cpu_level() {
#ifdef TWINMATCH_COLUMNS_X86
    static const Level level =
        (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl"))
            ? Level::Avx512
            : __builtin_cpu_supports("avx2") ? Level::Avx2 : Level::Scalar;
    return level;
#else
    return Level::Scalar;
#endif
}

// The filter over columns [start, stop) at `level` (at most cpu_level(): the binding
// refuses a higher one, which would be an illegal instruction).
inline std::size_t adds_above(const EventColumns& c, std::size_t start,
                              std::size_t stop, std::uint64_t key, std::uint32_t above,
                              Level level, std::int64_t* out) {
    const std::uint8_t* t = c.type.data.get();
    const std::uint64_t* s = c.stock.data.get();
    const std::uint32_t* p = c.price.data.get();
    switch (level) {
#ifdef TWINMATCH_COLUMNS_X86
        case Level::Avx512:
            return adds_above_avx512(t, s, p, start, stop, key, above, out);
        case Level::Avx2:
            return adds_above_avx2(t, s, p, start, stop, key, above, out);
#endif
        default:
            return adds_above_soa(t, s, p, start, stop, key, above, out);
    }
}
// --8<-- [end:dispatch]

// --8<-- [start:vwap]
// The aggregate's join: order_ref -> latest price, open addressing with linear probing,
// sized once (before the loop) to at least twice the refs it can receive, so it never
// grows and never fills.
class PriceTable {
public:
    explicit PriceTable(std::size_t refs) {
        std::size_t cap = 16;
        while (cap < 2 * refs) cap *= 2;
        slots_.assign(cap, Slot{});
        mask_ = cap - 1;
    }
    void set(std::uint64_t ref, std::uint32_t price) {
        Slot& s = find(ref);
        s = {ref, price, 1};
    }
    const std::uint32_t* get(std::uint64_t ref) const {
        const Slot& s = const_cast<PriceTable*>(this)->find(ref);
        return s.used ? &s.price : nullptr;
    }

private:
    struct Slot {
        std::uint64_t ref = 0;
        std::uint32_t price = 0;
        std::uint32_t used = 0;  // a flag, not ref == 0: 0 is a valid (if odd) order_ref
    };
    Slot& find(std::uint64_t ref) {
        // Fibonacci hashing: the multiply spreads sequential refs over the whole table.
        std::size_t i = static_cast<std::size_t>((ref * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
        while (slots_[i].used && slots_[i].ref != ref) i = (i + 1) & mask_;
        return slots_[i];
    }
    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
};

// One locate's running sums; the notional in 128 bits, so no sum can overflow.
struct VwapSums {
    std::uint64_t executions = 0, unpriced = 0, shares = 0;
    unsigned __int128 notional = 0;
};

// The aggregate over any layout: `at(i)` yields row i's (type, order_ref, new_order_ref,
// shares, price, locate). Rows with at least one E go to `out` (room for 65,536), by locate.
template <class Row>
std::size_t vwap(std::size_t n, Row at, VwapRow* out) {
    std::size_t refs = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t t = at(i).type;
        refs += t == 'A' || t == 'F' || t == 'U';
    }
    PriceTable prices(refs);
    std::vector<VwapSums> sums(65536);
    for (std::size_t i = 0; i < n; ++i) {
        const auto r = at(i);
        if (r.type == 'A' || r.type == 'F') {
            prices.set(r.order_ref, r.price);
        } else if (r.type == 'U') {
            prices.set(r.new_order_ref, r.price);  // the new order rests at the new price
        } else if (r.type == 'E') {
            VwapSums& s = sums[r.locate];
            ++s.executions;
            if (const std::uint32_t* p = prices.get(r.order_ref)) {
                s.shares += r.shares;
                s.notional += static_cast<unsigned __int128>(r.shares) * *p;
            } else {
                ++s.unpriced;
            }
        }
    }
    std::size_t k = 0;
    for (std::size_t loc = 0; loc < sums.size(); ++loc) {
        const VwapSums& s = sums[loc];
        if (s.executions == 0) continue;
        VwapRow row{};
        row.locate = static_cast<std::uint16_t>(loc);
        row.executions = s.executions;
        row.unpriced = s.unpriced;
        row.shares = s.shares;
        row.notional_lo = static_cast<std::uint64_t>(s.notional);
        row.notional_hi = static_cast<std::uint64_t>(s.notional >> 64);
        out[k++] = row;
    }
    return k;
}
// --8<-- [end:vwap]

// The fields vwap() reads, from either layout.
struct VwapFields {
    std::uint8_t type;
    std::uint64_t order_ref, new_order_ref;
    std::uint32_t shares, price;
    std::uint16_t locate;
};

inline std::size_t vwap_aos(const ItchEvent* ev, std::size_t n, VwapRow* out) {
    return vwap(n, [ev](std::size_t i) {
        return VwapFields{ev[i].type, ev[i].order_ref, ev[i].new_order_ref, ev[i].shares,
                          ev[i].price, ev[i].locate};
    }, out);
}

inline std::size_t vwap_soa(const EventColumns& c, VwapRow* out) {
    return vwap(c.n, [&c](std::size_t i) {
        return VwapFields{c.type[i], c.order_ref[i], c.new_order_ref[i], c.shares[i],
                          c.price[i], c.locate[i]};
    }, out);
}

}  // namespace twinmatch::columns
