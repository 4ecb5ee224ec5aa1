// Python bindings for native/itch.hpp (optimized.itch is the typed face over these).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>  // madvise
#endif

#include "itch.hpp"
#include "read_buffer.hpp"

namespace nb = nanobind;
using twinmatch::ReadBuffer;
using twinmatch::ItchEvent;
namespace itch = twinmatch::itch;

namespace {

using U8Array = nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>;
using U64Array = nb::ndarray<nb::numpy, std::uint64_t, nb::ndim<1>>;

// --8<-- [start:block_pool]
// Output blocks for the event arrays, recycled. The first write to freshly mapped memory
// takes a page fault per 4 KiB page (chapter 3's "fresh output blocks" row measures the
// decoder writing into new blocks every time), so when numpy frees an events array its
// block goes back here, already faulted in, and the next batch (read_file's next chunk, or
// the next decode) writes into it. A block starts with a 64-byte header holding its
// capacity; the events follow, 64-byte aligned.
class BlockPool {
public:
    static constexpr std::size_t kHeader = 64;
    static constexpr std::size_t kSlots = 2;          // enough for "drop one, make one"
    // Never hoard more than this. A whole 10M-message day decoded in one call reserves
    // 1.3 GiB (room for its worst case) and writes 0.5 GiB of it: kept, so the next such
    // call writes warm memory. itch_release_pool() hands the blocks back.
    static constexpr std::size_t kMaxKept = std::size_t{2} << 30;
    static constexpr std::size_t kHugePage = 2u << 20;
    static constexpr std::size_t kHugeFrom = 32u << 20;

    // A block with room for at least `bytes`; returns the base (header) pointer.
    void* take(std::size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);  // per batch, never per message
            Slot* best = nullptr;
            for (auto& s : slots_)
                if (s.base != nullptr && s.capacity >= bytes &&
                    (best == nullptr || s.capacity < best->capacity))
                    best = &s;
            if (best != nullptr) return std::exchange(best->base, nullptr);
        }
        // 64-byte aligned (the decoder's streaming stores write whole cache lines);
        // aligned_alloc wants the size rounded up to the alignment, and never 0.
        // A big block is aligned to 2 MiB and offered to the kernel for huge pages: one
        // page fault per 2 MiB written instead of one per 4 KiB.
        const bool huge = bytes >= kHugeFrom;
        const std::size_t align = huge ? kHugePage : 64;
        const std::size_t size = (kHeader + bytes + align) / align * align;
        void* base = std::aligned_alloc(align, size);
        if (base == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
        if (huge) madvise(base, size, MADV_HUGEPAGE);  // a hint: ignored where unsupported
#endif
        std::memcpy(base, &bytes, sizeof bytes);
        return base;
    }
    // Called by numpy (through the capsule) when the array dies.
    void give(void* base) noexcept {
        std::size_t capacity;
        std::memcpy(&capacity, base, sizeof capacity);
        if (capacity <= kMaxKept) {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto& s : slots_) {
                if (s.base == nullptr) { s = {base, capacity}; return; }
            }
            for (auto& s : slots_) {  // full: keep the larger block
                if (s.capacity < capacity) { std::swap(s.base, base); s.capacity = capacity; break; }
            }
        }
        std::free(base);
    }
    void clear() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& s : slots_) { std::free(s.base); s = {}; }
    }
    ~BlockPool() { clear(); }

private:
    struct Slot { void* base = nullptr; std::size_t capacity = 0; };
    std::mutex mutex_;
    Slot slots_[kSlots];
};

BlockPool& pool() {
    static BlockPool p;
    return p;
}
// --8<-- [end:block_pool]

// --8<-- [start:bind_scan]
// scan(buffer) -> (events as uint8 bytes, counts[256], consumed, error, type, length).
// The output is sized for the worst case (every record an S event) once, before the loop,
// so the loop never allocates; pages of that block that are never written cost nothing.
// Tests switch the SIMD loop off to check the portable one on the same machine.
bool g_use_simd = true;

nb::tuple scan(nb::handle buffer) {
    ReadBuffer in(buffer);
    // Room for the worst case (every record an S event), taken once before the loop so
    // the loop never allocates. Pages of the block that are never written cost nothing.
    const std::size_t cap = in.size() / itch::kMinEventRecord;
    void* base = pool().take(cap * sizeof(ItchEvent));
    nb::capsule ev_owner(base, [](void* p) noexcept { pool().give(p); });
    auto* events = reinterpret_cast<ItchEvent*>(static_cast<std::uint8_t*>(base) + BlockPool::kHeader);
    std::uint64_t counts[256] = {};
    itch::ScanResult r;
    const bool simd = g_use_simd;  // read with the GIL held, like every write to it
    {
        nb::gil_scoped_release no_gil;  // pure C++ from here: other Python threads may run
        r = itch::scan(in.data(), in.size(), events, counts, simd);
    }
    U8Array ev(reinterpret_cast<std::uint8_t*>(events), {r.events * sizeof(ItchEvent)}, ev_owner);
    auto* ct_data = new std::uint64_t[256];
    std::copy(counts, counts + 256, ct_data);
    nb::capsule ct_owner(ct_data, [](void* p) noexcept { delete[] static_cast<std::uint64_t*>(p); });
    U64Array ct(ct_data, {std::size_t{256}}, ct_owner);
    return nb::make_tuple(ev, ct, r.consumed, static_cast<int>(r.error),
                          static_cast<int>(r.error_type), static_cast<int>(r.error_length));
}
// --8<-- [end:bind_scan]

std::uint64_t sum_bytes(nb::handle buffer) {
    ReadBuffer in(buffer);
    nb::gil_scoped_release no_gil;
    return itch::sum_bytes(in.data(), in.size());
}

}  // namespace

void register_itch(nb::module_& m) {
    m.def("itch_scan", &scan, nb::arg("buffer"),
          "Decode the whole ITCH records at the start of a bytes-like buffer (GIL released).");
    m.def("itch_sum_bytes", &sum_bytes, nb::arg("buffer"),
          "Sum a buffer as 8-byte words: one plain sequential read, the bandwidth ceiling.");
    nb::list lengths;
    for (auto v : itch::kLength) lengths.append(static_cast<int>(v));
    m.attr("ITCH_LENGTHS") = lengths;
    m.attr("ITCH_EVENT_SIZE") = sizeof(ItchEvent);
    m.def("itch_simd", [](bool on) { return std::exchange(g_use_simd, on) && itch::cpu_has_vbmi(); },
          nb::arg("on"),
          "Use the AVX-512 VBMI loop when the CPU has it (default); returns whether it was in use.");
    m.def("itch_release_pool", [] { pool().clear(); },
          "Free the recycled output blocks the ITCH decoder keeps (at most two).");
}
