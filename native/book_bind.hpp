// The binding machinery of the order books, shared by native/book_bind.cpp (Book,
// MapBook, the module's book types), native/book_steps_bind.cpp (chapter 1's steps) and
// native/layouts_bind.cpp (chapter 8's layouts).
//
// Two ways in: the per-call API (one Python call per operation, returning Python
// objects; the boundary crossing costs more than the operation itself) and the
// batch API apply(ops), which reads a numpy array of OpRecords in place, runs the
// whole loop in C++ with the GIL released, and returns numpy arrays.
//
// Separate translation units, so that the steps' and the layouts' extra books do not
// change how the compiler inlines Book's own code (its heuristics weigh the size of the
// whole unit). Only those three files include this header, hence the using-directives.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#include "book.hpp"
#include "dtypes.hpp"
#include "map_book.hpp"
#include "records_view.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;

// OrderRejected(ValueError) and BookFull(MemoryError), created in register_book; one
// pair for both translation units (inline variables: one definition in the program).
inline PyObject* g_order_rejected = nullptr;
inline PyObject* g_book_full = nullptr;

namespace {

// --8<-- [start:reject]
// A per-call method that is rejected raises OrderRejected(order_id, reason) without a
// C++ throw (throwing, unwinding and translating cost microseconds): it sets the
// Python error and returns a null object, which nanobind hands back to Python as
// "an exception is set". Methods return nb::object so that they can return null.
nb::object reject(std::uint64_t id, Reason r) {
    PyObject* exc = PyObject_CallFunction(g_order_rejected, "Ks",
                                          static_cast<unsigned long long>(id), reason_name(r));
    if (exc != nullptr) {  // else calling the class failed, and its error is already set
        PyErr_SetObject(g_order_rejected, exc);
        Py_DECREF(exc);
    }
    return nb::object();
}
// --8<-- [end:reject]

// The Python value of a result: moved into a new Python object.
template <class T>
nb::object to_py(T&& v) {
    return nb::cast(std::forward<T>(v), nb::rv_policy::move);
}

// The per-call API takes side as an int so that Side members and plain 0/1 both work;
// anything else is a ValueError, as Side(x) raises in the naive twin.
Side to_side(std::int64_t s) {
    if (s == 0) return Side::Buy;
    if (s == 1) return Side::Sell;
    throw nb::value_error((std::to_string(s) + " is not a valid Side").c_str());
}

// The per-call API converts its integer arguments itself instead of leaving it to
// nanobind's casters: a good int costs the same (one PyLong conversion), and a bad one
// gets the naive twin's one-line TypeError ("order id must be an int in
// 0..18446744073709551615, got None") instead of nanobind's list of signatures. Like
// the casters (and naive's operator.index), it takes anything with __index__: numpy
// integers, bools. The Python names go through nb::sig, so the stubs still say `int`.
[[noreturn]] void bad_int(nb::handle h, const char* name, const char* range) {
    std::string msg = std::string(name) + " must be an int in " + range + ", got ";
    msg += nb::repr(h).c_str();
    throw nb::type_error(msg.c_str());
}

template <class T>
T int_arg(nb::handle h, const char* name) {
    static_assert(std::is_same_v<T, std::uint64_t> || std::is_same_v<T, std::int64_t>);
    constexpr const char* range = std::is_same_v<T, std::uint64_t>
                                      ? "0..18446744073709551615"
                                      : "-9223372036854775808..9223372036854775807";
    PyObject* o = h.ptr();
    nb::object index;  // owns the __index__ result, if one was needed
    if (!PyLong_Check(o)) {
        PyObject* i = PyNumber_Index(o);
        if (i == nullptr) {
            PyErr_Clear();
            bad_int(h, name, range);
        }
        index = nb::steal(i);
        o = i;
    }
    if constexpr (std::is_same_v<T, std::uint64_t>) {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);  // negative: OverflowError
        if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
            PyErr_Clear();
            bad_int(h, name, range);
        }
        return v;
    } else {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            bad_int(h, name, range);
        }
        return v;
    }
}
std::uint64_t id_arg(nb::handle h) { return int_arg<std::uint64_t>(h, "order id"); }
std::int64_t i64_arg(nb::handle h, const char* name) { return int_arg<std::int64_t>(h, name); }

// A book plus what the bindings need around it: the output vectors of apply() (they
// move into the numpy arrays it returns, so each batch allocates new ones before its
// loop starts) and a busy flag, because apply() releases the GIL and another thread
// must not touch the book meanwhile.
template <class B>
struct Bound {
    B book;
    std::vector<FillRecord> fills;
    std::vector<RejectRecord> rejects;
    bool busy = false;

