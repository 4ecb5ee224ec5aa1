// Python bindings of the input journal (optimized/journal.py wraps them): the writer,
// the reader's checks, CRC-32, and SnapshotBook, the chapter 1 Book with a way to list
// its resting orders in queue order, which a snapshot needs and the Book binding does
// not expose.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cerrno>
#include <stdexcept>
#include <cstdint>
#include <string>
#include <vector>

#include "book.hpp"
#include "dtypes.hpp"
#include "journal.hpp"
#include "records_view.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch;

namespace {

// The records in `v` as a numpy array of contract.dtypes' `dtype_name`, without a copy:
// the vector moves into a capsule the array owns.
template <class T>
nb::object to_numpy(std::vector<T>& v, const char* dtype_name) {
    nb::object dtype = nb::module_::import_("contract.dtypes").attr(dtype_name);
    if (v.empty()) return nb::module_::import_("numpy").attr("empty")(0, "dtype"_a = dtype);
    auto* owned = new std::vector<T>(std::move(v));
    v = std::vector<T>();
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>> bytes(
        reinterpret_cast<std::uint8_t*>(owned->data()), {owned->size() * sizeof(T)}, owner);
    return nb::cast(bytes).attr("view")(dtype);
}

[[noreturn]] void raise_errno(int e, const std::string& path) {
    errno = e;
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
    throw nb::python_error();
}

// A flag set while a call runs with the GIL released, so that a second thread cannot
// use the same object meanwhile (it is only read and written with the GIL held).
struct Busy {
    bool& flag;
    explicit Busy(bool& f) : flag(f) {
        if (flag) throw std::runtime_error("journal: busy in another thread");
        flag = true;
    }
    ~Busy() { flag = false; }
};

// Raise an exception of contract.journal (its class makes the words both twins use).
template <class... Args>
[[noreturn]] void raise_contract(const char* name, Args&&... args) {
    nb::object exc = nb::module_::import_("contract.journal").attr(name)(args...);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    throw nb::python_error();
}

struct BoundWriter {
    journal::Writer w;
    std::string path;
    bool busy = false;
    void check(int e) {
        if (e != 0) raise_errno(e, path);
    }
    // The writer, if it may take records: not closed, not failed, not busy elsewhere.
    journal::Writer& open_writer() {
        if (busy) throw std::runtime_error("journal: busy in another thread");
        if (w.failed() != 0) raise_contract("WriterFailed", w.failed(), path);
        if (!w.is_open()) throw nb::value_error("journal: the writer is closed");
        return w;
    }
};

// Where SnapshotBook's fills go: FillRecords tagged with the op's index, in a vector
// asked for room before an order changes anything (as the Book binding's sink is).
struct Sink {
    std::vector<FillRecord>& fills;
    const std::uint32_t& at;
    void operator()(const Fill& f) const {
        fills.push_back(FillRecord{f.resting_id, f.aggressor_id, f.price, f.qty, at,
                                   static_cast<std::uint8_t>(f.aggressor_side), {}});
    }
    std::size_t room() const { return fills.capacity() - fills.size(); }
    void reserve(std::size_t n) const {
        fills.reserve(std::max(fills.size() + n, 2 * fills.capacity()));
    }
};

// --8<-- [start:snapshot_book]
struct SnapshotBook {
    Book book;
    std::vector<FillRecord> fills;
    std::vector<RejectRecord> rejects;
    bool busy = false;  // apply() runs with the GIL released: see Busy

    // One op, dispatched as Book.apply does (the same reasons in the same order).
    void apply_one(const OpRecord& op, std::uint32_t at, Sink& sink) {
        Reason r;
        std::uint64_t out;
        switch (op.op) {
            case std::uint8_t(OpCode::Limit):
                r = op.side > 1 ? Reason::BadSide
                                : book.add_limit(op.order_id, Side(op.side), op.price, op.qty, sink);
                break;
            case std::uint8_t(OpCode::Market):
                r = op.side > 1 ? Reason::BadSide
                                : book.add_market(op.order_id, Side(op.side), op.qty, out, sink);
                break;
            case std::uint8_t(OpCode::Cancel): r = book.cancel(op.order_id, out); break;
            case std::uint8_t(OpCode::Reduce): r = book.reduce(op.order_id, op.qty, out); break;
            case std::uint8_t(OpCode::Execute): {
                if (sink.room() == 0) sink.reserve(1);  // before the trade
                Fill f;
                r = book.execute(op.order_id, op.qty, f);
                if (r == Reason::Ok) sink(f);
                break;
            }
            case std::uint8_t(OpCode::Replace):
                r = book.replace(op.order_id, op.new_order_id, op.price, op.qty, sink);
                break;
            default: r = Reason::BadOp;
        }
        if (r != Reason::Ok) rejects.push_back(RejectRecord{at, static_cast<std::uint8_t>(r), {}});
    }

