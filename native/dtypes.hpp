// The C++ side of contract/dtypes.py: plain structs laid out exactly like the
// numpy records, so a numpy array of them can be read in place (zero copy).
#pragma once
#include <cstddef>
#include <cstdint>

namespace twinmatch {

enum class Side : std::uint8_t { Buy = 0, Sell = 1 };

enum class OpCode : std::uint8_t {
    Limit = 0, Market = 1, Cancel = 2, Reduce = 3, Execute = 4, Replace = 5,
};

// Reject reasons; the numbers are REASONS' indices in contract/dtypes.py, and
// reason_name() its names (tests/test_contract.py checks both, through the extension).
enum class Reason : std::uint8_t {
    Ok = 0, DuplicateId = 1, UnknownId = 2, BadPrice = 3, BadQty = 4,
    OverReduce = 5, BadSide = 6, BadOp = 7,
};
inline constexpr std::size_t kReasons = 8;  // values 0 .. kReasons-1

inline const char* reason_name(Reason r) {
    switch (r) {
        case Reason::Ok: return "ok";
        case Reason::DuplicateId: return "duplicate_id";
        case Reason::UnknownId: return "unknown_id";
        case Reason::BadPrice: return "bad_price";
        case Reason::BadQty: return "bad_qty";
        case Reason::OverReduce: return "over_reduce";
        case Reason::BadSide: return "bad_side";
        case Reason::BadOp: return "bad_op";
    }
    return "unknown_reason";
}

// --8<-- [start:op_record]
struct OpRecord {            // OPS_DTYPE
    std::uint64_t order_id;
    std::uint64_t new_order_id;
    std::uint32_t price;
    std::uint32_t qty;
    std::uint8_t op;         // OpCode, kept raw: a bad value must be rejected, not UB
    std::uint8_t side;       // 0 buy, 1 sell, anything else rejected
    std::uint8_t pad_[6];
};
static_assert(sizeof(OpRecord) == 32);
static_assert(offsetof(OpRecord, price) == 16 && offsetof(OpRecord, op) == 24);

struct FillRecord {          // FILL_DTYPE
    std::uint64_t resting_id;
    std::uint64_t aggressor_id;
    std::uint32_t price;
    std::uint32_t qty;
    std::uint32_t op_index;
    std::uint8_t aggressor_side;
    std::uint8_t pad_[3];
};
static_assert(sizeof(FillRecord) == 32);
static_assert(offsetof(FillRecord, op_index) == 24 && offsetof(FillRecord, aggressor_side) == 28);

struct RejectRecord {        // REJECT_DTYPE
    std::uint64_t index;
    std::uint8_t reason;
    std::uint8_t pad_[7];
};
static_assert(sizeof(RejectRecord) == 16);
// --8<-- [end:op_record]

// --8<-- [start:event_record]
// One decoded ITCH event: EVENT_DTYPE in contract/dtypes.py (see its docstring for
// which message fills which field). 8-byte fields first, so no padding is needed
// between fields and every field is naturally aligned.
struct ItchEvent {
    std::uint64_t timestamp;      // ns since midnight (48 bits on the wire)
    std::uint64_t order_ref;      // Q: the u64 cross shares
    std::uint64_t new_order_ref;  // U only
    std::uint64_t match_number;
    std::uint32_t shares;
    std::uint32_t price;          // 4 implied decimals
    std::uint16_t locate;
    std::uint8_t type;            // message type, ASCII
    std::uint8_t side;            // ASCII 'B'/'S'; S: event code; H: trading state
    std::uint8_t printable;       // C: 'Y'/'N'; Q: cross type
    std::uint8_t pad_[3];
    char stock[8];                // raw, space-padded
};
static_assert(sizeof(ItchEvent) == 56);
static_assert(offsetof(ItchEvent, shares) == 32 && offsetof(ItchEvent, price) == 36);
static_assert(offsetof(ItchEvent, locate) == 40 && offsetof(ItchEvent, type) == 42);
static_assert(offsetof(ItchEvent, side) == 43 && offsetof(ItchEvent, printable) == 44);
static_assert(offsetof(ItchEvent, stock) == 48);
// --8<-- [end:event_record]

// --8<-- [start:lobster_record]
struct LobsterRecord {       // LOBSTER_DTYPE
    std::int64_t time;       // nanoseconds after midnight
    std::uint64_t order_id;
    std::int64_t price;      // 1/10000 dollar; -1/0/1 on halt rows
    std::uint32_t size;
    std::uint8_t type;       // 1..7
    std::int8_t direction;   // 1 buy, -1 sell
    std::uint8_t pad_[2];
};
static_assert(sizeof(LobsterRecord) == 32);
static_assert(offsetof(LobsterRecord, size) == 24 && offsetof(LobsterRecord, type) == 28 &&
              offsetof(LobsterRecord, direction) == 29);
// --8<-- [end:lobster_record]

}  // namespace twinmatch
