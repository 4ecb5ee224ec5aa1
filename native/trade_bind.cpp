// Python bindings of the tick-to-trade loop (optimized/trade.py is its documented face).
//
// run_until() runs the whole loop in C++ with the GIL released, up to a deadline: the
// Python side calls it once per second of the run (for the per-second report), never per
// datagram or per message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "trade.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using twinmatch::trade::StrategyConfig;
using twinmatch::trade::Strategy;
using twinmatch::trade::Trader;
using twinmatch::trade::TradeStats;

namespace {

std::vector<std::uint64_t> as_list(const TradeStats& s) {
    const auto* p = reinterpret_cast<const std::uint64_t*>(&s);  // 14 u64s, no padding
    return {p, p + sizeof(TradeStats) / 8};
}

StrategyConfig config(std::uint64_t imbalance, std::uint64_t qty, std::int64_t cooldown_ns,
                      std::uint64_t max_per_second, std::uint64_t max_open,
                      std::uint64_t max_orders) {
    return StrategyConfig{imbalance, qty, cooldown_ns, max_per_second, max_open, max_orders};
}

std::string stock8(const nb::bytes& stock) {
    std::string s(stock.c_str(), std::min<std::size_t>(stock.size(), 8));
    s.resize(8, ' ');
    return s;
}

}  // namespace

void register_trade(nb::module_& m) {
    m.attr("TRADE_ORDER_BYTES") = twinmatch::trade::kOrderBytes;
    m.attr("TRADE_IO_URING") = kHaveIoUring;
    nb::class_<Strategy>(m, "TradeStrategy", "contract/trade.py's rule and risk checks")
        .def("__init__", [](Strategy* s, std::uint64_t imbalance, std::uint64_t qty,
                            std::int64_t cooldown_ns, std::uint64_t max_per_second,
                            std::uint64_t max_open, std::uint64_t max_orders) {
                 new (s) Strategy(config(imbalance, qty, cooldown_ns, max_per_second,
                                         max_open, max_orders));
             },
             "imbalance"_a, "qty"_a, "cooldown_ns"_a, "max_per_second"_a, "max_open"_a,
             "max_orders"_a)
        .def("decide", [](Strategy& s, std::uint16_t locate, nb::bytes stock, std::int64_t ts,
                          std::uint32_t bid, std::uint64_t bid_qty, std::uint32_t ask,
                          std::uint64_t ask_qty, std::uint64_t open) {
                 std::uint8_t out[twinmatch::trade::kOrderBytes];
                 const std::string name = stock8(stock);
                 const std::size_t n = s.decide(locate, name.data(), ts, bid, bid_qty, ask,
                                                ask_qty, open, out);
                 return nb::bytes(reinterpret_cast<const char*>(out), n);
             },
             "locate"_a, "stock"_a, "ts"_a, "bid"_a, "bid_qty"_a, "ask"_a, "ask_qty"_a,
             "open_orders"_a, "The framed order after one book message, or b''")
        .def("stats", [](const Strategy& s) { return as_list(s.st); })
        .def_rw("tripped", &Strategy::tripped)
        .def_ro("urn", &Strategy::urn);
    nb::class_<Trader>(m, "Trader", "Tick to trade: feed -> book -> strategy -> OUCH, in C++")
        .def("__init__", [](Trader* t, int port, int request_port, std::uint64_t start,
                            std::int64_t timeout_ns, std::uint32_t retries, std::size_t batch,
                            int rcvbuf, bool spin, nb::bytes session, std::size_t hold,
                            std::uint64_t max_jump, int order_fd, std::uint64_t imbalance,
                            std::uint64_t qty, std::int64_t cooldown_ns,
                            std::uint64_t max_per_second, std::uint64_t max_open,
                            std::uint64_t max_orders, int path) {
                 if (path < 0 || path > 2) throw std::invalid_argument("path must be 0..2");
                 new (t) Trader(port, request_port, start, timeout_ns, retries, batch, rcvbuf,
                                spin, std::string(session.c_str(), session.size()), hold,
                                max_jump, order_fd,
                                config(imbalance, qty, cooldown_ns, max_per_second, max_open,
                                       max_orders),
                                static_cast<twinmatch::trade::RxPath>(path));
             },
             "port"_a, "request_port"_a, "start"_a, "timeout_ns"_a, "retries"_a, "batch"_a,
             "rcvbuf"_a, "spin"_a, "session"_a, "hold"_a, "max_jump"_a, "order_fd"_a,
             "imbalance"_a, "qty"_a, "cooldown_ns"_a, "max_per_second"_a, "max_open"_a,
             "max_orders"_a, "path"_a = 0)
        .def_ro("port", &Trader::port)
        .def("socket_to_book", [](const Trader& t) {
                 const auto& h = t.socket_to_book;
                 return std::vector<std::uint64_t>{h.count(), h.percentile_ppm(500'000),
                                                   h.percentile_ppm(990'000),
                                                   h.percentile_ppm(999'000)};
             }, "(count, p50, p99, p99.9) ns, kernel receive to book, per datagram")
        .def_rw("request_port", &Trader::request_port)
        .def_ro("bad_itch", &Trader::bad_itch)
        .def_ro("batches", &Trader::batches)
        .def_ro("datagrams", &Trader::datagrams)
        .def_ro("stamp_cost_ns", &Trader::stamp_cost_ns)
        .def_ro("first_ns", &Trader::first_ns)
        .def_ro("stop_ns", &Trader::stop_ns)
        .def_prop_ro("clock", [](const Trader& t) { return std::string(t.clock_name()); })
        .def_prop_ro("stop", [](const Trader& t) { return static_cast<int>(t.stop); })
        .def("run_until", [](Trader& t, std::int64_t until, std::int64_t begin,
                             std::int64_t idle_ns, std::int64_t max_ns) {
                 nb::gil_scoped_release release;
                 return static_cast<int>(t.run_until(until, begin, idle_ns, max_ns));
             }, "until"_a, "begin"_a, "idle_ns"_a, "max_ns"_a,
             "Run the loop until it stops or until `until` (CLOCK_REALTIME ns); the stop code")
        .def("feed_stats", [](const Trader& t) {
                 const auto* p = reinterpret_cast<const std::uint64_t*>(&t.core.st);
                 return std::vector<std::uint64_t>(p, p + sizeof(t.core.st) / 8);
             })
        .def("missing", [](const Trader& t) { return t.core.missing(); })
        .def("trade_stats", [](const Trader& t) { return as_list(t.strategy.st); })
        .def("rows", [](const Trader& t) {
                 const std::size_t n = t.orders();
                 auto* data = new std::int64_t[n * twinmatch::trade::kStages + 1];
                 for (std::size_t i = 0; i < n; ++i)
                     std::copy(t.row(i + 1).begin(), t.row(i + 1).end(),
                               data + i * twinmatch::trade::kStages);
                 nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
                 return nb::ndarray<nb::numpy, std::int64_t, nb::ndim<2>>(
                     data, {n, twinmatch::trade::kStages}, owner);
             }, "One row per order: the STAGES stamps (0: not seen)")
        .def("sent_log", [](const Trader& t) {
                 return nb::bytes(reinterpret_cast<const char*>(t.sent_log()), t.sent_bytes());
             }, "Every order sent, in order, as sent")
        .def("books_csv", [](const Trader& t) { return t.market.books_csv(); });
}