    // The resting orders as OP_LIMIT rows: bids best first, then asks, each level's
    // queue oldest first (contract/journal.py's snapshot order).
    std::vector<OpRecord> resting() const {
        std::vector<OpRecord> rows;
        rows.reserve(book.size());
        for (Side s : {Side::Buy, Side::Sell})
            book.for_each_order(s, [&](auto price, auto, auto id, auto qty) {
                rows.push_back(OpRecord{id, 0, price, qty, std::uint8_t(OpCode::Limit),
                                        static_cast<std::uint8_t>(s), {}});
            });
        return rows;
    }
};
// --8<-- [end:snapshot_book]

}  // namespace

void register_journal(nb::module_& m) {
    m.attr("JOURNAL_RECORD_SIZE") = sizeof(journal::Record);
    m.attr("JOURNAL_BUFFER_RECORDS") = journal::kBufferRecords;

    m.def(
        "journal_crc32",
        [](nb::bytes data, std::uint32_t crc) {
            return journal::crc32(data.c_str(), data.size(), crc);
        },
        "data"_a, "crc"_a = 0, "CRC-32 of bytes, equal to zlib.crc32(data, crc).");

    m.def(
        "journal_scan",
        [](nb::bytes data) {
            std::vector<OpRecord> ops;
            journal::Scan s;
            {
                nb::gil_scoped_release nogil;  // data is immutable bytes, kept alive by the caller
                s = journal::scan(reinterpret_cast<const unsigned char*>(data.c_str()),
                                  data.size(), ops);
            }
            return nb::make_tuple(s.code, s.offset, s.value, s.expected, s.records, s.last_seq,
                                  s.valid_end, s.torn_offset, s.torn_bytes,
                                  to_numpy(ops, "OPS_DTYPE"));
        },
        "data"_a,
        nb::sig("def journal_scan(data: bytes) -> tuple[int, int, int, int, int, int, int, int, "
                "int, numpy.typing.NDArray[numpy.void]]"),
        "Check a journal's bytes: (code, offset, value, expected, records, last_seq,\n"
        "valid_end, torn_offset, torn_bytes, ops). code 0 is ok; see contract.journal.");

    nb::class_<BoundWriter>(m, "JournalWriterCore",
                            "The C++ journal writer; optimized.journal.JournalWriter wraps it.")
        .def(
            "__init__",
            [](BoundWriter* self, const std::string& path, const std::string& lock_path,
               int policy, std::uint32_t batch, std::int64_t interval_ns, bool fsync) {
                if (policy < 0 || policy > 2) throw nb::value_error("journal: bad policy code");
                if (batch < 1 || batch > journal::kBufferRecords)
                    throw nb::value_error("journal: batch must be in 1..4096");
                if (interval_ns < 0) throw nb::value_error("journal: interval_ns must be >= 0");
                new (self) BoundWriter();
                self->path = path;
                self->w.configure(journal::Policy(policy), batch, interval_ns, fsync);
                int e = self->w.lock(lock_path.c_str());
                if (e == EWOULDBLOCK) raise_contract("JournalLocked", path);
                self->check(e);
            },
            "path"_a, "lock_path"_a, "policy"_a, "batch"_a, "interval_ns"_a, "fsync"_a,
            "Take the journal's lock (JournalLocked if another writer has it); then\n"
            "create() or resume() opens the file.")
        .def(
            "create",
            [](BoundWriter& b, const std::string& tmp, const std::string& dir) {
                if (b.w.is_open()) throw nb::value_error("journal: already open");
                b.check(b.w.create(b.path.c_str(), tmp.c_str(), dir.c_str()));
            },
            "tmp"_a, "dir"_a, "A new journal, made atomically (header to tmp, fsync, rename).")
        .def(
            "resume",
            [](BoundWriter& b, std::uint64_t resume_at, std::uint64_t next_seq) {
                if (b.w.is_open()) throw nb::value_error("journal: already open");
                if (next_seq < 1) throw nb::value_error("journal: next_seq must be >= 1");
                b.check(b.w.resume(b.path.c_str(), resume_at, next_seq));
            },
            "resume_at"_a, "next_seq"_a, "An existing journal, cut at resume_at.")
        .def(
            "append",
            [](BoundWriter& b, nb::handle ops) {
                journal::Writer& w = b.open_writer();
                RecordsView view(ops, "OPS_DTYPE", "ops");
                int e;
                {
                    Busy guard(b.busy);
                    nb::gil_scoped_release nogil;
                    e = w.append(static_cast<const OpRecord*>(view.data()),
                                 view.bytes() / sizeof(OpRecord));
                }
                b.check(e);
                return w.next_seq() - 1;
            },
            "ops"_a.none(),
            nb::sig("def append(self, ops: numpy.typing.NDArray[numpy.void]) -> int"),
            "Journal every row; returns the last sequence number given.")
        .def("flush", [](BoundWriter& b) {  // a closed writer has nothing pending
            if (b.w.is_open() || b.w.failed() != 0) b.check(b.open_writer().flush());
        })
        .def("sync", [](BoundWriter& b) {  // flush, then fsync whatever the policy
            if (b.w.is_open() || b.w.failed() != 0) b.check(b.open_writer().sync());
        })
        .def("poll", [](BoundWriter& b) {  // the timer policy's clock: flush if due
            if (!b.w.is_open() || b.w.failed() != 0 || b.busy) return false;
            int r = b.w.poll();
            if (r < 0) b.check(-r);
            return r > 0;
        })
        .def("due_in_ns", [](BoundWriter& b) { return b.w.is_open() ? b.w.due_in_ns() : -1; })
        .def("close", [](BoundWriter& b) {
            if (b.busy) throw std::runtime_error("journal: busy in another thread");
            b.check(b.w.close());
        })
        .def_prop_ro("failed", [](BoundWriter& b) { return b.w.failed(); })
        .def_prop_ro("next_seq", [](BoundWriter& b) { return b.w.next_seq(); })
        .def_prop_ro("flushed_seq", [](BoundWriter& b) { return b.w.flushed_seq(); })
        .def_prop_ro("synced_seq", [](BoundWriter& b) { return b.w.synced_seq(); })
        .def_prop_ro("flushes", [](BoundWriter& b) { return b.w.flushes(); });

    nb::class_<SnapshotBook>(m, "SnapshotBook",
                             "The optimized Book (native/book.hpp), its resting orders\n"
                             "listable in queue order, for snapshots.")
        .def(nb::init<>())
        .def(
            "apply",
            [](SnapshotBook& b, nb::handle ops) {
                RecordsView view(ops, "OPS_DTYPE", "ops");
                const auto* rows = static_cast<const OpRecord*>(view.data());
                std::size_t n = view.bytes() / sizeof(OpRecord);
                if (n > 0xFFFF'FFFFull) throw nb::value_error("apply: at most 2^32-1 operations");
                Busy guard(b.busy);
                b.fills.clear();
                b.rejects.clear();
                b.fills.reserve(std::min<std::size_t>(n, std::size_t(1) << 21));
                {
                    nb::gil_scoped_release nogil;
                    std::uint32_t at = 0;
                    Sink sink{b.fills, at};
                    for (std::size_t k = 0; k < n; ++k) {
                        at = static_cast<std::uint32_t>(k);
                        b.apply_one(rows[k], at, sink);
                    }
                }
                return nb::make_tuple(to_numpy(b.fills, "FILL_DTYPE"),
                                      to_numpy(b.rejects, "REJECT_DTYPE"));
            },
            "ops"_a.none(),
            nb::sig("def apply(self, ops: numpy.typing.NDArray[numpy.void]) -> "
                    "tuple[numpy.typing.NDArray[numpy.void], numpy.typing.NDArray[numpy.void]]"),
            "As Book.apply: (fills FILL_DTYPE, rejects REJECT_DTYPE).")
        .def(
            "resting_orders",
            [](const SnapshotBook& b) {
                if (b.busy) throw std::runtime_error("journal: busy in another thread");
                std::vector<OpRecord> rows = b.resting();
                return to_numpy(rows, "OPS_DTYPE");
            },
            nb::sig("def resting_orders(self) -> numpy.typing.NDArray[numpy.void]"),
            "The book as OP_LIMIT rows in snapshot order (contract.journal).")
        .def("__len__", [](const SnapshotBook& b) {
            if (b.busy) throw std::runtime_error("journal: busy in another thread");
            return b.book.size();
        });
}
