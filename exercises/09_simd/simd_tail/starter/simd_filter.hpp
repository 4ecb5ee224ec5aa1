// Exercise 09_simd/simd_tail: finish an AVX2 filter.
//
// `filter_scalar` is chapter 9's filter over three columns (given: the reference).
// `filter_avx2` does 8 rows per step, and has two bugs for you to fix:
//   1. it compares prices as *signed* 32-bit integers (AVX2 has no unsigned compare), so
//      every price of 2^31 or more looks negative;
//   2. it stops at the last whole step of 8 and drops the rest: write the tail.
// The checker runs it on every start and stop of a 100-row column, with prices around
// 2^31, under AddressSanitizer: a tail that loads 8 rows where fewer are left reads past
// the end of the array, which is undefined behaviour, and ASan stops the program.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace ex09 {

// Rows [start, stop): every add ('A' or 'F') of stock `key` priced above `above`.
inline std::size_t filter_scalar(const std::uint8_t* type, const std::uint64_t* stock,
                                 const std::uint32_t* price, std::size_t start,
                                 std::size_t stop, std::uint64_t key, std::uint32_t above,
                                 std::int64_t* out) {
    std::size_t k = 0;
    for (std::size_t i = start; i < stop; ++i) {
        const bool add = type[i] == 'A' || type[i] == 'F';
        const bool hit = add & (stock[i] == key) & (price[i] > above);
        out[k] = static_cast<std::int64_t>(i);
        k += hit;
    }
    return k;
}

// Compiled for AVX2 whatever the flags; the harness only calls it when the CPU has AVX2.
__attribute__((target("avx2")))
inline std::size_t filter_avx2(const std::uint8_t* type, const std::uint64_t* stock,
                               const std::uint32_t* price, std::size_t start,
                               std::size_t stop, std::uint64_t key, std::uint32_t above,
                               std::int64_t* out) {
    const __m256i keys = _mm256_set1_epi64x(static_cast<long long>(key));
    // TODO (1): this limit and the compare below are signed.
    const __m256i limit = _mm256_set1_epi32(static_cast<int>(above));
    const __m128i a = _mm_set1_epi8('A'), f = _mm_set1_epi8('F');
    std::size_t k = 0, i = start;
    for (; i + 8 <= stop; i += 8) {
        // Unaligned loads (loadu): `start` can be any row, so the addresses can be too.
        const __m128i t = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(type + i));
        const __m128i is_add = _mm_or_si128(_mm_cmpeq_epi8(t, a), _mm_cmpeq_epi8(t, f));
        const unsigned m_type = static_cast<unsigned>(_mm_movemask_epi8(is_add)) & 0xFF;
        const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(price + i));
        const __m256i gt = _mm256_cmpgt_epi32(p, limit);
        const unsigned m_price = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(gt)));
        const __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(stock + i));
        const __m256i s1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(stock + i + 4));
        const unsigned m0 = static_cast<unsigned>(
            _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(s0, keys))));
        const unsigned m1 = static_cast<unsigned>(
            _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(s1, keys))));
        unsigned m = m_type & m_price & (m0 | m1 << 4);  // bit j set: row i + j matches
        while (m != 0) {
            out[k++] = static_cast<std::int64_t>(i + static_cast<unsigned>(__builtin_ctz(m)));
            m &= m - 1;  // clear the lowest set bit
        }
    }
    // TODO (2): rows [i, stop) are fewer than 8 and still unfiltered.
    return k;
}

}  // namespace ex09
