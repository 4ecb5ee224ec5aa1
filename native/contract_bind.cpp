// The C++ twins' side of the contract (contract/ in Python), exported for one check.
// Codes both languages need (reject reasons, anomaly kinds, ITCH error reasons, op codes,
// sides) and the record layouts are enums and structs here, and tables and dtypes there.
// _native.contract_tables() lists the C++ ones by value; tests/test_contract.py asserts
// they equal the Python tables, so a code changed on one side fails that one test, which
// names the other side. (Also the optimized twin's own codes between its C++ and its
// Python face: the orders parser's problems, the pcap scanner's errors.)
#include <nanobind/nanobind.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "dtypes.hpp"
#include "itch.hpp"
#include "market.hpp"
#include "orders.hpp"
#include "pcap.hpp"

namespace nb = nanobind;
using namespace twinmatch;

namespace {

// An enum's names in order of value: slot i holds the name of the enumerator whose value
// is i (None if no enumerator has it), so a renumbered enumerator moves its name and the
// test sees the move. The names are the Python contract's spelling of each enumerator.
template <class E, std::size_t N>
nb::list names_by_value(const std::pair<E, const char*> (&table)[N]) {
    std::vector<const char*> slots(N, nullptr);
    for (const auto& [value, name] : table) {
        const auto i = static_cast<std::size_t>(value);
        if (i >= slots.size()) slots.resize(i + 1, nullptr);
        slots[i] = name;
    }
    nb::list out;
    for (const char* name : slots) out.append(name ? nb::object(nb::str(name)) : nb::none());
    return out;
}

constexpr std::pair<Anomaly, const char*> kAnomalyNames[] = {
    {Anomaly::UnknownRef, "unknown_ref"},       {Anomaly::DuplicateRef, "duplicate_ref"},
    {Anomaly::OverExecution, "over_execution"}, {Anomaly::OverCancel, "over_cancel"},
    {Anomaly::BadPrice, "bad_price"},           {Anomaly::BadShares, "bad_shares"},
    {Anomaly::BadSide, "bad_side"},             {Anomaly::LocateMismatch, "locate_mismatch"},
};
static_assert(std::size(kAnomalyNames) == kAnomalyKinds, "a new Anomaly needs its name here");

constexpr std::pair<itch::Error, const char*> kItchErrorNames[] = {
    {itch::Error::Ok, "ok"},
    {itch::Error::TruncatedPrefix, "truncated_prefix"},
    {itch::Error::TruncatedBody, "truncated_body"},
    {itch::Error::ZeroLength, "zero_length"},
    {itch::Error::BadLength, "bad_length"},
};

// The optimized twin's own codes (C++ -> its Python face, optimized/orders.py's
// PROBLEM_NAMES and optimized/pcap.py's SCAN_ERRORS): not shared with the naive twin, but
// kept in both languages all the same.
constexpr std::pair<orders::Problem, const char*> kOrdersProblemNames[] = {
    {orders::Problem::Ok, "ok"},
    {orders::Problem::FieldCount, "field_count"},
    {orders::Problem::Missing, "missing"},
    {orders::Problem::NotNumber, "not_number"},
    {orders::Problem::Negative, "negative"},
    {orders::Problem::OutOfRange, "out_of_range"},
    {orders::Problem::BadSide, "bad_side"},
    {orders::Problem::BadType, "bad_type"},
    {orders::Problem::BadDirection, "bad_direction"},
    {orders::Problem::TooPrecise, "too_precise"},
    {orders::Problem::Capacity, "capacity"},
};

constexpr std::pair<pcap::Error, const char*> kPcapErrorNames[] = {
    {pcap::Error::None, "none"},
    {pcap::Error::BadMagic, "bad_magic"},
    {pcap::Error::BadLinkType, "bad_linktype"},
    {pcap::Error::RecordTooLong, "record_too_long"},
};

// A record's size and each field's offset, as the C++ compiler lays the struct out.
#define TM_FIELD(T, f) fields[#f] = offsetof(T, f)

nb::dict layouts() {
    nb::dict out;
    {
        nb::dict fields;
        TM_FIELD(OpRecord, order_id); TM_FIELD(OpRecord, new_order_id);
        TM_FIELD(OpRecord, price); TM_FIELD(OpRecord, qty); TM_FIELD(OpRecord, op);
        TM_FIELD(OpRecord, side);
        out["OPS_DTYPE"] = nb::make_tuple(sizeof(OpRecord), fields);
    }
    {
        nb::dict fields;
        TM_FIELD(FillRecord, resting_id); TM_FIELD(FillRecord, aggressor_id);
        TM_FIELD(FillRecord, price); TM_FIELD(FillRecord, qty); TM_FIELD(FillRecord, op_index);
        TM_FIELD(FillRecord, aggressor_side);
        out["FILL_DTYPE"] = nb::make_tuple(sizeof(FillRecord), fields);
    }
    {
        nb::dict fields;
        TM_FIELD(RejectRecord, index); TM_FIELD(RejectRecord, reason);
        out["REJECT_DTYPE"] = nb::make_tuple(sizeof(RejectRecord), fields);
    }
    {
        nb::dict fields;
        TM_FIELD(ItchEvent, timestamp); TM_FIELD(ItchEvent, order_ref);
        TM_FIELD(ItchEvent, new_order_ref); TM_FIELD(ItchEvent, match_number);
        TM_FIELD(ItchEvent, shares); TM_FIELD(ItchEvent, price); TM_FIELD(ItchEvent, locate);
        TM_FIELD(ItchEvent, type); TM_FIELD(ItchEvent, side); TM_FIELD(ItchEvent, printable);
        TM_FIELD(ItchEvent, stock);
        out["EVENT_DTYPE"] = nb::make_tuple(sizeof(ItchEvent), fields);
    }
    {
        nb::dict fields;
        TM_FIELD(LobsterRecord, time); TM_FIELD(LobsterRecord, order_id);
        TM_FIELD(LobsterRecord, price); TM_FIELD(LobsterRecord, size);
        TM_FIELD(LobsterRecord, type); TM_FIELD(LobsterRecord, direction);
        out["LOBSTER_DTYPE"] = nb::make_tuple(sizeof(LobsterRecord), fields);
    }
    return out;
}
#undef TM_FIELD

nb::dict contract_tables() {
    nb::dict t;
    nb::list reasons;
    for (std::size_t i = 0; i < kReasons; ++i)
        reasons.append(reason_name(static_cast<Reason>(i)));
    t["REASONS"] = reasons;
    t["ANOMALIES"] = names_by_value(kAnomalyNames);
    t["ITCH_REASONS"] = names_by_value(kItchErrorNames);
    nb::dict ops;
    ops["OP_LIMIT"] = static_cast<int>(OpCode::Limit);
    ops["OP_MARKET"] = static_cast<int>(OpCode::Market);
    ops["OP_CANCEL"] = static_cast<int>(OpCode::Cancel);
    ops["OP_REDUCE"] = static_cast<int>(OpCode::Reduce);
    ops["OP_EXECUTE"] = static_cast<int>(OpCode::Execute);
    ops["OP_REPLACE"] = static_cast<int>(OpCode::Replace);
    t["OPS"] = ops;
    nb::dict sides;
    sides["BUY"] = static_cast<int>(Side::Buy);
    sides["SELL"] = static_cast<int>(Side::Sell);
    t["SIDES"] = sides;
    t["LAYOUTS"] = layouts();
    t["PCAP_MAX_STREAMS"] = pcap::kMaxStreams;
    t["ORDERS_PROBLEMS"] = names_by_value(kOrdersProblemNames);
    t["PCAP_SCAN_ERRORS"] = names_by_value(kPcapErrorNames);
    return t;
}

}  // namespace

void register_contract(nb::module_& m) {
    m.def("contract_tables", &contract_tables,
          nb::sig("def contract_tables() -> dict[str, typing.Any]"),
          "The C++ twins' codes and record layouts (tests/test_contract.py checks them).");
}
