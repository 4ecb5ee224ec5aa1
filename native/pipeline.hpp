// The pipeline: parser -> engine -> fill logger as three C++ threads joined by SPSC rings.
// The optimized twin of naive/pipeline.py (threading.Thread + queue.Queue).
//
//   parser  walks the ITCH buffer one record at a time with itch::decode_one
//           (native/itch.hpp), stamps each event when it is decoded, and pushes
//           {event, stamp} (64 bytes, one cache line) into the event ring;
//   engine  pops, applies the event to the many-books Market (native/market.hpp), stamps
//           it matched, and pushes each fill into the fill ring;
//   logger  pops fills and writes the fills CSV with buffered write(2) calls.
//
// Each stage writes only its own state, and each stage's state starts on its own cache
// line; the threads meet only through the rings and a few flags. Where the threads run and
// how they wait is chosen when run() starts, from the CPUs this process may use
// (sched_getaffinity) and the machine's core topology, never from a hard-coded count:
// three pinned spinning threads need three free physical cores; on fewer, spinning
// threads would steal each other's time slices.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
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

// --8<-- [start:topology]
// Which physical core a CPU belongs to: SMT siblings (two hardware threads of one core)
// share a key. Read from sysfs; where it cannot be read, every CPU is its own core.
inline long core_key(int cpu) {
    auto read = [cpu](const char* what) -> long {
        const std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                                 "/topology/" + what;
        std::FILE* f = std::fopen(path.c_str(), "r");
        if (!f) return -1;
        long v = -1;
        if (std::fscanf(f, "%ld", &v) != 1) v = -1;
        std::fclose(f);
        return v;
    };
    const long package = read("physical_package_id"), core = read("core_id");
    if (package < 0 || core < 0) return -1 - cpu;  // unknown: a core of its own
    return package * 65536 + core;
}

// One CPU on each of `want` distinct physical cores, or nothing if there are fewer cores:
// two stages on SMT siblings would share one core's execution units and caches. The core
// of CPU 0 comes last (the kernel does much of its interrupt and timer work on CPU 0),
// and on that core a sibling is taken instead of CPU 0 itself when one is usable.
inline std::vector<int> choose_cpus(const std::vector<int>& cpus, const std::vector<long>& cores,
                                    std::size_t want) {
    struct Core {
        long key;
        int cpu;        // the CPU chosen on this core
        bool has_cpu0;
    };
    std::vector<Core> found;  // distinct cores, in the order of their first CPU
    for (std::size_t i = 0; i < cpus.size() && i < cores.size(); ++i) {
        auto it = std::find_if(found.begin(), found.end(),
                               [&](const Core& c) { return c.key == cores[i]; });
        if (it == found.end()) {
            found.push_back({cores[i], cpus[i], cpus[i] == 0});
        } else {
            it->has_cpu0 |= cpus[i] == 0;
            if (it->cpu == 0) it->cpu = cpus[i];  // a sibling of CPU 0 instead of CPU 0
        }
    }
    std::stable_partition(found.begin(), found.end(), [](const Core& c) { return !c.has_cpu0; });
    if (found.size() < want) return {};
    std::vector<int> pick;
    for (std::size_t i = 0; i < want; ++i) pick.push_back(found[i].cpu);
    return pick;
}
// --8<-- [end:topology]

