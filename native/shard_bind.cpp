// Python bindings of the sharded market (optimized/shard.py is their documented face).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "read_buffer.hpp"
#include "shard.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;

namespace {

nb::object shard_fills_array(const std::vector<FillRecord>& v) {
    nb::object dtypes = nb::module_::import_("contract.dtypes");
    nb::object np = nb::module_::import_("numpy");
    nb::object a = np.attr("zeros")(v.size(), "dtype"_a = dtypes.attr("FILL_DTYPE"));
    if (!v.empty()) {
        Py_buffer view;
        if (PyObject_GetBuffer(a.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0)
            throw nb::python_error();
        std::memcpy(view.buf, v.data(), v.size() * sizeof(FillRecord));
        PyBuffer_Release(&view);
    }
    return a;
}

struct BoundShard {
    Shard s;
    std::atomic<bool> busy{false};
    explicit BoundShard(const ShardConfig& c) : s(c) {}
    Shard& idle() {
        if (busy.load()) throw std::runtime_error("shard is running");
        return s;
    }
};

// Items 0..items-1 through a BroadcastRing to `readers` threads, each checking that it
// sees every item once, in order. Returns (items each reader saw, all in order).
std::tuple<std::vector<std::uint64_t>, bool> broadcast_stress(std::uint64_t items,
                                                              std::size_t capacity,
                                                              std::size_t readers) {
    BroadcastRing<std::uint64_t> ring(capacity, readers);
    std::vector<std::uint64_t> seen(readers, 0);
    std::vector<char> ok(readers, 1);
    {
        nb::gil_scoped_release nogil;
        std::vector<std::jthread> threads;
        for (std::size_t r = 0; r < readers; ++r)
            threads.emplace_back([&, r] {
                Backoff b(WaitKind::Yield, true);
                std::uint64_t v, n = 0;
                while (n < items) {
                    if (ring.try_read(r, v)) {
                        ok[r] &= v == n;
                        ++n;
                        b.reset();
                    } else {
                        b.wait();
                    }
                }
                seen[r] = n;
            });
        Backoff b(WaitKind::Yield, true);
        for (std::uint64_t i = 0; i < items; ++i) {
            while (!ring.try_publish(i)) b.wait();
            b.reset();
        }
    }
    bool all = true;
    for (char c : ok) all &= c != 0;
    return {seen, all};
}

}  // namespace

void register_shard(nb::module_& m) {
    m.attr("SHARD_WORKERS_MAX") = kMaxShardWorkers;
    m.def("shard_owner", [](std::uint16_t locate, std::size_t n) { return shard_owner(locate, n); },
          "locate"_a, "n"_a, "The worker (0..n-1) that owns a locate.");
    m.def("broadcast_stress", &broadcast_stress, "items"_a, "capacity"_a, "readers"_a,
          "items 0..items-1 through a BroadcastRing to `readers` threads:\n"
          "(items each reader saw, every reader saw them in order).");
    m.def(
        "broadcast_slots_offset",
        [](std::size_t capacity, std::size_t readers) {
            BroadcastRing<ShardSlot> ring(capacity, readers);
            return reinterpret_cast<std::uintptr_t>(ring.slots_address()) % kCacheLine;
        },
        "capacity"_a, "readers"_a,
        "Where a new broadcast ring's slots start, modulo 64 bytes (0: line aligned).");
    nb::class_<BoundShard>(m, "Shard", "One writer, N book workers (native/shard.hpp).")
        .def(
            "__init__",
            [](BoundShard* self, const std::string& mode, const std::string& design,
               std::size_t workers, std::size_t capacity, const std::string& wait,
               bool writer_only) {
                ShardConfig c;
                if (mode == "book") c.mode = Mode::Book;
                else if (mode == "match") c.mode = Mode::Match;
                else throw nb::value_error("mode must be 'book' or 'match'");
                if (design == "broadcast") c.design = ShardDesign::Broadcast;
                else if (design == "routed") c.design = ShardDesign::Routed;
                else throw nb::value_error("design must be 'broadcast' or 'routed'");
                if (wait == "auto") c.wait = WaitKind::Auto;
                else if (wait == "spin") c.wait = WaitKind::Spin;
                else if (wait == "yield") c.wait = WaitKind::Yield;
                else throw nb::value_error("wait must be auto, spin or yield");
                c.workers = workers;
                c.capacity = capacity;
                c.writer_only = writer_only;
                try {
                    new (self) BoundShard(c);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            },
            "mode"_a, "design"_a, "workers"_a, "capacity"_a, "wait"_a, "writer_only"_a)
        .def(
            "run",
            [](BoundShard& b, nb::handle buffer) {
                ReadBuffer in(buffer);
                auto& s = b.idle();
                b.busy.store(true);
                try {
                    nb::gil_scoped_release nogil;
                    s.run(in.data(), in.size());
                } catch (...) {
                    b.busy.store(false);
                    throw;
                }
                b.busy.store(false);
            },
            "buffer"_a, nb::sig("def run(self, buffer: object) -> None"),
            "Decode a bytes-like ITCH buffer and shard it over the workers (GIL released).")
        .def("fills", [](BoundShard& b) { return shard_fills_array(b.idle().merged_fills()); },
             nb::sig("def fills(self) -> numpy.typing.NDArray[numpy.void]"),
             "Every worker's fills in stream order (FILL_DTYPE).")
        .def(
            "raw_counts",
            [](BoundShard& b) {
                const MarketCounts c = b.idle().merged_counts();
                return std::make_tuple(
                    std::vector<std::uint64_t>(c.events.begin(), c.events.end()),
                    std::vector<std::uint64_t>(c.anomalies.begin(), c.anomalies.end()),
                    std::vector<std::uint64_t>(c.rejects.begin(), c.rejects.end()), c.fills,
                    c.volume);
            },
            "(events by type byte, anomalies by kind, rejects by reason, fills, volume), merged.")
        .def(
            "books_csv",
            [](BoundShard& b, std::size_t w) {
                const std::string s = b.idle().market(w).books_csv();
                return nb::str(s.data(), s.size());
            },
            "worker"_a, "One worker's books CSV.")
        .def("live_orders", [](BoundShard& b, std::size_t w) { return b.idle().market(w).live_orders(); },
             "worker"_a)
        .def(
            "stats",
            [](BoundShard& b) {
                Shard& s = b.idle();
                const ShardWriterStats& w = s.writer();
                nb::dict d;
                d["records"] = w.records;
                d["events"] = w.events;
                d["consumed"] = w.consumed;
                d["writer_stalls"] = w.stalls;
                d["routed"] = w.routed;
                d["map_peak"] = w.map_peak;
                d["error"] = static_cast<int>(w.error);
                d["error_type"] = w.error_type;
                d["error_length"] = w.error_length;
                d["seconds"] = static_cast<double>(w.seconds_ns) / 1e9;
                d["by_type"] = std::vector<std::uint64_t>(s.by_type().begin(), s.by_type().end());
                d["wait"] = s.wait_kind() == WaitKind::Spin ? "spin" : "spin-then-yield";
                d["cpus"] = s.cpus();
                nb::list per;
                for (std::size_t i = 0; i < s.built(); ++i) {  // none when writer_only
                    const ShardWorkerStats& ws = s.worker_stats(i);
                    nb::dict one;
                    one["received"] = ws.received;
                    one["applied"] = ws.applied;
                    one["foreign"] = ws.foreign;
                    one["waits"] = ws.waits;
                    one["live_orders"] = s.market(i).live_orders();
                    one["duplicates"] = ws.dups;
                    per.append(one);
                }
                d["workers"] = per;
                d["conflicts"] = w.conflicts;
                return d;
            },
            nb::sig("def stats(self) -> dict[str, typing.Any]"),
            "The writer's and each worker's counts, after run().");
}
