// Python bindings of chapter 8's layouts (native/layouts.hpp): one class per layout,
// with Book's API (book_bind.hpp's bind_api and batch loop), and layout_latency(), the
// per-operation latency histogram measured inside C++ with the TSC.
#include "book_bind.hpp"
#include "histogram.hpp"
#include "layouts.hpp"
#include "pipeline.hpp"  // calibrate_tsc(): the TSC's rate, measured against steady_clock

#include <nanobind/stl/map.h>

using namespace twinmatch::layouts;

// --8<-- [start:counted]
// The batch loop of each layout under plain exported names, so that valgrind can find
// them in the dynamic symbol table and count only what runs inside them (tests/bench/
// test_bench_layouts.py: callgrind --toggle-collect on these names), without Python's
// start-up and the set-up around them. Four copies per layout ("slots"), one per
// workload, so that one valgrind run can count every layout on every workload and tell
// the counts apart by function name.
#define TWINMATCH_LAYOUT_COUNTED(NAME, LAYOUT, SLOT)                                   \
    extern "C" __attribute__((visibility("default"), noipa)) void                      \
        twinmatch_layout_##NAME##_counted_##SLOT(                                      \
            LayoutBook<LAYOUT>& book, const OpRecord* ops, std::size_t n,              \
            std::vector<FillRecord>& fills, std::vector<RejectRecord>& rejects,        \
            std::uint32_t& at) {                                                       \
        run_ops(book, ops, n, fills, rejects, at);                                     \
    }
#define TWINMATCH_LAYOUT_SLOTS(NAME, LAYOUT)   \
    TWINMATCH_LAYOUT_COUNTED(NAME, LAYOUT, 0)  \
    TWINMATCH_LAYOUT_COUNTED(NAME, LAYOUT, 1)  \
    TWINMATCH_LAYOUT_COUNTED(NAME, LAYOUT, 2)  \
    TWINMATCH_LAYOUT_COUNTED(NAME, LAYOUT, 3)
TWINMATCH_LAYOUT_SLOTS(map, MapLayout)
TWINMATCH_LAYOUT_SLOTS(vector, VectorLayout)
TWINMATCH_LAYOUT_SLOTS(window, WindowLayout)
TWINMATCH_LAYOUT_SLOTS(bitmap3, Bitmap3Layout)
TWINMATCH_LAYOUT_SLOTS(treap, TreapLayout)
TWINMATCH_LAYOUT_SLOTS(capped, CappedLayout)
#undef TWINMATCH_LAYOUT_SLOTS
#undef TWINMATCH_LAYOUT_COUNTED
// --8<-- [end:counted]

