// Anchors for the book's machine-code listings (scripts/asm.py, chapters/generated/asm/).
//
// The module is stripped of its symbol table, and the functions the chapters talk about
// are inlined into bigger ones, so each listing needs a named function to disassemble:
// these are the project's own inline functions compiled on their own, with the module's
// flags, exported under plain C names (the dynamic symbol table survives stripping).
// Nothing calls them. Inside a caller the compiler may schedule the same instructions
// differently, and the chapters say so where they show one.
#include <cstdint>

#include "book.hpp"
#include "itch.hpp"
#include "ring.hpp"

#define TWINMATCH_ANCHOR extern "C" __attribute__((visibility("default"), noinline, used))

// Chapter 3: an ITCH big-endian field, loaded and byte-swapped.
TWINMATCH_ANCHOR std::uint64_t twinmatch_asm_be64(const std::uint8_t* p) {
    return twinmatch::itch::be64(p);
}
TWINMATCH_ANCHOR std::uint32_t twinmatch_asm_be32(const std::uint8_t* p) {
    return twinmatch::itch::be32(p);
}
TWINMATCH_ANCHOR std::uint64_t twinmatch_asm_be48(const std::uint8_t* p) {
    return twinmatch::itch::be48(p);
}

// Chapter 1: the side key (a bid's price, or an ask's negated) and a whole cancel, in
// the step before branch-free (the obvious spelling) and in Book (the branch-free one).
using BeforeBranchFree = twinmatch::BasicBook<twinmatch::step::kAll & ~twinmatch::step::kPrefetch &
                                              ~twinmatch::step::kBranchFree>;
static_assert(BeforeBranchFree::kSteps == twinmatch::kBookSteps[3].steps);

TWINMATCH_ANCHOR std::int64_t twinmatch_asm_side_key_branchy(twinmatch::Side s, std::uint64_t p) {
    return BeforeBranchFree::side_key(s, p);
}
TWINMATCH_ANCHOR std::int64_t twinmatch_asm_side_key_branch_free(twinmatch::Side s,
                                                                  std::uint64_t p) {
    return twinmatch::Book::side_key(s, p);
}
TWINMATCH_ANCHOR int twinmatch_asm_cancel_branchy(BeforeBranchFree& b, std::uint64_t id,
                                                  std::uint64_t& removed) {
    return static_cast<int>(b.cancel(id, removed));
}
TWINMATCH_ANCHOR int twinmatch_asm_cancel_branch_free(twinmatch::Book& b, std::uint64_t id,
                                                      std::uint64_t& removed) {
    return static_cast<int>(b.cancel(id, removed));
}

// Chapter 6: the SPSC ring's push and pop (native/ring.hpp), for 8-byte items: what the
// acquire loads and release stores compile to.
TWINMATCH_ANCHOR bool twinmatch_asm_ring_push(twinmatch::SpscRing<std::uint64_t>& ring,
                                              std::uint64_t item) {
    return ring.try_push(item);
}
TWINMATCH_ANCHOR bool twinmatch_asm_ring_pop(twinmatch::SpscRing<std::uint64_t>& ring,
                                             std::uint64_t& item) {
    return ring.try_pop(item);
}

// Chapter 3: the decode loops, portable and AVX-512 VBMI (built for VBMI whatever the
// flags; the anchor is never called, so it runs on no CPU). `flatten` inlines the loop
// into the anchor, which the compiler would otherwise call out of line.
TWINMATCH_ANCHOR __attribute__((flatten)) void twinmatch_asm_itch_scan_scalar(const std::uint8_t* buf, std::size_t n,
                                                     twinmatch::ItchEvent* out,
                                                     std::uint64_t* counts,
                                                     twinmatch::itch::ScanResult* result) {
    *result = twinmatch::itch::scan_scalar(buf, n, out, counts);
}
#ifdef TWINMATCH_ITCH_VBMI
TWINMATCH_ANCHOR TWINMATCH_VBMI_TARGET __attribute__((flatten)) void twinmatch_asm_itch_scan_vbmi(
    const std::uint8_t* buf, std::size_t n, twinmatch::ItchEvent* out, std::uint64_t* counts,
    twinmatch::itch::ScanResult* result) {
    *result = twinmatch::itch::scan_vbmi(buf, n, out, counts, false);
}
#endif

// Chapter 9: the filter "adds of a stock above a price" (native/columns.hpp) over the array
// of structs, over the columns with the scalar loop, and with each SIMD kernel (built for
// its instruction set whatever the flags, like the VBMI loop above).
#include "columns.hpp"

TWINMATCH_ANCHOR __attribute__((flatten)) std::size_t twinmatch_asm_columns_filter_aos(
    const twinmatch::ItchEvent* ev, std::size_t n, std::uint64_t key, std::uint32_t above,
    std::int64_t* out) {
    return twinmatch::columns::adds_above_aos(ev, n, key, above, out);
}
TWINMATCH_ANCHOR __attribute__((flatten)) std::size_t twinmatch_asm_columns_filter_soa(
    const std::uint8_t* type, const std::uint64_t* stock, const std::uint32_t* price,
    std::size_t n, std::uint64_t key, std::uint32_t above, std::int64_t* out) {
    return twinmatch::columns::adds_above_soa(type, stock, price, 0, n, key, above, out);
}
#ifdef TWINMATCH_COLUMNS_X86
TWINMATCH_ANCHOR TWINMATCH_AVX2_TARGET __attribute__((flatten)) std::size_t
twinmatch_asm_columns_filter_avx2(const std::uint8_t* type, const std::uint64_t* stock,
                                  const std::uint32_t* price, std::size_t n, std::uint64_t key,
                                  std::uint32_t above, std::int64_t* out) {
    return twinmatch::columns::adds_above_avx2(type, stock, price, 0, n, key, above, out);
}
TWINMATCH_ANCHOR TWINMATCH_AVX512_TARGET __attribute__((flatten)) std::size_t
twinmatch_asm_columns_filter_avx512(const std::uint8_t* type, const std::uint64_t* stock,
                                    const std::uint32_t* price, std::size_t n,
                                    std::uint64_t key, std::uint32_t above, std::int64_t* out) {
    return twinmatch::columns::adds_above_avx512(type, stock, price, 0, n, key, above, out);
}
#endif