// Pin the calling thread (each stage pins itself as its first act, before any work).
inline bool pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// --8<-- [start:now_ns]
inline std::uint64_t steady_ns() {
    // steady_clock: monotonic, read through the vDSO (no system call).
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The TSC counts CPU reference cycles; one rdtsc instruction reads it. It is a
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
// as a 32.32 fixed-point multiplier calibrated against steady_clock, so a stamp is one
// rdtsc and one multiply instead of a vDSO call.
struct TscScale {
    std::uint64_t mult = 0, base_tsc = 0, base_ns = 0;  // mult 0: no usable TSC
};

inline TscScale calibrate_tsc() {
    TscScale k;
#if defined(__x86_64__)
    if (!tsc_invariant()) return k;
    // 2 ms of reading both clocks: long enough that the time one read of each takes is a
    // tiny fraction of the interval being compared.
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
    bool allow_tsc = true;              // false: stamps from steady_clock even where the TSC works
    int fail_spawn = 0;                 // tests: starting thread k (1 logger, 2 engine, 3 parser) fails
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

// --8<-- [start:stage_counters]
// Each stage's counters. kStageLines = true (the pipeline): each struct starts on its own
// cache line, so a stage's increments never take a line away from another core. false:
// the same structs packed one after another (the engine's and the parser's per-event
// counters then share a line): the variant chapter 6 benchmarks to show what that costs.
struct EngineCounters {
    std::uint64_t matched = 0, fills_produced = 0, fills_dropped = 0;
    std::uint64_t stalls = 0, stall_ns = 0;
};
struct ParserCounters {
    std::uint64_t records = 0, events = 0, consumed = 0;
    std::uint64_t stalls = 0, stall_ns = 0;
};
struct LoggerCounters {
    std::uint64_t fills_logged = 0, bytes_written = 0;
    int write_errno = 0;
};
template <bool kStageLines>
struct alignas(kCacheLine) StageCounters {
    static constexpr std::size_t kAlign = kStageLines ? kCacheLine : alignof(std::uint64_t);
    alignas(kAlign) EngineCounters engine;
    alignas(kAlign) ParserCounters parser;
    alignas(kAlign) LoggerCounters logger;
};
static_assert(sizeof(StageCounters<true>) == 3 * kCacheLine, "one line per stage");
static_assert(offsetof(StageCounters<false>, parser) < kCacheLine, "packed: parser on line 0");
// --8<-- [end:stage_counters]

template <bool kStageLines = true>
class BasicPipeline {
public:
    explicit BasicPipeline(const PipelineConfig& cfg)
        : cfg_(cfg), clock_(cfg.allow_tsc),
          // capacities are checked before either ring allocates anything
          events_((checked_ring_capacity(cfg.ring_capacity, "ring_capacity"),
                   checked_ring_capacity(cfg.fill_capacity, "fill_capacity"), cfg.ring_capacity),
                  "ring_capacity"),
          fills_(cfg.fill_capacity, "fill_capacity"), market_(cfg.mode) {
        fill_batch_.reserve(1024);
        out_.reserve(kOutBuffer + 256);
    }
    BasicPipeline(const BasicPipeline&) = delete;
    BasicPipeline& operator=(const BasicPipeline&) = delete;

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
    const std::vector<int>& planned() const { return plan_; }   // parser, engine, logger
    const std::vector<int>& pinned_to() const { return pinned_; }
    const void* event_slots() const { return events_.slots_address(); }
    const void* stage_counters() const { return &c_; }

private:
    struct Stamped {              // one ring slot: the event and when it was decoded
        ItchEvent ev;
        std::uint64_t parsed_ns;
    };
    static_assert(sizeof(Stamped) == 64, "one event per cache line");
    static constexpr std::size_t kOutBuffer = 1 << 20;
    enum Stage : std::size_t { kParser = 0, kEngine = 1, kLogger = 2 };

    // a - b for two stamps of one thread: never negative on one core, but an unpinned
    // thread may move between cores between the two reads. Counted, never silent.
    static std::uint64_t since(std::uint64_t t0, std::uint64_t t1, std::uint64_t& backwards) {
        if (t1 >= t0) [[likely]] return t1 - t0;
        ++backwards;
        return 0;
    }

    void decide_placement() {
        cpus_ = usable_cpus();
        std::vector<long> cores;
        for (int c : cpus_) cores.push_back(core_key(c));
        plan_ = choose_cpus(cpus_, cores, 3);  // empty: fewer than 3 physical cores
        placement_ = cfg_.placement;
        // Three pinned spinning threads need three cores. On fewer, parser and engine
        // fused into one thread with only the logger apart avoids the event ring's
        // hand-off entirely (chapter 6's table compares it with three shared threads).
        if (placement_ == Placement::Auto)
            placement_ = plan_.empty() ? Placement::Fused : Placement::Pinned;
        if (placement_ == Placement::Pinned && plan_.empty()) placement_ = Placement::Shared;
        if (placement_ != Placement::Pinned) plan_.clear();
        wait_ = cfg_.wait;
        if (wait_ == WaitKind::Auto)
            wait_ = placement_ == Placement::Pinned ? WaitKind::Spin : WaitKind::Yield;
    }

    // First thing each stage's thread does: pin itself where the plan says.
    void place(Stage s) {
        if (!plan_.empty() && pin_self(plan_[s])) pinned_cpu_[s] = plan_[s];
    }

    // --8<-- [start:parser]
    // Parse one record at buf[off]: itch::decode_one over exactly that record's bytes, so
    // the framing checks and the decoder are the chapter 3 code, without scan()'s per-call
    // dispatch. Returns false at the end of the input, an error, or a stop. `t0` is when
    // this record's parse began: the caller passes the previous record's parsed stamp, so
    // each message costs one clock read here (and one in the engine), not two.
    bool parse_one(const std::uint8_t* buf, std::size_t n, std::size_t& off,
                   Stamped& out, bool& has_event, std::uint64_t t0) {
        ParserCounters& c = c_.parser;
        if (off >= n) return false;
        if (stop_.load(std::memory_order_relaxed) || c.records >= cfg_.stop_after) {
            perr_.stopped = true;
            return false;
        }
        if (n - off < 2) {
            perr_.error = itch::Error::TruncatedPrefix;
            return false;
        }
        const std::size_t record = std::min<std::size_t>(n - off, 2 + itch::be16(buf + off));
        itch::ScanResult r = itch::decode_one(buf + off, record, &out.ev, by_type_.data());
        if (r.error != itch::Error::Ok) {
            perr_.error = r.error;
            perr_.error_type = r.error_type;
            perr_.error_length = r.error_length;
            return false;
        }
        if (r.consumed == 0) {  // the record runs past the end of the buffer
            perr_.error = itch::Error::TruncatedBody;
            return false;
        }
        out.parsed_ns = clock_.now_ns();
        has_event = r.events != 0;
        if (has_event) parse_hist_.record_delta(t0, out.parsed_ns);
        off += r.consumed;
        c.consumed = off;
        ++c.records;
        return true;
    }

    void parser_loop(const std::uint8_t* buf, std::size_t n) {
        // A full ring means the parser is ahead: it may sleep without delaying anything.
        Backoff backoff(wait_, /*may_sleep=*/true);
        ParserCounters& c = c_.parser;
        std::size_t off = 0;
        Stamped s;
        bool has_event = false;
        std::uint64_t t0 = clock_.now_ns();
        while (parse_one(buf, n, off, s, has_event, t0)) {
            t0 = s.parsed_ns;  // the next record's parse starts now
            if (!has_event) continue;  // counted only (unknown and non-book types)
            ++c.events;
            if (!events_.try_push(s)) {  // ring full: the engine is behind; wait for it
                backoff.reset();
                while (!events_.try_push(s)) {
                    if (abort_.load(std::memory_order_relaxed)) return;
                    backoff.wait();
                }
                t0 = clock_.now_ns();  // the wait is a stall, not parsing
                ++c.stalls;
                c.stall_ns += since(s.parsed_ns, t0, perr_.backwards);
            }
        }
    }
    // --8<-- [end:parser]

    // --8<-- [start:engine]
    // Apply one event, stamp it matched, and hand its fills to the logger. Returns when
    // the engine is free again (the matched stamp, or later if it had to wait). The
    // parsed stamp may come from another core's TSC: e2e_hist_ counts a negative delta.
    std::uint64_t match_one(const Stamped& s) {
        EngineCounters& c = c_.engine;
        fill_batch_.clear();
        market_.run(&s.ev, 1, fill_batch_);  // no allocation once fill_batch_ has grown
        const std::uint64_t matched = clock_.now_ns();
        e2e_hist_.record_delta(s.parsed_ns, matched);
        const std::uint64_t stalls = c.stalls;
        for (FillRecord& f : fill_batch_) {
            f.op_index = static_cast<std::uint32_t>(c.matched);  // low 32 bits
            push_fill(f);
        }
        ++c.matched;
        return c.stalls == stalls ? matched : clock_.now_ns();
    }

    void push_fill(const FillRecord& f) {
        EngineCounters& c = c_.engine;
        ++c.fills_produced;
        if (fills_.try_push(f)) return;
        if (cfg_.drop_fills) {  // the drop policy: never wait, count what was lost
            ++c.fills_dropped;
            return;
        }
        // Lossless: wait for the logger, and report how long matching was held up.
        const std::uint64_t t0 = clock_.now_ns();
        Backoff backoff(wait_);
        while (!fills_.try_push(f)) {
            if (abort_.load(std::memory_order_relaxed)) return;
            backoff.wait();
        }
        ++c.stalls;
        c.stall_ns += since(t0, clock_.now_ns(), engine_backwards_);
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
            ++c_.parser.events;
            t0 = match_one(s);  // the next parse starts when this match is done
            if (abort_.load(std::memory_order_relaxed)) return;
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
        ++c_.logger.fills_logged;
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
        LoggerCounters& c = c_.logger;
        std::size_t done = 0;
        while (cfg_.fd >= 0 && done < out_.size() && c.write_errno == 0) {
            ssize_t w = ::write(cfg_.fd, out_.data() + done, out_.size() - done);
            if (w < 0) {
                if (errno == EINTR) continue;
                c.write_errno = errno;
                break;
            }
            done += static_cast<std::size_t>(w);
        }
        c.bytes_written += done;
        out_.clear();
    }

    // Runs f; an exception stops every stage (their waits all watch abort_) and is
    // rethrown by run() after the threads are joined. Two stages may fail at once: the
    // mutex makes the first failure the one kept (off the hot path, so a lock is fine).
    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (...) {
            {
                std::lock_guard<std::mutex> lock(error_mu_);
                if (!error_) error_ = std::current_exception();
            }
            abort_.store(true, std::memory_order_relaxed);
        }
    }

    // A new thread running f, or (tests) the failure std::thread's constructor reports
    // when the system cannot start one.
    template <class F>
    std::jthread spawn(int which, F&& f) {
        if (cfg_.fail_spawn == which)
            throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                    "pipeline: cannot start a thread");
        return std::jthread(std::forward<F>(f));
    }

    void collect();  // the stages' state -> st_, after every thread has been joined

    struct ParserState {          // written by the parser only (besides its counters)
        itch::Error error = itch::Error::Ok;
        std::uint8_t error_type = 0;
        std::uint16_t error_length = 0;
        bool stopped = false;
        std::uint64_t backwards = 0;
    };

    // Read-only while the stages run:
    PipelineConfig cfg_;
    StampClock clock_;
    std::vector<int> cpus_, plan_, pinned_;
    Placement placement_ = Placement::Shared;
    WaitKind wait_ = WaitKind::Yield;
    // The rings (each index on its own line inside):
    SpscRing<Stamped> events_;
    SpscRing<FillRecord> fills_;
    // Per-stage state, each piece starting on its own cache line:
    StageCounters<kStageLines> c_;
    alignas(kCacheLine) std::array<std::uint64_t, 256> by_type_{};  // parser
    alignas(kCacheLine) ParserState perr_;                           // parser
    alignas(kCacheLine) Histogram parse_hist_;                       // parser
    alignas(kCacheLine) Histogram e2e_hist_;                         // engine
    alignas(kCacheLine) Market market_;                              // engine
    alignas(kCacheLine) std::vector<FillRecord> fill_batch_;         // engine
    std::uint64_t engine_backwards_ = 0;                             // engine
    alignas(kCacheLine) std::vector<char> out_;                      // logger
    // Written once by each stage at its start (its own element), read after join:
    alignas(kCacheLine) std::array<int, 3> pinned_cpu_{-1, -1, -1};
    // Each flag on its own line: written once, polled by another thread.
    alignas(kCacheLine) std::atomic<bool> parser_done_{false};
    alignas(kCacheLine) std::atomic<bool> engine_done_{false};
    alignas(kCacheLine) std::atomic<bool> stop_{false};
    alignas(kCacheLine) std::atomic<bool> abort_{false};
    std::mutex error_mu_;
    std::exception_ptr error_;
    PipelineStats st_;
    bool ran_ = false;

public:
    std::uint64_t clock_backwards() const { return perr_.backwards + engine_backwards_; }
};