    template <class... A>
    explicit Bound(A... a) : book(a...) {
        fills.reserve(1 << 16);
        rejects.reserve(1 << 10);
    }
    B& idle() {
        // Only read and written with the GIL held, so a plain bool is enough.
        if (busy) throw std::runtime_error("book is busy: apply() is running in another thread");
        return book;
    }
};

// --8<-- [start:sinks]
// Where fills go. A sink that can say how much room it has and make more gets asked,
// before an order changes anything, for room for every fill the order can make
// (Book::reserve_fills), so a sink never has to grow, and fail, in the middle of a
// match.
struct BatchSink {  // the batch loop's: FillRecords tagged with the op's index
    std::vector<FillRecord>& fills;
    const std::uint32_t& at;
    void operator()(const Fill& f) const {
        fills.push_back(FillRecord{f.resting_id, f.aggressor_id, f.price, f.qty, at,
                                   static_cast<std::uint8_t>(f.aggressor_side), {}});
    }
    std::size_t room() const { return fills.capacity() - fills.size(); }
    void reserve(std::size_t n) const {  // at least doubling: a batch regrows O(log) times
        alloc_checkpoint();
        fills.reserve(std::max(fills.size() + n, 2 * fills.capacity()));
    }
};
struct CallSink {  // a per-call method's: the fills of one operation
    std::vector<Fill> fills;
    void operator()(const Fill& f) { fills.push_back(f); }
    std::size_t room() const { return fills.capacity() - fills.size(); }
    void reserve(std::size_t n) {
        alloc_checkpoint();
        fills.reserve(fills.size() + n);
    }
};
// --8<-- [end:sinks]

