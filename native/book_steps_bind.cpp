// Python bindings of chapter 1's steps: BookStep0 .. BookStep4, native/book.hpp's Book
// compiled with only its first decisions (kBookSteps), with Book's API and results; the
// last step is Book itself (book_bind.cpp). A translation unit of its own: see
// book_bind.hpp.
#include "book_bind.hpp"

TWINMATCH_RUN_OPS(0)
TWINMATCH_RUN_OPS(1)
TWINMATCH_RUN_OPS(2)
TWINMATCH_RUN_OPS(3)
TWINMATCH_RUN_OPS(4)

namespace {

// One of chapter 1's steps as the Python class BookStep<I>.
template <std::size_t I>
void bind_step(nb::module_& m) {
    using B = BasicBook<kBookSteps[I].steps>;
    static_assert(!std::is_same_v<B, Book>, "the last step is Book itself");
    static const std::string name = "BookStep" + std::to_string(I);
    static const std::string doc = std::string("Chapter 1, step ") + std::to_string(I) + " (" +
                                   kBookSteps[I].name + "): Book with only its first " +
                                   std::to_string(I) + " decisions; same API and results.\n" +
                                   "The step's decision: " + kBookSteps[I].adds + ".";
    nb::class_<Bound<B>> cls(m, name.c_str(), doc.c_str());
    cls.def(nb::init<std::uint64_t, std::uint32_t, std::uint32_t>(),
            "window_levels"_a = B::kDefaultWindow, "initial_orders"_a = B::kDefaultOrders,
            "max_orders"_a = B::kMaxOrders);
    bind_api<B>(cls);
}

}  // namespace

void register_book_steps(nb::module_& m) {
    bind_step<0>(m);
    bind_step<1>(m);
    bind_step<2>(m);
    bind_step<3>(m);
    bind_step<4>(m);
    static_assert(kBookStepCount == 6, "one bind_step line per step but the last (Book)");
    m.def(
        "book_steps",
        [] {
            std::vector<std::tuple<std::string, std::string>> out;
            for (const BookStep& s : kBookSteps) out.emplace_back(s.name, s.adds);
            return out;
        },
        nb::sig("def book_steps() -> list[tuple[str, str]]"),
        "Chapter 1's steps in order as (name, what the step adds); step i is BookStep<i>,\n"
        "the last one is Book.");
}
