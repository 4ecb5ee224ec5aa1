// Python bindings of the pipeline, the histogram and the ring (optimized/pipeline.py and
// optimized/histogram.py are their documented faces).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
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
struct BoundPipeline {
    Pipeline p;
    std::atomic<bool> busy{false};
    explicit BoundPipeline(const PipelineConfig& c) : p(c) {}
    Pipeline& idle() {
        if (busy.load()) throw std::runtime_error("pipeline is running");
        return p;
    }
};

nb::dict hist_summary(const Histogram& h) {
    nb::dict d;
    d["count"] = h.count();
    d["width_ns"] = h.width();
    d["buckets"] = h.buckets();
    d["overflow"] = h.overflow();
    d["min"] = h.min();
    d["max"] = h.max();
    d["mean"] = h.count() ? double(h.sum()) / double(h.count()) : 0.0;
    for (auto [name, p] : {std::pair{"p50", 50.0}, {"p90", 90.0}, {"p99", 99.0},
                           {"p99.9", 99.9}})
        d[name] = h.percentile(p);
    return d;
}

// Two threads pass `items` counting numbers through a ring of `capacity`: the consumer
// checks that each arrives in order. Returns (received, in_order, seconds).
std::tuple<std::uint64_t, bool, double> ring_stress(std::uint64_t items, std::size_t capacity,
                                                    const std::string& wait) {
    SpscRing<std::uint64_t> ring(capacity);
    WaitKind w = to_wait(wait) == WaitKind::Spin ? WaitKind::Spin : WaitKind::Yield;
    std::uint64_t received = 0;
    bool ok = true;
    auto t0 = std::chrono::steady_clock::now();
    {
        nb::gil_scoped_release nogil;
        std::thread consumer([&] {
            Backoff b(w);
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
        Backoff b(w);
        for (std::uint64_t i = 0; i < items; ++i) {
            while (!ring.try_push(i)) b.wait();
            b.reset();
        }
        consumer.join();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {received, ok, s};
}

}  // namespace

void register_pipeline(nb::module_& m) {
    m.def("usable_cpus", &usable_cpus, "The CPUs this process may run on (sched_getaffinity).");
    m.def("ring_stress", &ring_stress, "items"_a, "capacity"_a, "wait"_a = "yield",
          "Pass `items` numbers through an SpscRing between two threads: "
          "(received, in_order, seconds).");

    nb::class_<Histogram>(m, "Histogram", "Fixed-width latency buckets (native/histogram.hpp).")
        .def(nb::init<std::uint64_t, std::uint64_t>(), "width_ns"_a, "buckets"_a)
        .def("record", &Histogram::record, "ns"_a)
        .def(
            "record_many",
            [](Histogram& h, U64In values) {
                const std::uint64_t* v = values.data();
                for (std::size_t i = 0; i < values.shape(0); ++i) h.record(v[i]);
            },
            "values"_a, "Record every value of a uint64 array.")
        .def("percentile", &Histogram::percentile, "p"_a)
        .def("summary", &hist_summary,
             nb::sig("def summary(self) -> dict[str, typing.Any]"),
             "count, layout, overflow, min, max, mean and p50 p90 p99 p99.9 (ns).")
        .def_prop_ro("width_ns", &Histogram::width)
        .def_prop_ro("buckets", &Histogram::buckets)
        .def_prop_ro("count", &Histogram::count)
        .def_prop_ro("overflow", &Histogram::overflow)
        .def_prop_ro("max", &Histogram::max)
        .def("counts", [](const Histogram& h) { return h.counts(); });

    nb::class_<BoundPipeline>(m, "Pipeline", "parser -> engine -> logger (native/pipeline.hpp).")
        .def(
            "__init__",
            [](BoundPipeline* self, const std::string& mode, std::size_t ring_capacity,
               std::size_t fill_capacity, bool drop_fills, std::uint64_t logger_delay_ns,
               std::uint64_t stop_after, const std::string& placement, const std::string& wait,
               std::uint64_t hist_width_ns, std::uint64_t hist_buckets) {
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
                c.hist_width_ns = hist_width_ns;
                c.hist_buckets = hist_buckets;
                try {
                    new (self) BoundPipeline(c);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            },
            "mode"_a, "ring_capacity"_a, "fill_capacity"_a, "drop_fills"_a,
            "logger_delay_ns"_a, "stop_after"_a, "placement"_a, "wait"_a, "hist_width_ns"_a,
            "hist_buckets"_a)
        .def(
            "run",
            [](BoundPipeline& b, nb::handle buffer, int fd) {
                View in(buffer);
                Pipeline& p = b.idle();
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
        .def("stop", [](BoundPipeline& b) { b.p.stop(); },
             "Stop parsing at the next record (any thread); the rest still drains.")
        .def(
            "stats",
            [](BoundPipeline& b) {
                Pipeline& p = b.idle();
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
                        by_type[nb::str(std::string(1, static_cast<char>(t)).c_str())] =
                            s.by_type[static_cast<std::size_t>(t)];
                d["by_type"] = by_type;
                d["parse"] = hist_summary(p.parse_hist());
                d["e2e"] = hist_summary(p.e2e_hist());
                d["placement"] = placement_name(p.placement());
                d["clock"] = p.clock().name();
                d["wait"] = p.wait_kind() == WaitKind::Spin ? "spin" : "spin-then-yield";
                d["cpus"] = p.cpus();
                d["pinned"] = p.pinned_to();
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
            [](BoundPipeline& b, const std::string& which) {
                Pipeline& p = b.idle();
                if (which == "parse") return p.parse_hist().counts();
                if (which == "e2e") return p.e2e_hist().counts();
                throw nb::value_error("which must be 'parse' or 'e2e'");
            },
            "which"_a, "The bucket counts of one histogram ('parse' or 'e2e').");
}
