// A latency histogram with fine fixed-width buckets and an explicit overflow bucket: the
// optimized twin of naive/histogram.py (same layout, same percentile rule).
//
// Recording is one division, one bounds check and one increment: cheap enough to do for
// every message on the hot path, unlike keeping every sample and sorting at the end.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <limits>
#include <stdexcept>
#include <vector>

namespace twinmatch {

// --8<-- [start:histogram]
class Histogram {
public:
    // Bucket i counts values in [i * width, (i + 1) * width); values >= buckets * width
    // go to the overflow bucket. max_ remembers the largest value exactly.
    Histogram(std::uint64_t width_ns, std::uint64_t buckets) : width_(width_ns), n_(buckets) {
        if (width_ns == 0 || buckets == 0 || buckets > (std::uint64_t{1} << 26))
            throw std::invalid_argument("histogram: width >= 1 ns, 1..2^26 buckets");
        // calloc, not a zero-filled vector: the OS hands out zeroed pages on first touch,
        // so the buckets a run never reaches cost neither a memset nor a page fault.
        counts_.reset(static_cast<std::uint64_t*>(std::calloc(buckets, sizeof(std::uint64_t))));
        if (!counts_) throw std::bad_alloc();
    }

    void record(std::uint64_t ns) {
        const std::uint64_t i = ns / width_;
        if (i < n_) [[likely]] ++counts_[i];
        else ++overflow_;
        ++count_;
        max_ = std::max(max_, ns);
        min_ = std::min(min_, ns);
        sum_ += ns;
    }

    // The p-th percentile (0 < p <= 100): the upper edge of the bucket holding the
    // ceil(p/100 * count)-th smallest value, never more than the exact maximum. So the
    // true value lies at most one bucket width below the answer. In the overflow bucket
    // all we know is the maximum, and that is what we say.
    std::uint64_t percentile(double p) const {
        if (count_ == 0) return 0;
        p = std::clamp(p, 0.0, 100.0);
        auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * double(count_)));
        rank = std::clamp<std::uint64_t>(rank, 1, count_);
        std::uint64_t seen = 0;
        for (std::uint64_t i = 0; i < n_; ++i) {
            seen += counts_[i];
            if (seen >= rank) return std::min(max_, (i + 1) * width_);
        }
        return max_;  // in the overflow bucket
    }
    // --8<-- [end:histogram]

    void merge(const Histogram& o) {
        if (o.width_ != width_ || o.n_ != n_)
            throw std::invalid_argument("histogram: different layouts");
        for (std::uint64_t i = 0; i < n_; ++i) counts_[i] += o.counts_[i];
        overflow_ += o.overflow_;
        count_ += o.count_;
        sum_ += o.sum_;
        max_ = std::max(max_, o.max_);
        min_ = std::min(min_, o.min_);
    }

    std::uint64_t width() const { return width_; }
    std::uint64_t buckets() const { return n_; }
    std::uint64_t count() const { return count_; }
    std::uint64_t overflow() const { return overflow_; }
    std::uint64_t max() const { return max_; }
    std::uint64_t min() const { return count_ ? min_ : 0; }
    std::uint64_t sum() const { return sum_; }
    std::vector<std::uint64_t> counts() const { return {counts_.get(), counts_.get() + n_}; }

private:
    struct Free {
        void operator()(std::uint64_t* p) const { std::free(p); }
    };
    std::uint64_t width_, n_;
    std::unique_ptr<std::uint64_t[], Free> counts_;
    std::uint64_t overflow_ = 0, count_ = 0, max_ = 0, sum_ = 0;
    std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
};

}  // namespace twinmatch