// --8<-- [start:run]
template <bool kStageLines>
void BasicPipeline<kStageLines>::run(const std::uint8_t* buf, std::size_t n, int fd) {
    if (ran_) throw std::logic_error("a Pipeline runs once");
    ran_ = true;
    cfg_.fd = fd;
    decide_placement();  // the CPUs and cores usable now, not when it was constructed
    const std::uint64_t t0 = clock_.now_ns();
    {
        // jthreads join when they go out of scope, on every path: if starting one throws,
        // the ones already running see abort_ and return, and are joined, instead of a
        // joinable std::thread's destructor calling std::terminate.
        std::jthread logger, engine, parser;
        try {
            logger = spawn(1, [&] {
                place(kLogger);
                guarded([&] { logger_loop(); });
            });
            if (placement_ == Placement::Fused) {
                parser = spawn(3, [&] {
                    place(kParser);
                    guarded([&] { fused_loop(buf, n); });
                    // The release store publishes everything this thread did to the logger.
                    engine_done_.store(true, std::memory_order_release);
                });
            } else {
                engine = spawn(2, [&] {
                    place(kEngine);
                    guarded([&] { engine_loop(); });
                    engine_done_.store(true, std::memory_order_release);
                });
                parser = spawn(3, [&] {
                    place(kParser);
                    guarded([&] { parser_loop(buf, n); });
                    parser_done_.store(true, std::memory_order_release);
                });
            }
        } catch (...) {
            abort_.store(true, std::memory_order_relaxed);
            throw;  // the jthreads above are joined on the way out
        }
    }  // joined here
    // This thread may have moved between cores too (the engine has finished: its counter
    // is ours now).
    st_.seconds_ns = since(t0, clock_.now_ns(), engine_backwards_);
    collect();
    if (error_) std::rethrow_exception(error_);
}
// --8<-- [end:run]

template <bool kStageLines>
void BasicPipeline<kStageLines>::collect() {
    st_.records = c_.parser.records;
    st_.events = c_.parser.events;
    st_.consumed = c_.parser.consumed;
    st_.parser_stalls = c_.parser.stalls;
    st_.parser_stall_ns = c_.parser.stall_ns;
    st_.matched = c_.engine.matched;
    st_.fills_produced = c_.engine.fills_produced;
    st_.fills_dropped = c_.engine.fills_dropped;
    st_.engine_stalls = c_.engine.stalls;
    st_.engine_stall_ns = c_.engine.stall_ns;
    st_.fills_logged = c_.logger.fills_logged;
    st_.bytes_written = c_.logger.bytes_written;
    st_.write_errno = c_.logger.write_errno;
    st_.error = perr_.error;
    st_.error_type = perr_.error_type;
    st_.error_length = perr_.error_length;
    st_.stopped = perr_.stopped;
    st_.by_type = by_type_;
    pinned_.clear();
    for (int cpu : pinned_cpu_)
        if (cpu >= 0) pinned_.push_back(cpu);
}

using Pipeline = BasicPipeline<true>;

}  // namespace twinmatch