namespace {

inline constexpr int kCountedSlots = 4;

template <class Lay>
void counted(int slot, LayoutBook<Lay>& book, const OpRecord* ops, std::size_t n,
             std::vector<FillRecord>& fills, std::vector<RejectRecord>& rejects,
             std::uint32_t& at) {
#define TWINMATCH_LAYOUT_CASE(NAME, LAYOUT)                                                        \
    if constexpr (std::is_same_v<Lay, LAYOUT>) {                                                   \
        switch (slot) {                                                                            \
            case 0: return twinmatch_layout_##NAME##_counted_0(book, ops, n, fills, rejects, at); \
            case 1: return twinmatch_layout_##NAME##_counted_1(book, ops, n, fills, rejects, at); \
            case 2: return twinmatch_layout_##NAME##_counted_2(book, ops, n, fills, rejects, at); \
            default: return twinmatch_layout_##NAME##_counted_3(book, ops, n, fills, rejects, at); \
        }                                                                                          \
    }
    TWINMATCH_LAYOUT_CASE(map, MapLayout)
    TWINMATCH_LAYOUT_CASE(vector, VectorLayout)
    TWINMATCH_LAYOUT_CASE(window, WindowLayout)
    TWINMATCH_LAYOUT_CASE(bitmap3, Bitmap3Layout)
    TWINMATCH_LAYOUT_CASE(treap, TreapLayout)
    TWINMATCH_LAYOUT_CASE(capped, CappedLayout)
#undef TWINMATCH_LAYOUT_CASE
}

// --8<-- [start:latency]
// Reads of the time stamp counter that neither run ahead of the operation before them
// nor let the operation after them start early: lfence waits until every earlier
// instruction has finished. Without it the CPU overlaps consecutive operations and a
// per-operation stamp measures the overlap, not the operation.
inline std::uint64_t stamp() {
#if defined(__x86_64__)
    _mm_lfence();
    std::uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#else
    return steady_ns();
#endif
}

// Time every operation of a batch: a stamp before and after each, the difference minus
// the timer's own cost (the median of many back-to-back stamp pairs with nothing
// between them), converted to nanoseconds, into a Histogram. Each op runs through the
// batch loop itself (run_ops with n = 1), so it does what apply() does.
template <class B>
std::map<std::string, double> latency(Bound<B>& b, const OpsView& ops) {
    static const TscScale scale = calibrate_tsc();  // mult 0: no usable TSC (stamps are ns)
    auto to_ns = [&](std::uint64_t ticks) -> std::uint64_t {
        if (scale.mult == 0) return ticks;
        return static_cast<std::uint64_t>((static_cast<unsigned __int128>(ticks) * scale.mult) >> 32);
    };
    std::vector<std::uint64_t> empty(4096);
    for (auto& e : empty) {
        std::uint64_t t0 = stamp();
        e = stamp() - t0;
    }
    std::nth_element(empty.begin(), empty.begin() + empty.size() / 2, empty.end());
    const std::uint64_t overhead = empty[empty.size() / 2];

    b.idle();
    b.fills.clear();
    b.rejects.clear();
    b.fills.reserve(1 << 16);
    Histogram h;
    std::uint32_t at = 0;
    b.busy = true;  // the GIL is released: another thread must not touch the book
    try {
        nb::gil_scoped_release nogil;
        for (std::size_t k = 0; k < ops.n; ++k) {
            if (b.fills.size() > (1u << 15)) b.fills.clear();  // outside the timed part
            if (b.rejects.size() > (1u << 15)) b.rejects.clear();
            std::uint64_t t0 = stamp();
            run_ops(b.book, ops.ops + k, 1, b.fills, b.rejects, at);
            std::uint64_t t1 = stamp();
            std::uint64_t d = t1 - t0;
            h.record(to_ns(d > overhead ? d - overhead : 0));
        }
    } catch (...) {  // the book is full (a MemoryError): the ops before it were applied
        b.busy = false;
        throw;
    }
    b.busy = false;
    b.fills.clear();
    b.rejects.clear();
    return {{"count", double(h.count())},
            {"p50_ns", double(h.percentile_ppm(500'000))},
            {"p99_ns", double(h.percentile_ppm(990'000))},
            {"p999_ns", double(h.percentile_ppm(999'000))},
            {"max_ns", double(h.max())},
            {"mean_ns", h.mean()},
            {"timer_overhead_ns", double(to_ns(overhead))},
            {"tsc", scale.mult != 0 ? 1.0 : 0.0}};
}
// --8<-- [end:latency]

template <class Lay>
void bind_layout(nb::module_& m, const char* name, const char* doc) {
    using B = LayoutBook<Lay>;
    nb::class_<Bound<B>> cls(m, name, doc);
    if constexpr (B::kCapped) {
        cls.def(
            "__init__",
            [](Bound<B>* self, std::uint64_t price_cap, std::uint64_t id_cap, std::uint32_t max_orders) {
                new (self) Bound<B>(B::kDefaultOrders, max_orders, Options{price_cap, id_cap});
            },
            "price_cap"_a = Options{}.price_cap, "id_cap"_a = Options{}.id_cap,
            "max_orders"_a = B::kMaxOrders);
        cls.def_prop_ro("price_cap", [](Bound<B>& b) { return b.book.price_cap(); },
                        "Prices 1 .. price_cap-1 are accepted; others are bad_price.");
        cls.def_prop_ro("id_cap", [](Bound<B>& b) { return b.book.id_cap(); },
                        "Ids 0 .. id_cap-1 are accepted; others are unknown_id.");
    } else {
        cls.def(nb::init<std::uint32_t, std::uint32_t>(), "initial_orders"_a = B::kDefaultOrders,
                "max_orders"_a = B::kMaxOrders);
    }
    bind_api<B>(cls);
    cls.def(
        "run_counted",
        [](Bound<B>& b, nb::handle ops, int slot) {
            if (slot < 0 || slot >= kCountedSlots)
                throw nb::value_error("slot must be in 0..3");
            OpsView view(ops);
            b.idle();
            b.fills.clear();
            b.rejects.clear();
            b.fills.reserve(std::min<std::size_t>(view.n, std::size_t(1) << 21));
            b.rejects.reserve(1 << 10);
            std::uint32_t at = 0;
            counted(slot, b.book, view.ops, view.n, b.fills, b.rejects, at);
            return std::make_tuple(b.fills.size(), b.rejects.size());
        },
        "ops"_a.none(), "slot"_a = 0,
        nb::sig("def run_counted(self, ops: numpy.typing.NDArray[numpy.void], slot: int = 0) "
                "-> tuple[int, int]"),
        "Like apply (the same loop), through this layout's exported\n"
        "twinmatch_layout_<name>_counted_<slot> (slot 0..3), for valgrind; returns\n"
        "(n_fills, n_rejects).");
    cls.def(
        "latency",
        [](Bound<B>& b, nb::handle ops) {
            OpsView view(ops);
            return latency(b, view);
        },
        "ops"_a.none(),
        nb::sig("def latency(self, ops: numpy.typing.NDArray[numpy.void]) -> dict[str, float]"),
        "Apply an OPS_DTYPE array one op at a time, each timed with the TSC (the timer's\n"
        "own cost subtracted) into a histogram; returns count, p50_ns, p99_ns, p999_ns,\n"
        "max_ns, mean_ns, timer_overhead_ns and tsc (1.0 if the TSC was used).");
}

}  // namespace

void register_layouts(nb::module_& m) {
    bind_layout<MapLayout>(m, "LayoutMap", "Chapter 8: the book over a std::map of levels.");
    bind_layout<VectorLayout>(m, "LayoutVector",
                              "Chapter 8: the book over a sorted vector of levels (best last).");
    bind_layout<WindowLayout>(m, "LayoutWindow",
                              "Chapter 8: a flat window of levels + hierarchical bitset.");
    bind_layout<Bitmap3Layout>(m, "LayoutBitmap3",
                               "Chapter 8: a flat window of levels + a fixed 3-level bitmap.");
    bind_layout<TreapLayout>(m, "LayoutTreap", "Chapter 8: the book over an intrusive treap.");
    bind_layout<CappedLayout>(m, "LayoutCapped",
                              "Chapter 8: levels by raw price, orders by raw id; refuses\n"
                              "prices >= price_cap (bad_price) and ids >= id_cap (unknown_id).");
}
