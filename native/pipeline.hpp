// The pipeline: parser -> engine -> fill logger as three C++ threads joined by SPSC rings.
// The optimized twin of naive/pipeline.py (threading.Thread + queue.Queue).
//
//   parser  walks the ITCH buffer one record at a time with itch::scan (native/itch.hpp),
//           stamps each event when it is decoded, and pushes {event, stamp} (64 bytes,
//           one cache line) into the event ring;
//   engine  pops, applies the event to the many-books Market (native/market.hpp), stamps
//           it matched, and pushes each fill into the fill ring;
//   logger  pops fills and writes the fills CSV with buffered write(2) calls.
//
// No two threads share a lock or a written cache line except through the rings. Where the
// threads run and how they wait is chosen at run time from the CPUs this process may use
// (sched_getaffinity), never from a hard-coded count: three pinned spinning threads need
// three free cores; on fewer, spinning threads would steal each other's time slices.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "dtypes.hpp"
#include "histogram.hpp"
#include "itch.hpp"
#include "market.hpp"
#include "ring.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <x86intrin.h>
#endif

namespace twinmatch {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();  // tells the core this is a spin loop: saves power, frees the sibling
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// The CPUs this process may run on, read now (taskset, cgroups and containers all
// shrink it), in ascending order.
inline std::vector<int> usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

inline bool pin_thread(std::thread& t, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t.native_handle(), sizeof set, &set) == 0;
}