// --8<-- [start:apply_loop]
// The batch loop: one dispatch per operation, fills and rejects appended to vectors.
// No Python object is touched here; it runs with the GIL released.
// `at` is the index of the op being applied: if one throws (the book is full), the ops
// before it are applied, and their fills and rejects are in the vectors; the op itself
// changed nothing.
template <class B>
void run_ops(B& book, const OpRecord* ops, std::size_t n, std::vector<FillRecord>& fills,
             std::vector<RejectRecord>& rejects, std::uint32_t& at) {
    // How far ahead to prefetch an id's hash slot: far enough for a load from memory
    // to arrive, near enough that the line is still cached when the op comes round.
    // Then, kNodeAhead ops ahead, the order node that slot points to (the nodes mostly
    // sit in L2 already, but an L1 miss still costs cycles, and a cancel's loads depend
    // on each other: slot, node, links).
    constexpr std::size_t kSlotAhead = 16;
    constexpr std::size_t kNodeAhead = 4;
    constexpr std::size_t kOpsAhead = 4096 / sizeof(OpRecord);  // one page ahead
    // Book (not MapBook) hashes each id once, kSlotAhead ops early, and keeps the
    // fingerprint in a small ring until the op itself comes round. If an add makes the
    // id table re-key (see IdHash), every fingerprint changes: the ring is refilled.
    constexpr bool kHinted = requires { book.prefetch_slot(0u); };
    constexpr std::size_t kRing = 32;  // a power of two > kSlotAhead
    static_assert(std::has_single_bit(kRing) && kRing > kSlotAhead &&
                  kSlotAhead > kNodeAhead);
    std::uint32_t fps[kRing];
    std::uint64_t epoch = 0;
    if constexpr (kHinted) {
        epoch = book.hash_epoch();
        for (std::size_t k = 0; k < std::min(n, kSlotAhead); ++k)
            fps[k] = book.fingerprint(ops[k].order_id);
    }
    // After op k: if the table re-keyed, the fingerprints of ops k+1..k+kSlotAhead.
    auto rehint = [&](std::size_t k) {
        if constexpr (kHinted) {
            if (book.hash_epoch() == epoch) [[likely]] return;
            epoch = book.hash_epoch();
            for (std::size_t j = k + 1; j < std::min(n, k + 1 + kSlotAhead); ++j)
                fps[j % kRing] = book.fingerprint(ops[j].order_id);
        }
    };
    // Fills are tagged with the index of the op that made them. The sink is made once,
    // outside the loop: a sink made per op is rebuilt on the stack every time round.
    BatchSink sink{fills, at};
    for (std::size_t k = 0; k < n; ++k) {
        if constexpr (kHinted) {
            // The op stream itself: the hardware prefetcher stops at each 4 KB page
            // boundary, so without a hint the loop may wait for the next page of ops.
            if (k + kOpsAhead < n) __builtin_prefetch(&ops[k + kOpsAhead]);
            if (k + kSlotAhead < n) {
                std::uint32_t fp = book.fingerprint(ops[k + kSlotAhead].order_id);
                fps[(k + kSlotAhead) % kRing] = fp;
                book.prefetch_slot(fp);
            }
            if (k + kNodeAhead < n) book.prefetch_node(fps[(k + kNodeAhead) % kRing]);
        }
        const OpRecord& op = ops[k];
        auto key = [&] {
            if constexpr (kHinted) return Key{op.order_id, fps[k % kRing]};
            else return op.order_id;
        }();
        at = static_cast<std::uint32_t>(k);  // n < 2^32 is checked by the caller
        Reason r;
        std::uint64_t out;
        // The op type is random, so whatever branch picks the code for it is often
        // mispredicted. Add and cancel, 87% of a realistic stream, are picked out by
        // two conditional branches before a switch for the other four.
        bool add = op.op == std::uint8_t(OpCode::Limit);
        if (add || op.op == std::uint8_t(OpCode::Cancel)) {
            if (add) {
                r = op.side > 1 ? Reason::BadSide
                                : book.add_limit(key, Side(op.side), op.price, op.qty, sink);
                rehint(k);
            } else
                r = book.cancel(key, out);
        } else switch (op.op) {
            case std::uint8_t(OpCode::Limit):
            case std::uint8_t(OpCode::Cancel):
                __builtin_unreachable();  // handled above (C++23 spells it std::unreachable())
            case std::uint8_t(OpCode::Market):
                r = op.side > 1 ? Reason::BadSide
                                : book.add_market(op.order_id, Side(op.side), op.qty, out, sink);
                break;
            case std::uint8_t(OpCode::Reduce):
                r = book.reduce(op.order_id, op.qty, out);
                break;
            case std::uint8_t(OpCode::Execute): {
                if (sink.room() == 0) [[unlikely]] sink.reserve(1);  // before the trade
                Fill f;
                r = book.execute(op.order_id, op.qty, f);
                if (r == Reason::Ok) sink(f);
                break;
            }
            case std::uint8_t(OpCode::Replace):
                r = book.replace(op.order_id, op.new_order_id, op.price, op.qty, sink);
                rehint(k);
                break;
            default:
                r = Reason::BadOp;
        }
        if (r != Reason::Ok) [[unlikely]]
            rejects.push_back(RejectRecord{k, static_cast<std::uint8_t>(r), {}});
    }
}
// --8<-- [end:apply_loop]

}  // namespace

// The batch loop of each of chapter 1's book steps, under a plain exported name: the
// module is stripped of its symbol table, and scripts/asm.py finds these (and the
// anchors in native/asm_anchors.cpp) in the dynamic symbol table to disassemble them
// for the book. apply() calls them (once per batch), so the listing is the loop that
// runs. Declared here, defined with TWINMATCH_RUN_OPS: step 5 (Book) in book_bind.cpp,
// the others in book_steps_bind.cpp.
#define TWINMATCH_EXPORT extern "C" __attribute__((visibility("default"), noinline))
#define TWINMATCH_RUN_OPS_SIGNATURE(N)                                                         \
    TWINMATCH_EXPORT void twinmatch_book_step##N##_run_ops(                                   \
        BasicBook<kBookSteps[N].steps>& book, const OpRecord* ops, std::size_t n,              \
        std::vector<FillRecord>& fills, std::vector<RejectRecord>& rejects, std::uint32_t& at)
#define TWINMATCH_RUN_OPS(N) \
    TWINMATCH_RUN_OPS_SIGNATURE(N) { run_ops(book, ops, n, fills, rejects, at); }
TWINMATCH_RUN_OPS_SIGNATURE(0);
TWINMATCH_RUN_OPS_SIGNATURE(1);
TWINMATCH_RUN_OPS_SIGNATURE(2);
TWINMATCH_RUN_OPS_SIGNATURE(3);
TWINMATCH_RUN_OPS_SIGNATURE(4);
TWINMATCH_RUN_OPS_SIGNATURE(5);
static_assert(kBookStepCount == 6, "one TWINMATCH_RUN_OPS_SIGNATURE line per step");
static_assert(std::is_same_v<BasicBook<kBookSteps[5].steps>, Book>);

