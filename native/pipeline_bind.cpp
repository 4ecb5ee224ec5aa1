// Python bindings of the pipeline, the histogram and the ring (optimized/pipeline.py and
// optimized/histogram.py are their documented faces).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "feed_text.hpp"
#include "histogram.hpp"
#include "pipeline.hpp"
#include "read_buffer.hpp"
#include "ring.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;

namespace {

using View = twinmatch::ReadBuffer;  // native/read_buffer.hpp

using U64In = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

Placement to_placement(const std::string& s) {
    if (s == "auto") return Placement::Auto;
    if (s == "pinned") return Placement::Pinned;
    if (s == "shared") return Placement::Shared;
    if (s == "fused") return Placement::Fused;
    throw nb::value_error("placement must be auto, pinned, shared or fused");
}
WaitKind to_wait(const std::string& s) {
    if (s == "auto") return WaitKind::Auto;
    if (s == "spin") return WaitKind::Spin;
    if (s == "yield") return WaitKind::Yield;
    throw nb::value_error("wait must be auto, spin or yield");
}
const char* placement_name(Placement p) {
    switch (p) {
        case Placement::Pinned: return "pinned";
        case Placement::Fused: return "fused";
        default: return "shared";
    }
}

// The pipeline and a busy flag: run() releases the GIL; nothing but stop() may touch the
// pipeline meanwhile.
template <bool kStageLines>
struct BoundPipeline {
    BasicPipeline<kStageLines> p;
    std::atomic<bool> busy{false};
    explicit BoundPipeline(const PipelineConfig& c) : p(c) {}
    BasicPipeline<kStageLines>& idle() {
        if (busy.load()) throw std::runtime_error("pipeline is running");
        return p;
    }
};

nb::dict hist_summary(const Histogram& h) {
    nb::dict d;
    d["count"] = h.count();
    d["layout"] = "log-linear, " + std::to_string(kSubBuckets) + " sub-buckets per power of two";
    d["sub_buckets"] = kSubBuckets;
    d["min"] = h.min();
    d["max"] = h.max();
    d["mean"] = h.mean();
    d["negative"] = h.negative();
    for (auto [name, ppm] : {std::pair{"p50", 500'000u}, {"p90", 900'000u}, {"p99", 990'000u},
                             {"p99.9", 999'000u}})
        d[name] = h.percentile_ppm(ppm);
    return d;
}

std::uint64_t offset_in_line(const void* p) {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p) % kCacheLine);
}

// Two threads pass `items` counting numbers through a ring of `capacity`: the consumer
// checks that each arrives in order. Returns (received, in_order, seconds).
template <class Ring = SpscRing<std::uint64_t>>
std::tuple<std::uint64_t, bool, double> ring_stress(std::uint64_t items, std::size_t capacity,
                                                    const std::string& wait) {
    Ring ring(capacity);
    // "spin": pause only; "yield": spin, then yield; "sleep": spin, yield, then sleep
    // 50 us at a time (the pipeline logger's wait). "auto" is "yield" here.
    if (wait != "spin" && wait != "yield" && wait != "sleep" && wait != "auto")
        throw nb::value_error("wait must be spin, yield, sleep or auto");
    const bool sleep = wait == "sleep";
    const WaitKind w = wait == "spin" ? WaitKind::Spin : WaitKind::Yield;
    std::uint64_t received = 0;
    bool ok = true;
    auto t0 = std::chrono::steady_clock::now();
    {
        nb::gil_scoped_release nogil;
        std::thread consumer([&] {
            Backoff b(w, sleep);
            std::uint64_t v;
            while (received < items) {
                if (ring.try_pop(v)) {
                    ok &= v == received;
                    ++received;
                    b.reset();
                } else {
                    b.wait();
                }
            }
        });
        Backoff b(w, sleep);
        for (std::uint64_t i = 0; i < items; ++i) {
            while (!ring.try_push(i)) b.wait();
            b.reset();
        }
        consumer.join();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {received, ok, s};
}

template <bool kStageLines>
void bind_pipeline(nb::module_& m, const char* name) {
    using Bound = BoundPipeline<kStageLines>;
    nb::class_<Bound>(m, name,
                      kStageLines ? "parser -> engine -> logger (native/pipeline.hpp)."
                                  : "The same pipeline with the stages' counters packed\n"
                                    "together (the false-sharing benchmark's variant).")
        .def(
            "__init__",
            [](Bound* self, const std::string& mode, std::size_t ring_capacity,
               std::size_t fill_capacity, bool drop_fills, std::uint64_t logger_delay_ns,
               std::uint64_t stop_after, const std::string& placement, const std::string& wait,
               int fail_spawn) {
                PipelineConfig c;
                if (mode == "book") c.mode = Mode::Book;
                else if (mode == "match") c.mode = Mode::Match;
                else throw nb::value_error("mode must be 'book' or 'match'");
                c.ring_capacity = ring_capacity;
                c.fill_capacity = fill_capacity;
                c.drop_fills = drop_fills;
                c.logger_delay_ns = logger_delay_ns;
                c.stop_after = stop_after;
                c.placement = to_placement(placement);
                c.wait = to_wait(wait);
                c.fail_spawn = fail_spawn;
                try {
                    new (self) Bound(c);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            },
            "mode"_a, "ring_capacity"_a, "fill_capacity"_a, "drop_fills"_a,
            "logger_delay_ns"_a, "stop_after"_a, "placement"_a, "wait"_a, "fail_spawn"_a = 0)
        .def(
            "run",
            [](Bound& b, nb::handle buffer, int fd) {
                View in(buffer);
                auto& p = b.idle();
                b.busy.store(true);
                try {
                    nb::gil_scoped_release nogil;
                    p.run(in.data(), in.size(), fd);
                } catch (...) {
                    b.busy.store(false);
                    throw;
                }
                b.busy.store(false);
            },
            "buffer"_a, "fd"_a,
            nb::sig("def run(self, buffer: object, fd: int) -> None"),
            "Run a bytes-like ITCH buffer through the stages (GIL released); fd -1 discards.")
        .def("stop", [](Bound& b) { b.p.stop(); },
             "Stop parsing at the next record (any thread); the rest still drains.")
        .def(
            "stats",
            [](Bound& b) {
                auto& p = b.idle();
                const PipelineStats& s = p.stats();
                nb::dict d;
                d["records"] = s.records;
                d["events"] = s.events;
                d["matched"] = s.matched;
                d["fills_produced"] = s.fills_produced;
                d["fills_logged"] = s.fills_logged;
                d["fills_dropped"] = s.fills_dropped;
                d["parser_stalls"] = s.parser_stalls;
                d["parser_stall_ns"] = s.parser_stall_ns;
                d["engine_stalls"] = s.engine_stalls;
                d["engine_stall_ns"] = s.engine_stall_ns;
                d["clock_backwards"] = p.clock_backwards();
                d["bytes_written"] = s.bytes_written;
                d["seconds"] = double(s.seconds_ns) / 1e9;
                d["consumed"] = s.consumed;
                d["error"] = static_cast<int>(s.error);
                d["error_type"] = static_cast<int>(s.error_type);
                d["error_length"] = static_cast<int>(s.error_length);
                d["stopped"] = s.stopped;
                d["write_errno"] = s.write_errno;
                nb::dict by_type;
                for (int t = 0; t < 256; ++t)
                    if (s.by_type[static_cast<std::size_t>(t)])
                        by_type[nb::str(type_key(t).c_str())] =
                            s.by_type[static_cast<std::size_t>(t)];
                d["by_type"] = by_type;
                d["parse"] = hist_summary(p.parse_hist());
                d["e2e"] = hist_summary(p.e2e_hist());
                d["placement"] = placement_name(p.placement());
                d["clock"] = p.clock().name();
                d["wait"] = p.wait_kind() == WaitKind::Spin ? "spin" : "spin-then-yield";
                d["cpus"] = p.cpus();
                d["planned"] = p.planned();
                d["pinned"] = p.pinned_to();
                d["event_slots_offset"] = offset_in_line(p.event_slots());
                d["stage_counters_offset"] = offset_in_line(p.stage_counters());
                d["stage_lines"] = kStageLines;
                const MarketCounts& c = p.market().counts();
                d["anomalies"] = std::vector<std::uint64_t>(c.anomalies.begin(), c.anomalies.end());
                d["rejects"] = std::vector<std::uint64_t>(c.rejects.begin(), c.rejects.end());
                d["volume"] = c.volume;
                d["live_orders"] = p.market().live_orders();
                d["books"] = p.market().books();
                return d;
            },
            nb::sig("def stats(self) -> dict[str, typing.Any]"),
            "Counts, stalls, drops, histograms' summaries and the placement, after run().")
        .def(
            "hist_counts",
            [](Bound& b, const std::string& which) {
                auto& p = b.idle();
                const Histogram* h = nullptr;
                if (which == "parse") h = &p.parse_hist();
                else if (which == "e2e") h = &p.e2e_hist();
                else throw nb::value_error("which must be 'parse' or 'e2e'");
                return std::vector<std::uint64_t>(h->counts().begin(), h->counts().end());
            },
            "which"_a, "The bucket counts of one histogram ('parse' or 'e2e').");
}

}  // namespace

void register_pipeline(nb::module_& m) {
    m.def("usable_cpus", &usable_cpus, "The CPUs this process may run on (sched_getaffinity).");
    m.def("ring_stress", &ring_stress<>, "items"_a, "capacity"_a, "wait"_a = "yield",
          "Pass `items` numbers through an SpscRing between two threads:\n"
          "(received, in_order, seconds). wait: spin, yield (spin then yield),\n"
          "sleep (spin, yield, then 50 us sleeps) or auto (= yield).");
    // Chapter 6's ablation: the same, with the ring's cached indices and separate cache
    // lines switched on or off (SpscRing's template parameters).
    m.def(
        "ring_stress_variant",
        [](std::uint64_t items, std::size_t capacity, const std::string& wait, bool cached,
           bool own_lines) {
            using V = std::uint64_t;
            if (cached && own_lines) return ring_stress<SpscRing<V, true, true>>(items, capacity, wait);
            if (cached) return ring_stress<SpscRing<V, true, false>>(items, capacity, wait);
            if (own_lines) return ring_stress<SpscRing<V, false, true>>(items, capacity, wait);
            return ring_stress<SpscRing<V, false, false>>(items, capacity, wait);
        },
        "items"_a, "capacity"_a, "wait"_a, "cached_indices"_a, "own_lines"_a,
        "ring_stress with SpscRing's cached indices and separate cache lines on or off.");

    // Chapter 7's clocks: `reads` stamps in a row from one clock, timed by the caller.
    // The sum keeps the compiler from dropping the reads; the name says which clock ran
    // (the TSC only where it is invariant: else steady_clock, as the pipeline does).
    m.def(
        "clock_reads",
        [](const std::string& clock, std::uint64_t reads) {
            if (clock != "tsc" && clock != "steady_clock")
                throw nb::value_error("clock must be 'tsc' or 'steady_clock'");
            const StampClock c(clock == "tsc");
            nb::gil_scoped_release release;
            std::uint64_t sum = 0;
            for (std::uint64_t i = 0; i < reads; ++i) sum += c.now_ns();
            return std::make_pair(sum, std::string(c.name()));
        },
        "clock"_a, "reads"_a,
        "Read a clock `reads` times in a C++ loop: (sum of the stamps, the clock's name).");

    m.attr("HIST_SUB_BUCKET_BITS") = kSubBucketBits;
    m.attr("HIST_BUCKETS") = kHistBuckets;
    m.attr("RING_CAPACITY_MAX") = kRingCapacityMax;
    m.def("choose_cpus", &choose_cpus, "cpus"_a, "cores"_a, "want"_a,
          "One CPU on each of `want` distinct physical cores (cores[i]: cpus[i]'s\n"
          "core), CPU 0's core last; [] if there are fewer cores.");
    m.def("core_key", &core_key, "cpu"_a, "The physical core of a CPU, from sysfs.");
    m.def(
        "ring_slots_offset",
        [](std::size_t capacity) {
            struct Line {
                std::uint8_t b[64];
            };
            SpscRing<Line> ring(capacity);
            return offset_in_line(ring.slots_address());
        },
        "capacity"_a, "Where a new ring's slots start, modulo 64 bytes (0: line aligned).");

    nb::class_<Histogram>(m, "Histogram", "Log-linear latency buckets (native/histogram.hpp).")
        .def(nb::init<>())
        .def("record", &Histogram::record, "ns"_a)
        .def("record_delta", &Histogram::record_delta, "start"_a, "end"_a)
        .def(
            "record_many",
            [](Histogram& h, U64In values) {
                const std::uint64_t* v = values.data();
                for (std::size_t i = 0; i < values.shape(0); ++i) h.record(v[i]);
            },
            "values"_a, "Record every value of a uint64 array.")
        .def("percentile_ppm",
             [](const Histogram& h, std::uint32_t ppm) {
                 try {
                     return h.percentile_ppm(ppm);
                 } catch (const std::invalid_argument& e) {
                     throw nb::value_error(e.what());
                 }
             },
             "ppm"_a)
        .def("summary", &hist_summary,
             nb::sig("def summary(self) -> dict[str, typing.Any]"),
             "count, layout, min, max, mean, negative and p50 p90 p99 p99.9 (ns).")
        .def_static("bucket_of", &Histogram::bucket_of, "ns"_a)
        .def_static("bucket_lowest", &Histogram::bucket_lowest, "i"_a)
        .def_static("bucket_highest", &Histogram::bucket_highest, "i"_a)
        .def_prop_ro("count", &Histogram::count)
        .def_prop_ro("negative", &Histogram::negative)
        .def_prop_ro("max", &Histogram::max)
        .def_prop_ro("min", &Histogram::min)
        .def_prop_ro("sum_parts",
                     [](const Histogram& h) {
                         return std::pair<std::uint64_t, std::uint64_t>(
                             static_cast<std::uint64_t>(h.sum() >> 64),
                             static_cast<std::uint64_t>(h.sum()));
                     },
                     "The 128-bit sum as (high, low) 64-bit halves.")
        .def("counts", [](const Histogram& h) {
            return std::vector<std::uint64_t>(h.counts().begin(), h.counts().end());
        });

    bind_pipeline<true>(m, "Pipeline");
    bind_pipeline<false>(m, "PackedPipeline");
}