// --8<-- [start:now_ns]
inline std::uint64_t steady_ns() {
    // steady_clock: monotonic, read through the vDSO (~20 ns, no system call).
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The TSC counts CPU reference cycles; one rdtsc instruction (a few ns) reads it. It is a
// clock only where it is invariant: it ticks at one rate whatever the core's frequency or
// sleep state (cpuid leaf 0x80000007, EDX bit 8; Linux shows it as constant_tsc +
// nonstop_tsc). Anywhere else (or off x86) the stamps come from steady_clock.
inline bool tsc_invariant() {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1u;
#else
    return false;
#endif
}

// Stamps in nanoseconds. With an invariant TSC: ticks since a base, scaled by ns per tick
// as a 32.32 fixed-point multiplier measured against steady_clock, so a stamp costs one
// rdtsc and one multiply instead of a vDSO call.
struct TscScale {
    std::uint64_t mult = 0, base_tsc = 0, base_ns = 0;  // mult 0: no usable TSC
};

inline TscScale calibrate_tsc() {
    TscScale k;
#if defined(__x86_64__)
    if (!tsc_invariant()) return k;
    // ~2 ms: long enough that the two clocks' read costs (tens of ns) are < 0.01% of it.
    const std::uint64_t s0 = steady_ns(), t0 = __rdtsc();
    std::uint64_t s1 = s0, t1 = t0;
    while (s1 - s0 < 2'000'000) {
        s1 = steady_ns();
        t1 = __rdtsc();
    }
    if (t1 <= t0) return k;
    k.mult = static_cast<std::uint64_t>((static_cast<unsigned __int128>(s1 - s0) << 32) /
                                        (t1 - t0));
    k.base_tsc = t1;
    k.base_ns = s1;
#endif
    return k;
}

class StampClock {
public:
    explicit StampClock(bool allow_tsc = true) {
        if (!allow_tsc) return;
        // The TSC's rate is a property of the machine: measure it once per process (a
        // function-local static is initialised once, thread-safely), not once per run.
        static const TscScale scale = calibrate_tsc();
        k_ = scale;
        tsc_ = k_.mult != 0;
    }
    bool tsc() const { return tsc_; }
    const char* name() const { return tsc_ ? "tsc" : "std::chrono::steady_clock"; }

    std::uint64_t now_ns() const {
#if defined(__x86_64__)
        if (tsc_) [[likely]] {
            // unsigned __int128: ticks x multiplier can pass 2^64 after a few seconds.
            const std::uint64_t ticks = __rdtsc() - k_.base_tsc;
            return k_.base_ns + static_cast<std::uint64_t>(
                (static_cast<unsigned __int128>(ticks) * k_.mult) >> 32);
        }
#endif
        return steady_ns();
    }

private:
    bool tsc_ = false;
    TscScale k_;
};
// --8<-- [end:now_ns]

// Placement: three pinned threads; three threads left to the OS scheduler; or the parser
// and engine fused into one thread (no event ring at all) with the logger on its own.
enum class Placement : std::uint8_t { Auto = 0, Pinned = 1, Shared = 2, Fused = 3 };
// Wait: spin (pause) forever, or spin a little then give the core away (yield, and for
// the logger, which is off the hot path, a short sleep after a while).
enum class WaitKind : std::uint8_t { Auto = 0, Spin = 1, Yield = 2 };

// --8<-- [start:backoff]
class Backoff {
public:
    explicit Backoff(WaitKind kind, bool may_sleep = false) : kind_(kind), sleep_(may_sleep) {}
    void reset() { n_ = 0; }
    void wait() {
        ++n_;
        if (kind_ == WaitKind::Spin || n_ < kSpins) {
            cpu_relax();
        } else if (!sleep_ || n_ < kSpins + kYields) {
            std::this_thread::yield();  // another runnable thread on this core goes first
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

private:
    static constexpr std::uint32_t kSpins = 128, kYields = 1024;
    WaitKind kind_;
    bool sleep_;
    std::uint32_t n_ = 0;
};
// --8<-- [end:backoff]

struct PipelineConfig {
    Mode mode = Mode::Match;
    std::size_t ring_capacity = 4096;   // events between parser and engine
    std::size_t fill_capacity = 4096;   // fills between engine and logger
    bool drop_fills = false;            // false: lossless (the engine waits)
    std::uint64_t logger_delay_ns = 0;  // tests: a deliberately slow logger, per fill
    std::uint64_t stop_after = ~std::uint64_t{0};  // stop after this many records
    Placement placement = Placement::Auto;
    WaitKind wait = WaitKind::Auto;
    std::uint64_t hist_width_ns = 20;
    std::uint64_t hist_buckets = 500'000;  // 20 ns x 500,000 = 10 ms, then overflow
    bool allow_tsc = true;              // false: stamps from steady_clock even where the TSC works
    int fd = -1;                        // set by run(): where the logger writes
};

struct PipelineStats {
    std::uint64_t records = 0;          // framed messages parsed (all types)
    std::uint64_t events = 0;           // events handed to the engine
    std::uint64_t matched = 0;          // events the engine applied
    std::uint64_t fills_produced = 0, fills_logged = 0, fills_dropped = 0;
    std::uint64_t parser_stalls = 0, parser_stall_ns = 0;  // event ring full
    std::uint64_t engine_stalls = 0, engine_stall_ns = 0;  // fill ring full (lossless)
    std::uint64_t bytes_written = 0;
    std::uint64_t seconds_ns = 0;       // first record parsed .. last fill logged
    std::uint64_t consumed = 0;         // bytes of whole records parsed
    itch::Error error = itch::Error::Ok;
    std::uint8_t error_type = 0;
    std::uint16_t error_length = 0;
    bool stopped = false;               // stop() or stop_after ended the feed early
    int write_errno = 0;
    std::array<std::uint64_t, 256> by_type{};
};

class Pipeline {
public:
    explicit Pipeline(const PipelineConfig& cfg)
        : cfg_(cfg), clock_(cfg.allow_tsc), market_(cfg.mode),
          events_(cfg.ring_capacity), fills_(cfg.fill_capacity),
          parse_hist_(cfg.hist_width_ns, cfg.hist_buckets),
          e2e_hist_(cfg.hist_width_ns, cfg.hist_buckets) {
        fill_batch_.reserve(1024);
        out_.reserve(kOutBuffer + 256);
        decide_placement();
    }

    // Any thread, any time: the parser stops at the next record; everything already
    // parsed still flows through the engine and the logger.
    void stop() { stop_.store(true, std::memory_order_relaxed); }

    // Run the whole buffer through the three stages; returns when every ring is drained.
    // The logger appends the fills CSV rows to file descriptor fd (-1: format, discard).
    void run(const std::uint8_t* buf, std::size_t n, int fd = -1);

    const PipelineStats& stats() const { return st_; }
    const Histogram& parse_hist() const { return parse_hist_; }
    const Histogram& e2e_hist() const { return e2e_hist_; }
    const Market& market() const { return market_; }
    const StampClock& clock() const { return clock_; }
    Placement placement() const { return placement_; }
    WaitKind wait_kind() const { return wait_; }
    const std::vector<int>& cpus() const { return cpus_; }
    const std::vector<int>& pinned_to() const { return pinned_; }

private:
    struct Stamped {              // one ring slot: the event and when it was decoded
        ItchEvent ev;
        std::uint64_t parsed_ns;
    };
    static_assert(sizeof(Stamped) == 64, "one event per cache line");
    static constexpr std::size_t kOutBuffer = 1 << 20;

    // t1 - t0, or 0 if t1 is earlier: two cores' TSCs may disagree by a few ticks, and a
    // wrapped difference would land in the overflow bucket.
    static std::uint64_t elapsed(std::uint64_t t0, std::uint64_t t1) {
        return t1 > t0 ? t1 - t0 : 0;
    }

    void decide_placement() {
        cpus_ = usable_cpus();
        placement_ = cfg_.placement;
        // Three pinned spinning threads need three cores. On fewer, the fastest honest
        // choice measured (chapter 6) is to fuse parser and engine into one thread and
        // keep only the logger apart.
        if (placement_ == Placement::Auto)
            placement_ = cpus_.size() >= 3 ? Placement::Pinned : Placement::Fused;
        if (placement_ == Placement::Pinned && cpus_.size() < 3) placement_ = Placement::Shared;
        wait_ = cfg_.wait;
        if (wait_ == WaitKind::Auto)
            wait_ = placement_ == Placement::Pinned ? WaitKind::Spin : WaitKind::Yield;
    }

    // --8<-- [start:parser]
    // Parse one record at buf[off]: itch::decode_one over exactly that record's bytes, so
    // the framing checks and the decoder are the chapter 3 code, without scan()'s per-call
    // dispatch. Returns false at the end of
    // the input, an error, or a stop. `t0` is when this record's parse began: the caller
    // passes the previous record's parsed stamp, so each message costs one clock read
    // here (and one in the engine), not two.
    bool parse_one(const std::uint8_t* buf, std::size_t n, std::size_t& off,
                   Stamped& out, bool& has_event, std::uint64_t t0) {
        if (off >= n) return false;
        if (stop_.load(std::memory_order_relaxed) || st_.records >= cfg_.stop_after) {
            st_.stopped = true;
            return false;
        }
        if (n - off < 2) {
            st_.error = itch::Error::TruncatedPrefix;
            return false;
        }
        const std::size_t record = std::min<std::size_t>(n - off, 2 + itch::be16(buf + off));
        itch::ScanResult r = itch::decode_one(buf + off, record, &out.ev, st_.by_type.data());
        if (r.error != itch::Error::Ok) {
            st_.error = r.error;
            st_.error_type = r.error_type;
            st_.error_length = r.error_length;
            return false;
        }
        if (r.consumed == 0) {  // the record runs past the end of the buffer
            st_.error = itch::Error::TruncatedBody;
            return false;
        }
        out.parsed_ns = clock_.now_ns();
        has_event = r.events != 0;
        if (has_event) parse_hist_.record(elapsed(t0, out.parsed_ns));
        off += r.consumed;
        st_.consumed = off;
        ++st_.records;
        return true;
    }

    void parser_loop(const std::uint8_t* buf, std::size_t n) {
        // A full ring means the parser is ahead: it may sleep without delaying anything.
        Backoff backoff(wait_, /*may_sleep=*/true);
        std::size_t off = 0;
        Stamped s;
        bool has_event = false;
        std::uint64_t t0 = clock_.now_ns();
        while (parse_one(buf, n, off, s, has_event, t0)) {
            t0 = s.parsed_ns;  // the next record's parse starts now
            if (!has_event) continue;  // counted only (unknown and non-book types)
            ++st_.events;
            if (!events_.try_push(s)) {  // ring full: the engine is behind; wait for it
                backoff.reset();
                while (!events_.try_push(s)) {
                    if (abort_.load(std::memory_order_relaxed)) return;
                    backoff.wait();
                }
                t0 = clock_.now_ns();  // the wait is a stall, not parsing
                ++st_.parser_stalls;
                st_.parser_stall_ns += t0 - s.parsed_ns;
            }
        }
    }
    // --8<-- [end:parser]

    // --8<-- [start:engine]
    // Apply one event, stamp it matched, and hand its fills to the logger. Returns when
    // the engine is free again (the matched stamp, or later if it had to wait).
    std::uint64_t match_one(const Stamped& s) {
        fill_batch_.clear();
        market_.run(&s.ev, 1, fill_batch_);  // no allocation once fill_batch_ has grown
        const std::uint64_t matched = clock_.now_ns();
        e2e_hist_.record(elapsed(s.parsed_ns, matched));
        const std::uint64_t stalls = st_.engine_stalls;
        for (FillRecord& f : fill_batch_) {
            f.op_index = static_cast<std::uint32_t>(st_.matched);  // low 32 bits
            push_fill(f);
        }
        ++st_.matched;
        return st_.engine_stalls == stalls ? matched : clock_.now_ns();
    }

    void push_fill(const FillRecord& f) {
        ++st_.fills_produced;
        if (fills_.try_push(f)) return;
        if (cfg_.drop_fills) {  // the drop policy: never wait, count what was lost
            ++st_.fills_dropped;
            return;
        }
        // Lossless: wait for the logger, and report how long matching was held up.
        const std::uint64_t t0 = clock_.now_ns();
        Backoff backoff(wait_);
        while (!fills_.try_push(f)) {
            if (abort_.load(std::memory_order_relaxed)) return;
            backoff.wait();
        }
        ++st_.engine_stalls;
        st_.engine_stall_ns += clock_.now_ns() - t0;
    }

    void engine_loop() {
        Backoff backoff(wait_);
        Stamped s;
        for (;;) {
            if (events_.try_pop(s)) {
                match_one(s);
                backoff.reset();
                continue;
            }
            // Empty. Only when the parser has finished *and* a last look finds the ring
            // still empty is the engine done: the acquire pairs with the parser's release,
            // so every event pushed before `parser_done_` is visible to that last look.
            if (parser_done_.load(std::memory_order_acquire)) {
                if (events_.try_pop(s)) {
                    match_one(s);
                    continue;
                }
                return;
            }
            if (abort_.load(std::memory_order_relaxed)) return;
            backoff.wait();
        }
    }
    // --8<-- [end:engine]

    // Parser and engine in one thread: no event ring, no hand-off.
    void fused_loop(const std::uint8_t* buf, std::size_t n) {
        std::size_t off = 0;
        Stamped s;
        bool has_event = false;
        std::uint64_t t0 = clock_.now_ns();
        while (parse_one(buf, n, off, s, has_event, t0)) {
            t0 = s.parsed_ns;
            if (!has_event) continue;
            ++st_.events;
            t0 = match_one(s);  // the next parse starts when this match is done
        }
    }

    // --8<-- [start:logger]
    void log_fill(const FillRecord& f) {
        if (cfg_.logger_delay_ns) {  // tests: a slow disk, simulated by a busy wait
            const std::uint64_t until = clock_.now_ns() + cfg_.logger_delay_ns;
            while (clock_.now_ns() < until) cpu_relax();
        }
        char line[96];
        char* p = line;
        char* const end = line + sizeof line;
        p = std::to_chars(p, end, f.resting_id).ptr;
        *p++ = ',';
        p = std::to_chars(p, end, f.aggressor_id).ptr;
        *p++ = ',';
        p = std::to_chars(p, end, f.price).ptr;
        *p++ = ',';
        p = std::to_chars(p, end, f.qty).ptr;
        *p++ = ',';
        *p++ = static_cast<char>('0' + (f.aggressor_side & 1));
        *p++ = '\n';
        out_.insert(out_.end(), line, p);
        if (out_.size() >= kOutBuffer) flush();
        ++st_.fills_logged;
    }

    void logger_loop() {
        Backoff backoff(wait_, /*may_sleep=*/true);  // off the hot path: may sleep
        FillRecord f;
        for (;;) {
            if (fills_.try_pop(f)) {
                log_fill(f);
                backoff.reset();
                continue;
            }
            if (engine_done_.load(std::memory_order_acquire)) {
                if (fills_.try_pop(f)) {
                    log_fill(f);
                    continue;
                }
                break;
            }
            if (abort_.load(std::memory_order_relaxed)) break;
            backoff.wait();
        }
        flush();
    }
    // --8<-- [end:logger]

    void flush() {
        std::size_t done = 0;
        while (cfg_.fd >= 0 && done < out_.size() && st_.write_errno == 0) {
            ssize_t w = ::write(cfg_.fd, out_.data() + done, out_.size() - done);
            if (w < 0) {
                if (errno == EINTR) continue;
                st_.write_errno = errno;
                break;
            }
            done += static_cast<std::size_t>(w);
        }
        st_.bytes_written += done;
        out_.clear();
    }

    // Runs f; an exception stops every stage (their waits all watch abort_) and is
    // rethrown by run() after the threads are joined.
    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (...) {
            error_ = std::current_exception();
            abort_.store(true, std::memory_order_relaxed);
        }
    }

    PipelineConfig cfg_;
    StampClock clock_;
    Market market_;
    SpscRing<Stamped> events_;
    SpscRing<FillRecord> fills_;
    Histogram parse_hist_, e2e_hist_;
    std::vector<FillRecord> fill_batch_;
    std::vector<char> out_;
    PipelineStats st_;
    std::vector<int> cpus_, pinned_;
    Placement placement_ = Placement::Shared;
    WaitKind wait_ = WaitKind::Yield;
    // Each flag on its own line: written once, polled by another thread.
    alignas(kCacheLine) std::atomic<bool> parser_done_{false};
    alignas(kCacheLine) std::atomic<bool> engine_done_{false};
    alignas(kCacheLine) std::atomic<bool> stop_{false};
    alignas(kCacheLine) std::atomic<bool> abort_{false};
    std::exception_ptr error_;
    bool ran_ = false;
};

// --8<-- [start:run]
inline void Pipeline::run(const std::uint8_t* buf, std::size_t n, int fd) {
    if (ran_) throw std::logic_error("a Pipeline runs once");
    ran_ = true;
    cfg_.fd = fd;
    const std::uint64_t t0 = clock_.now_ns();
    std::thread logger([&] { guarded([&] { logger_loop(); }); });
    std::thread engine, parser;
    if (placement_ == Placement::Fused) {
        parser = std::thread([&] {
            guarded([&] { fused_loop(buf, n); });
            // The release store publishes everything this thread did to the logger.
            engine_done_.store(true, std::memory_order_release);
        });
    } else {
        engine = std::thread([&] {
            guarded([&] { engine_loop(); });
            engine_done_.store(true, std::memory_order_release);
        });
        parser = std::thread([&] {
            guarded([&] { parser_loop(buf, n); });
            parser_done_.store(true, std::memory_order_release);
        });
    }
    if (placement_ == Placement::Pinned) {  // parser, engine, logger on distinct cores
        std::thread* order[3] = {&parser, &engine, &logger};
        for (std::size_t i = 0; i < 3; ++i)
            if (order[i]->joinable() && pin_thread(*order[i], cpus_[i])) pinned_.push_back(cpus_[i]);
    }
    parser.join();
    if (engine.joinable()) engine.join();
    logger.join();
    st_.seconds_ns = clock_.now_ns() - t0;
    if (error_) std::rethrow_exception(error_);
}
// --8<-- [end:run]

}  // namespace twinmatch
