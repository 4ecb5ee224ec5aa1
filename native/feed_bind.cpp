// Python bindings of the live-feed receiver (optimized/feed.py is its documented face).
//
// poll() waits and reads with the GIL released. The delivered messages and their
// timestamps are numpy views of the receiver's own buffers, valid until take().
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "feed.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using twinmatch::feed::FeedStats;
using twinmatch::feed::Receiver;

namespace {

using InBuf = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using BytesView = nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<1>>;
using TimesView = nb::ndarray<nb::numpy, const std::int64_t, nb::ndim<2>>;

std::vector<std::uint64_t> stats(const Receiver& r) {
    const FeedStats& s = r.core.st;
    const auto* p = reinterpret_cast<const std::uint64_t*>(&s);  // 21 u64s, no padding
    return {p, p + sizeof(FeedStats) / 8};
}

// on_packet and check_gap may deliver a packet plus every held one: the delivery buffer
// must have that room, or the caller has not take()n what was delivered before.
void need_room(const Receiver& r) {
    if (!r.core.room(1)) throw std::runtime_error("feed receiver: take() the delivered messages first");
}

}  // namespace

using I64s = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using U64s = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using U16s = nb::ndarray<const std::uint16_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void register_feed(nb::module_& m) {
    m.attr("FEED_MAX_DATAGRAM") = twinmatch::feed::kMaxDatagram;
    m.attr("FEED_MAX_PENDING") = twinmatch::feed::kMaxPending;
    m.attr("FEED_MAX_BATCH") = twinmatch::feed::kMaxBatch;
    m.attr("FEED_MAX_HOLD") = twinmatch::feed::kMaxHold;
    m.attr("FEED_MAX_JUMP") = twinmatch::feed::kMaxJump;
    m.attr("FEED_RESYNC_PACKETS") = twinmatch::feed::kResyncPackets;
    nb::class_<twinmatch::feed::Sender>(m, "FeedSender",
                                        "Benchmark sender: pre-built packets, sendmmsg")
        .def("__init__", [](twinmatch::feed::Sender* p, InBuf raw, I64s starts, I64s ends,
                            U64s first_seq, U16s counts, int port, nb::bytes session) {
                 const std::size_t n = starts.shape(0);
                 if (ends.shape(0) != n || first_seq.shape(0) != n || counts.shape(0) != n)
                     throw std::invalid_argument("sender: starts, ends, first_seq, counts differ in length");
                 new (p) twinmatch::feed::Sender(raw.data(), raw.shape(0), starts.data(), ends.data(),
                                                 first_seq.data(), counts.data(), n, port,
                                                 std::string(session.c_str(), session.size()));
             },
             "raw"_a, "starts"_a, "ends"_a, "first_seq"_a, "counts"_a, "port"_a, "session"_a)
        .def_prop_ro("packets", &twinmatch::feed::Sender::packets)
        .def("send", [](twinmatch::feed::Sender& s, std::size_t first, std::size_t last,
                        std::size_t batch) {
                 nb::gil_scoped_release release;
                 return s.send(first, last, batch);
             }, "first"_a, "last"_a, "batch"_a, "Send packets [first, last); returns how many")
        .def("control", &twinmatch::feed::Sender::control, "next_seq"_a, "end"_a);
    nb::class_<Receiver>(m, "FeedReceiver", "MoldUDP64 receiver: recvmmsg batches, gap recovery")
        .def("__init__", [](Receiver* r, int port, int request_port, std::uint64_t start,
                            std::int64_t timeout_ns, std::uint32_t retries, std::size_t batch,
                            int rcvbuf, bool spin, int busy_poll_us, nb::bytes session,
                            std::size_t hold, std::uint64_t max_jump) {
                 new (r) Receiver(port, request_port, start, timeout_ns, retries, batch, rcvbuf,
                                  spin, busy_poll_us, std::string(session.c_str(), session.size()),
                                  hold, max_jump);
             },
             "port"_a, "request_port"_a, "start"_a, "timeout_ns"_a, "retries"_a, "batch"_a,
             "rcvbuf"_a, "spin"_a, "busy_poll_us"_a, "session"_a, "hold"_a, "max_jump"_a,
             "session: 10 bytes, or b\"\" to adopt the first data packet's")
        .def_ro("port", &Receiver::port)
        .def_rw("request_port", &Receiver::request_port)
        .def_ro("batch", &Receiver::batch)
        .def_ro("busy_poll_error", &Receiver::busy_poll_error)
        .def_ro("batches", &Receiver::batches)
        .def_ro("batch_datagrams", &Receiver::batch_datagrams)
        .def("poll", [](Receiver& r, std::int64_t timeout_ns) {
                 nb::gil_scoped_release release;
                 return r.poll_once(timeout_ns);
             }, "timeout_ns"_a, "Wait up to timeout_ns, then read until the socket is empty")
        .def("on_packet", [](Receiver& r, InBuf buf, std::int64_t t_kernel, std::int64_t t_user) {
                 need_room(r);
                 r.core.on_packet(buf.data(), buf.shape(0), t_kernel, t_user);
             }, "payload"_a, "t_kernel"_a, "t_user"_a, "Account for one datagram's payload")
        .def("check_gap", [](Receiver& r, std::int64_t now) {
                 need_room(r);
                 r.check_gap(now);
             }, "now_ns"_a)
        .def("out", [](nb::handle self) {
                 Receiver& r = nb::cast<Receiver&>(self);
                 return BytesView(r.core.out(), {r.core.out_len()}, self);
             }, nb::rv_policy::reference_internal)
        .def("times", [](nb::handle self) {
                 Receiver& r = nb::cast<Receiver&>(self);
                 return TimesView(r.core.times(), {r.core.delivered_packets(), 2}, self);
             }, nb::rv_policy::reference_internal)
        .def("take", [](Receiver& r) { r.core.take(); })
        .def("stats", &stats)
        .def("missing", [](const Receiver& r) { return r.core.missing(); })
        .def("done", [](const Receiver& r) { return r.core.done(); })
        .def("held", [](const Receiver& r) { return r.core.held(); })
        .def_prop_ro("expected", [](const Receiver& r) { return r.core.expected; })
        .def_prop_ro("known", [](const Receiver& r) { return r.core.known; })
        .def_prop_ro("request_deadline", [](const Receiver& r) {
            return r.core.request_on ? r.core.request_deadline : std::int64_t{-1};
        });
}
