// 05_many_books/ref_hash: an open-addressing table from order reference to order slot,
// whose probe runs stay short whatever the references look like (starter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ex05 {

// The table uses the low bits of hash_ref(ref) as the first slot to look at.
// TODO: the reference itself is a fine hash for references 1, 2, 3, ... and a disaster
// for others (run the checker: it counts the probes). Make every bit of the reference
// reach the low bits of the hash.
inline std::uint64_t hash_ref(std::uint64_t ref) { return ref; }

// Linear probing: a reference lives in the first free slot at or after its hash's slot.
// At most half full, so a probe run ends at an empty slot soon.
class RefTable {
public:
    explicit RefTable(std::size_t capacity)  // a power of two, >= 2
        : slots_(capacity), mask_(capacity - 1) {}

    // false if the reference is already there, or the table is half full.
    bool insert(std::uint64_t ref, std::uint32_t value) {
        if (2 * (size_ + 1) > slots_.size()) return false;
        for (std::size_t i = hash_ref(ref) & mask_;; i = (i + 1) & mask_) {
            ++probes_;
            Slot& s = slots_[i];
            if (!s.used) {
                s = Slot{ref, value, 1};
                ++size_;
                return true;
            }
            if (s.ref == ref) return false;
        }
    }

    // The value stored for the reference, or nullptr.
    const std::uint32_t* find(std::uint64_t ref) {
        for (std::size_t i = hash_ref(ref) & mask_;; i = (i + 1) & mask_) {
            ++probes_;
            const Slot& s = slots_[i];
            if (!s.used) return nullptr;
            if (s.ref == ref) return &s.value;
        }
    }

    std::uint64_t probes() const { return probes_; }  // slots looked at, so far
    void reset_probes() { probes_ = 0; }

private:
    struct Slot {  // 16 bytes: four to a cache line
        std::uint64_t ref;
        std::uint32_t value;
        std::uint32_t used;
    };
    static_assert(sizeof(Slot) == 16);
    std::vector<Slot> slots_;
    std::size_t mask_;
    std::size_t size_ = 0;
    std::uint64_t probes_ = 0;
};

}  // namespace ex05
