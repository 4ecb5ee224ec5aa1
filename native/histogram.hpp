// A latency histogram with log-linear buckets: the optimized twin of naive/histogram.py
// (same layout, same percentile rule; the layout's constants are also in
// contract/histogram.py, and tests/test_histogram.py checks every boundary).
//
// Recording is a bit count, a shift, an add and an increment into 1,920 counters (15 KiB):
// no division, no range check, no allocation, so every message can be recorded, instead
// of keeping every sample and sorting them at the end.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace twinmatch {

// --8<-- [start:histogram]
// Below 2 * kSubBuckets (64 ns) one bucket per value (exact); above, every power of two
// [2^e, 2^(e+1)) is cut into kSubBuckets equal buckets, so a bucket is at most 1/32 as
// wide as its lowest value: 3.125% relative error at worst, over every uint64 value.
inline constexpr unsigned kSubBucketBits = 5;
inline constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBucketBits;
inline constexpr std::size_t kHistBuckets = (64 - kSubBucketBits) * kSubBuckets + kSubBuckets;
static_assert(kHistBuckets == 1920, "contract/histogram.py says BUCKETS = 1920");

class Histogram {
public:
    static std::size_t bucket_of(std::uint64_t ns) {
        // bit_width: how many low bits to drop to keep 6. On the baseline x86-64 this
        // build targets it is a bsr (bit scan) plus a zero test; lzcnt needs -mlzcnt.
        const unsigned width = static_cast<unsigned>(std::bit_width(ns));
        const unsigned shift = width > kSubBucketBits + 1 ? width - kSubBucketBits - 1 : 0;
        return (std::size_t{shift} << kSubBucketBits) + static_cast<std::size_t>(ns >> shift);
    }
    static std::uint64_t bucket_lowest(std::size_t i) {
        if (i < 2 * kSubBuckets) return i;
        const unsigned shift = static_cast<unsigned>(i >> kSubBucketBits) - 1;
        return static_cast<std::uint64_t>(i - (std::size_t{shift} << kSubBucketBits)) << shift;
    }
    static std::uint64_t bucket_highest(std::size_t i) {  // lowest + width - 1: no wrap
        const std::uint64_t width =
            i < 2 * kSubBuckets ? 1 : std::uint64_t{1} << ((i >> kSubBucketBits) - 1);
        return bucket_lowest(i) + (width - 1);
    }

    void record(std::uint64_t ns) {
        ++counts_[bucket_of(ns)];
        ++count_;
        max_ = std::max(max_, ns);
        min_ = std::min(min_, ns);
        sum_ += ns;  // 128 bits: a sum of uint64 values cannot wrap
    }

    // end - start; an end before its start (two cores' TSCs a few ticks apart) is
    // recorded as 0 and counted, never silently clamped.
    void record_delta(std::uint64_t start, std::uint64_t end) {
        if (end < start) [[unlikely]] {
            ++negative_;
            record(0);
        } else {
            record(end - start);
        }
    }

    // The ppm-th part per million (999'000 is p99.9): the largest value of the bucket
    // holding the rank-th smallest sample, rank = ceil(ppm * count / 10^6) computed in
    // integers (128-bit: ppm * count may pass 2^64), capped at the exact maximum.
    std::uint64_t percentile_ppm(std::uint32_t ppm) const {
        if (ppm > 1'000'000)
            throw std::invalid_argument("percentile must be 0..1,000,000 ppm, got " +
                                        std::to_string(ppm));
        if (count_ == 0) return 0;
        const auto rank = std::max<std::uint64_t>(
            1, static_cast<std::uint64_t>(
                   (static_cast<unsigned __int128>(ppm) * count_ + 999'999) / 1'000'000));
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < kHistBuckets; ++i) {
            seen += counts_[i];
            if (seen >= rank) return std::min(max_, bucket_highest(i));
        }
        return max_;  // unreachable: the counts add up to count_
    }
    // --8<-- [end:histogram]

    void merge(const Histogram& o) {
        for (std::size_t i = 0; i < kHistBuckets; ++i) counts_[i] += o.counts_[i];
        count_ += o.count_;
        sum_ += o.sum_;
        negative_ += o.negative_;
        max_ = std::max(max_, o.max_);
        min_ = std::min(min_, o.min_);
    }

    std::uint64_t count() const { return count_; }
    std::uint64_t negative() const { return negative_; }
    std::uint64_t max() const { return max_; }
    std::uint64_t min() const { return count_ ? min_ : 0; }
    unsigned __int128 sum() const { return sum_; }
    // The mean as both twins compute it: the sum rounded to a double, divided by count.
    double mean() const { return count_ ? static_cast<double>(sum_) / double(count_) : 0.0; }
    const std::array<std::uint64_t, kHistBuckets>& counts() const { return counts_; }

private:
    std::array<std::uint64_t, kHistBuckets> counts_{};
    std::uint64_t count_ = 0, max_ = 0, negative_ = 0;
    unsigned __int128 sum_ = 0;
    std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
};

}  // namespace twinmatch
