// Python bindings of the order books (optimized.book re-exports them): Book, MapBook,
// Fill, Side and the exceptions. The machinery (argument checks, sinks, the batch loop,
// the Python API of a book) is in book_bind.hpp; chapter 1's steps are bound in
// book_steps_bind.cpp, a translation unit of their own.
#include "book_bind.hpp"

// Book's batch loop (step 5 of chapter 1 is Book itself).
TWINMATCH_RUN_OPS(5)

void register_book_steps(nb::module_& m);  // book_steps_bind.cpp

// A plain Python class, defined from source in the module (so that it is an ordinary
// Python exception class, like the naive twin's), kept for the life of the process.
static PyObject* define_class(nb::module_& m, const char* name, const char* source) {
    nb::dict ns;
    ns["__name__"] = "optimized._native";
    nb::module_::import_("builtins").attr("exec")(source, ns);
    nb::object cls = ns[name];
    m.attr(name) = cls;
    return cls.release().ptr();
}

void register_book(nb::module_& m) {
    nb::enum_<Side>(m, "Side", nb::is_arithmetic(), "Order side: BUY = 0, SELL = 1.")
        .value("BUY", Side::Buy)
        .value("SELL", Side::Sell);

    // OrderRejected is a plain Python class (like the naive twin's), defined here so
    // that C++ can raise it: OrderRejected(order_id, reason) sets both attributes.
    g_order_rejected = define_class(
        m, "OrderRejected",
        "class OrderRejected(ValueError):\n"
        "    \"\"\"An operation the book refused; the book is unchanged.\"\"\"\n"
        "\n"
        "    def __init__(self, order_id: int, reason: str) -> None:\n"
        "        super().__init__(f'order {order_id} rejected: {reason}')\n"
        "        self.order_id = order_id\n"
        "        self.reason = reason\n");
    g_book_full = define_class(
        m, "BookFull",
        "from __future__ import annotations\n"
        "\n"
        "class BookFull(MemoryError):\n"
        "    \"\"\"The book cannot take one more resting order (max_orders, or memory).\n"
        "\n"
        "    Raised before the operation changes anything. From apply(): .index is the\n"
        "    operation that failed, .fills and .rejects those of the operations before it,\n"
        "    which the book has applied. From a single-op call they are None.\n"
        "    \"\"\"\n"
        "\n"
        "    index: int | None = None\n"
        "    fills: numpy.typing.NDArray[numpy.void] | None = None\n"
        "    rejects: numpy.typing.NDArray[numpy.void] | None = None\n"
        "\n"
        "    def __init__(self, message: str, index: int | None = None,\n"
        "                 fills: numpy.typing.NDArray[numpy.void] | None = None,\n"
        "                 rejects: numpy.typing.NDArray[numpy.void] | None = None) -> None:\n"
        "        super().__init__(message)\n"
        "        self.index = index\n"
        "        self.fills = fills\n"
        "        self.rejects = rejects\n");
    // A BookFull thrown by a single-op call becomes the Python BookFull (not a bare
    // MemoryError, which is what nanobind makes of other std::bad_alloc).
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const BookFull& e) {
            PyErr_SetString(g_book_full, e.what());
        }
    });

    nb::class_<Fill>(m, "Fill", "One trade: compares equal to the tuple "
                               "(resting_id, aggressor_id, price, qty, aggressor_side).")
        .def(nb::init<std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t, Side>(),
             "resting_id"_a, "aggressor_id"_a, "price"_a, "qty"_a, "aggressor_side"_a)
        .def_ro("resting_id", &Fill::resting_id)
        .def_ro("aggressor_id", &Fill::aggressor_id)
        .def_ro("price", &Fill::price)
        .def_ro("qty", &Fill::qty)
        .def_ro("aggressor_side", &Fill::aggressor_side)
        .def(
            "__eq__",
            [](const Fill& a, nb::handle other) -> nb::object {
                if (nb::isinstance<Fill>(other)) {
                    const Fill& b = nb::cast<const Fill&>(other);
                    return nb::bool_(a.resting_id == b.resting_id &&
                                     a.aggressor_id == b.aggressor_id && a.price == b.price &&
                                     a.qty == b.qty && a.aggressor_side == b.aggressor_side);
                }
                if (nb::isinstance<nb::tuple>(other)) return nb::bool_(fill_tuple(a).equal(other));
                return nb::borrow(Py_NotImplemented);
            },
            nb::sig("def __eq__(self, other: object, /) -> bool"))
        .def(
            "__ne__",
            [](const Fill& a, nb::handle other) -> nb::object {
                if (nb::isinstance<Fill>(other) || nb::isinstance<nb::tuple>(other))
                    return nb::bool_(!fill_tuple(a).equal(
                        nb::isinstance<Fill>(other) ? fill_tuple(nb::cast<const Fill&>(other))
                                                    : nb::borrow(other)));
                return nb::borrow(Py_NotImplemented);
            },
            nb::sig("def __ne__(self, other: object, /) -> bool"))
        .def("__hash__", [](const Fill& a) { return nb::hash(fill_tuple(a)); })
        .def("__len__", [](const Fill&) { return 5; })
        .def(
            "__iter__", [](const Fill& a) { return nb::iter(fill_tuple(a)); },
            nb::sig("def __iter__(self) -> typing.Iterator[int]"))
        .def(
            "__getitem__",
            [](const Fill& a, nb::handle i) -> nb::object {
                nb::object t = fill_tuple(a);
                nb::object item = t[i];  // materialise before t goes away
                return item;
            },
            nb::sig("def __getitem__(self, index: int, /) -> int"))
        .def("__repr__", [](const Fill& a) {
            return nb::str("Fill(resting_id={}, aggressor_id={}, price={}, qty={}, "
                           "aggressor_side={!r})")
                .format(a.resting_id, a.aggressor_id, a.price, a.qty, a.aggressor_side);
        });

    nb::class_<Bound<Book>> book(m, "Book",
                                 "The optimized order book: price window + bitsets, pooled "
                                 "32-byte nodes, open-addressing id hash.");
    book.def(nb::init<std::uint64_t, std::uint32_t, std::uint32_t>(),
             "window_levels"_a = Book::kDefaultWindow, "initial_orders"_a = Book::kDefaultOrders,
             "max_orders"_a = Book::kMaxOrders)
        .def(
            "stats",
            [](Bound<Book>& b) {
                const Book& k = b.idle();
                nb::dict d;
                d["window_levels"] = k.window_levels();
                d["window_base"] = k.window_base();
                d["recentres"] = k.recentres();
                d["far_levels"] = k.far_levels();
                d["pool_capacity"] = k.pool_capacity();
                d["pool_high_water"] = k.pool_high_water();
                d["hash_capacity"] = k.hash_capacity();
                d["hash_rekeys"] = k.hash_rekeys();
                d["hash_keyed"] = k.hash_keyed() ? 1 : 0;
                d["pool_alignment"] = k.pool_alignment();
                d["hash_alignment"] = k.hash_alignment();
                return d;
            },
            nb::sig("def stats(self) -> dict[str, int]"),
            "Internals (window, pool, hash sizes) for tests and the book's tables.")
        .def(
            "hash_displacement",
            [](Bound<Book>& b) {
                const Book& k = b.idle();
                return std::make_pair(k.hash_max_displacement(), k.hash_total_displacement());
            },
            nb::sig("def hash_displacement(self) -> tuple[int, int]"),
            "(largest, total) distance of the id table's entries from their home slots:\n"
            "the probes a lookup of every resting id makes beyond the first (for tests).")
        .def(
            "hash_home", [](Bound<Book>& b, std::uint64_t id) { return b.idle().hash_home(id); },
            "order_id"_a, "The id's home slot in the current id hash table (for tests).");
    bind_api<Book>(book);

    // Chapter 1's steps: BookStep0 .. BookStep4 (native/book_steps_bind.cpp).
    register_book_steps(m);

    nb::class_<Bound<MapBook>> map_book(
        m, "MapBook", "The std::map / std::list / std::unordered_map baseline, same API.");
    map_book.def(nb::init<std::uint32_t, std::uint32_t>(), "initial_orders"_a = Book::kDefaultOrders,
                 "max_orders"_a = Book::kMaxOrders);
    bind_api<MapBook>(map_book);

    m.def(
        "_fail_allocation_after",
        [](std::int64_t n) { g_alloc_countdown.store(n, std::memory_order_relaxed); },
        "n"_a,
        "Test only: the book's n-th allocation point from now (0 = the next) fails with\n"
        "std::bad_alloc, as if memory ran out there; -1 turns this off.");
    m.def(
        "layout_info",
        [] {
            nb::dict d;
            d["node_bytes"] = sizeof(Node);
            d["level_bytes"] = sizeof(Level);
            d["hash_slot_bytes"] = 8;
            d["op_record_bytes"] = sizeof(OpRecord);
            d["fill_record_bytes"] = sizeof(FillRecord);
            d["default_window_levels"] = Book::kDefaultWindow;
            d["default_initial_orders"] = Book::kDefaultOrders;
            return d;
        },
        nb::sig("def layout_info() -> dict[str, int]"),
        "Sizes of the book's building blocks, for the chapter's layout table.");
}