namespace {

// The loop for a book type: a step's exported one, or (MapBook) the template itself.
template <class B>
void run_loop(B& book, const OpRecord* ops, std::size_t n, std::vector<FillRecord>& fills,
              std::vector<RejectRecord>& rejects, std::uint32_t& at) {
#define TWINMATCH_STEP_CASE(N)                                                                 \
    if constexpr (std::is_same_v<B, BasicBook<kBookSteps[N].steps>>)                           \
        return twinmatch_book_step##N##_run_ops(book, ops, n, fills, rejects, at);
    TWINMATCH_STEP_CASE(0)
    TWINMATCH_STEP_CASE(1)
    TWINMATCH_STEP_CASE(2)
    TWINMATCH_STEP_CASE(3)
    TWINMATCH_STEP_CASE(4)
    TWINMATCH_STEP_CASE(5)
#undef TWINMATCH_STEP_CASE
    run_ops(book, ops, n, fills, rejects, at);
}

// The caller's OPS_DTYPE array, held for the duration of a batch (the naive twin's
// checks, through the same function: see RecordsView), as OpRecords.
struct OpsView {
    RecordsView records;
    const OpRecord* ops;
    std::size_t n;

    explicit OpsView(nb::handle ops_in)
        : records(ops_in, "OPS_DTYPE", "ops"),
          ops(static_cast<const OpRecord*>(records.data())),
          n(records.bytes() / sizeof(OpRecord)) {  // OPS_DTYPE records are sizeof(OpRecord)
        if (n > 0xFFFF'FFFFull)  // FILL_DTYPE.op_index is a uint32
            throw nb::value_error("apply: at most 2^32-1 operations per batch");
    }
};

// --8<-- [start:into_numpy]
// Hand the records in `v` to numpy without copying: the vector moves into a capsule
// that the array owns, so the fills of a big batch are written once, not twice (a copy
// of a fresh array also pays a page fault per 4 KB of it). `v` is left empty; the next
// batch grows a new one.
template <class T>
nb::object into_numpy(std::vector<T>& v, const char* dtype_name) {
    nb::object dtype = nb::module_::import_("contract.dtypes").attr(dtype_name);
    if (v.empty()) return nb::module_::import_("numpy").attr("empty")(0, "dtype"_a = dtype);
    auto* owned = new std::vector<T>(std::move(v));
    v = std::vector<T>();
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>> bytes(
        reinterpret_cast<std::uint8_t*>(owned->data()), {owned->size() * sizeof(T)}, owner);
    return nb::cast(bytes).attr("view")(dtype);
}
// --8<-- [end:into_numpy]

// --8<-- [start:book_full]
// BookFull(message), with .index (the op that could not be applied) and .fills and
// .rejects of the ops before it, which the book has applied: nothing accepted is lost.
[[noreturn]] void raise_book_full(const char* why, std::uint32_t at,
                                  std::vector<FillRecord>& fills,
                                  std::vector<RejectRecord>& rejects) {
    std::string message = std::string(why) + " (at operation " + std::to_string(at) + ")";
    nb::object f = into_numpy(fills, "FILL_DTYPE"), r = into_numpy(rejects, "REJECT_DTYPE");
    nb::object exc = nb::steal(PyObject_CallFunction(g_book_full, "sIOO", message.c_str(),
                                                     static_cast<unsigned>(at), f.ptr(), r.ptr()));
    if (!exc.is_valid()) throw nb::python_error();  // calling the class failed: its error
    PyErr_SetObject(g_book_full, exc.ptr());
    throw nb::python_error();
}
// --8<-- [end:book_full]

// Runs a batch with the GIL released; returns nanoseconds spent in the loop itself.
// If an op throws (the book is full), raises BookFull carrying what the ops before it
// did: the book keeps them, and so must the caller.
template <class B>
double run_batch(Bound<B>& b, const OpsView& ops) {
    b.idle();
    b.fills.clear();
    b.rejects.clear();
    b.rejects.reserve(1 << 10);  // rejects are rare: this many need no growth in the loop
    // Room for one fill per op (a realistic stream has far fewer), so the vector does
    // not regrow, copying what it holds, in the middle of the loop. Only pages that
    // get written are ever touched; the cap bounds the address space reserved.
    b.fills.reserve(std::min<std::size_t>(ops.n, std::size_t(1) << 21));
    b.busy = true;
    std::chrono::steady_clock::duration took{};
    std::uint32_t at = 0;
    try {
        nb::gil_scoped_release nogil;
        auto t0 = std::chrono::steady_clock::now();
        run_loop(b.book, ops.ops, ops.n, b.fills, b.rejects, at);
        took = std::chrono::steady_clock::now() - t0;
    } catch (const std::bad_alloc& e) {  // BookFull, or memory ran out while growing
        b.busy = false;
        raise_book_full(e.what(), at, b.fills, b.rejects);
    } catch (...) {
        b.busy = false;
        throw;
    }
    b.busy = false;
    return std::chrono::duration<double, std::nano>(took).count();
}

nb::object fill_tuple(const Fill& f) {
    return nb::make_tuple(f.resting_id, f.aggressor_id, f.price, f.qty, f.aggressor_side);
}

using DepthTuple = std::tuple<std::uint32_t, std::uint64_t, std::uint32_t>;

// The same Python API for Book and MapBook.
template <class B>
void bind_api(nb::class_<Bound<B>>& cls) {
    using BB = Bound<B>;
    cls.def(
           "add_limit",
           [](BB& b, nb::handle id_, nb::handle side_, nb::handle price_, nb::handle qty_) {
               std::uint64_t id = id_arg(id_);  // in the naive twin's order
               std::int64_t side = i64_arg(side_, "side"), price = i64_arg(price_, "price");
               std::int64_t qty = i64_arg(qty_, "qty");
               Side s = to_side(side);
               CallSink sink;
               Reason r = b.idle().add_limit(id, s, price, qty, sink);
               if (r != Reason::Ok) [[unlikely]] return reject(id, r);
               return to_py(std::move(sink.fills));
           },
           "order_id"_a.none(), "side"_a.none(), "price"_a.none(), "qty"_a.none(),
           nb::sig("def add_limit(self, order_id: int, side: Side | int, price: int, qty: int) "
                   "-> list[Fill]"),
           "Add a limit order; returns the fills it caused (the remainder rests).")
        .def(
            "add_market",
            [](BB& b, nb::handle id_, nb::handle side_, nb::handle qty_) {
                std::uint64_t id = id_arg(id_);
                std::int64_t side = i64_arg(side_, "side"), qty = i64_arg(qty_, "qty");
                Side s = to_side(side);
                CallSink sink;
                std::uint64_t unfilled = 0;
                Reason r = b.idle().add_market(id, s, qty, unfilled, sink);
                if (r != Reason::Ok) [[unlikely]] return reject(id, r);
                return to_py(std::make_pair(std::move(sink.fills), unfilled));
            },
            "order_id"_a.none(), "side"_a.none(), "qty"_a.none(),
            nb::sig("def add_market(self, order_id: int, side: Side | int, qty: int) "
                    "-> tuple[list[Fill], int]"),
            "Sweep the opposite side; returns (fills, unfilled qty). Never rests.")
        .def(
            "cancel",
            [](BB& b, nb::handle id_) {
                std::uint64_t id = id_arg(id_);
                std::uint64_t removed = 0;
                Reason r = b.idle().cancel(id, removed);
                if (r != Reason::Ok) [[unlikely]] return reject(id, r);
                return to_py(removed);
            },
            "order_id"_a.none(), nb::sig("def cancel(self, order_id: int) -> int"),
            "Remove a resting order; returns the qty removed.")
        .def(
            "reduce",
            [](BB& b, nb::handle id_, nb::handle qty_) {
                std::uint64_t id = id_arg(id_);
                std::int64_t qty = i64_arg(qty_, "qty");
                std::uint64_t left = 0;
                Reason r = b.idle().reduce(id, qty, left);
                if (r != Reason::Ok) [[unlikely]] return reject(id, r);
                return to_py(left);
            },
            "order_id"_a.none(), "qty"_a.none(), nb::sig("def reduce(self, order_id: int, qty: int) -> int"),
            "Partially cancel (keeps priority); returns the qty left (0 = removed).")
        .def(
            "execute",
            [](BB& b, nb::handle id_, nb::handle qty_) {
                std::uint64_t id = id_arg(id_);
                std::int64_t qty = i64_arg(qty_, "qty");
                Fill f{};
                Reason r = b.idle().execute(id, qty, f);
                if (r != Reason::Ok) [[unlikely]] return reject(id, r);
                return to_py(f);
            },
            "order_id"_a.none(), "qty"_a.none(), nb::sig("def execute(self, order_id: int, qty: int) -> Fill"),
            "A resting order trades by id (ITCH E/C); returns Fill(order_id, 0, ...).")
        .def(
            "replace",
            [](BB& b, nb::handle old_, nb::handle new_, nb::handle price_, nb::handle qty_) {
                std::uint64_t old_id = id_arg(old_), new_id = id_arg(new_);
                std::int64_t price = i64_arg(price_, "price"), qty = i64_arg(qty_, "qty");
                CallSink sink;
                Reason r = b.idle().replace(old_id, new_id, price, qty, sink);
                if (r != Reason::Ok) [[unlikely]]
                    return reject(r == Reason::DuplicateId ? new_id : old_id, r);
                return to_py(std::move(sink.fills));
            },
            "order_id"_a.none(), "new_order_id"_a.none(), "price"_a.none(), "qty"_a.none(),
            nb::sig("def replace(self, order_id: int, new_order_id: int, price: int, qty: int) "
                    "-> list[Fill]"),
            "The old order leaves; the new one (same side) enters, loses priority, may match.")
        .def(
            "best_bid",
            [](BB& b) -> std::optional<std::pair<std::uint32_t, std::uint64_t>> {
                std::uint64_t q;
                std::uint32_t p = b.idle().best(Side::Buy, q);
                if (p == 0) return std::nullopt;
                return std::make_pair(p, q);
            },
            "(price, total qty) of the highest bid, or None.")
        .def(
            "best_ask",
            [](BB& b) -> std::optional<std::pair<std::uint32_t, std::uint64_t>> {
                std::uint64_t q;
                std::uint32_t p = b.idle().best(Side::Sell, q);
                if (p == 0) return std::nullopt;
                return std::make_pair(p, q);
            },
            "(price, total qty) of the lowest ask, or None.")
        .def(
            "depth",
            [](BB& b, nb::handle side_, nb::handle levels_) {
                std::int64_t levels = i64_arg(levels_, "levels");  // naive checks it first
                Side s = to_side(i64_arg(side_, "side"));
                std::vector<DepthTuple> rows;
                b.idle().depth(s, levels, [&](const DepthRow& r) {
                    rows.emplace_back(r.price, r.qty, r.count);
                });
                return rows;
            },
            "side"_a.none(), "levels"_a.none(),
            nb::sig("def depth(self, side: Side | int, levels: int) "
                    "-> list[tuple[int, int, int]]"),
            "Up to `levels` levels of one side as (price, qty, orders), best first.")
        .def(
            "order",
            [](BB& b, nb::handle id_) -> std::optional<std::tuple<Side, std::uint32_t, std::uint32_t>> {
                std::uint64_t id = id_arg(id_);
                Side s;
                std::uint32_t p, q;
                if (!b.idle().order(id, s, p, q)) return std::nullopt;
                return std::make_tuple(s, p, q);
            },
            "order_id"_a.none(),
            nb::sig("def order(self, order_id: int) -> tuple[Side, int, int] | None"),
            "(side, price, qty left) of a resting order, or None.")
        .def("__len__", [](BB& b) { return b.idle().size(); }, "Number of resting orders.")
        .def(
            "clear", [](BB& b) { b.idle().clear(); },
            "Remove every order, keeping the allocated capacity (for benchmarks).")
        .def(
            "apply",
            [](BB& b, nb::handle ops) {
                OpsView view(ops);
                run_batch(b, view);
                return nb::make_tuple(into_numpy(b.fills, "FILL_DTYPE"),
                                      into_numpy(b.rejects, "REJECT_DTYPE"));
            },
            "ops"_a.none(),
            nb::sig("def apply(self, ops: numpy.typing.NDArray[numpy.void]) -> "
                    "tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]"),
            "Apply an OPS_DTYPE array in C++ with the GIL released; returns\n"
            "(fills: FILL_DTYPE array, rejects: REJECT_DTYPE array). Never raises for a\n"
            "rejected op.")
        .def(
            "apply_ns",
            [](BB& b, nb::handle ops) {
                OpsView view(ops);
                double ns = run_batch(b, view);
                double per_op = view.n ? ns / double(view.n) : 0.0;
                return std::make_tuple(b.fills.size(), b.rejects.size(), per_op);
            },
            "ops"_a.none(),
            nb::sig("def apply_ns(self, ops: numpy.typing.NDArray[numpy.void]) "
                    "-> tuple[int, int, float]"),
            "Like apply, but returns (n_fills, n_rejects, nanoseconds per op), the loop\n"
            "timed inside C++ with std::chrono::steady_clock (no Python, no output arrays).");
}

}  // namespace
