// Python bindings of the PCAP scanner (optimized/pcap.py is its documented face).
#include <cstdlib>
#include <cstring>
#include <new>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>

#include "pcap.hpp"

namespace nb = nanobind;
using twinmatch::pcap::Scanner;

namespace {

// A read-only view of any contiguous bytes-like buffer (numpy.frombuffer(bytes) is zero-copy).
using InBuf = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>;

// One malloc per call, sized to the input (the output never exceeds it), shrunk afterwards;
// the numpy array owns it through the capsule. No allocation inside the scan itself.
std::tuple<OutArray, std::size_t> feed(Scanner& scanner, InBuf buf) {
    const std::size_t n = buf.shape(0);
    auto* out = static_cast<std::uint8_t*>(std::malloc(n ? n : 1));
    if (!out) throw std::bad_alloc();
    std::size_t used = 0, out_len = 0;
    {
        nb::gil_scoped_release release;  // other Python threads run while we scan
        used = scanner.feed(buf.data(), n, out, out_len);
    }
    if (out_len < n) {
        if (auto* smaller = static_cast<std::uint8_t*>(std::realloc(out, out_len ? out_len : 1)))
            out = smaller;
    }
    nb::capsule owner(out, [](void* p) noexcept { std::free(p); });
    OutArray arr(out, {out_len}, owner);
    return {arr, used};
}

// latin-1: every byte maps to one code point, as in the naive twin.
nb::str latin1(const char* p, std::size_t n) {
    return nb::steal<nb::str>(PyUnicode_DecodeLatin1(p, static_cast<Py_ssize_t>(n), nullptr));
}

nb::dict stats(const Scanner& s) {
    const auto& st = s.stats;
    nb::dict d;
#define TM_STAT(name) d[#name] = st.name
    TM_STAT(nanosecond); TM_STAT(big_endian); TM_STAT(snaplen); TM_STAT(packets);
    TM_STAT(truncated); TM_STAT(non_ipv4); TM_STAT(non_udp); TM_STAT(ipv4_fragments);
    TM_STAT(malformed); TM_STAT(not_moldudp64); TM_STAT(bad_moldudp64); TM_STAT(moldudp64);
    TM_STAT(unsequenced); TM_STAT(heartbeats); TM_STAT(end_of_session); TM_STAT(messages);
    TM_STAT(gaps); TM_STAT(gap_messages); TM_STAT(first_gap_seq); TM_STAT(duplicate_packets);
    TM_STAT(duplicate_messages); TM_STAT(streams); TM_STAT(untracked); TM_STAT(filtered);
    TM_STAT(next_seq);
#undef TM_STAT
    // latin-1: every byte maps to one code point, as in the naive twin. An unseen session
    // is all zero bytes here but "" in the naive twin, so cut at the first MoldUDP64 packet.
    nb::str session = st.moldudp64 == 0
        ? nb::str("")
        : latin1(st.session, 10);
    d["session"] = session;
    return d;
}

// Each stream's own counts, keys as contract/pcap.py's STREAM_KEYS, in order of first sight.
nb::list streams(const Scanner& s) {
    nb::list out;
    for (std::size_t i = 0; i < s.stats.streams; ++i) {
        const auto& st = s.streams[i];
        nb::dict d;
        d["group"] = nb::str("{}.{}.{}.{}").format(st.group >> 24, (st.group >> 16) & 0xFF,
                                                    (st.group >> 8) & 0xFF, st.group & 0xFF);
        d["port"] = st.port;
        d["session"] = latin1(st.session, 10);
        d["packets"] = st.packets;
        d["messages"] = st.messages;
        d["gaps"] = st.gaps;
        d["gap_messages"] = st.gap_messages;
        d["next_seq"] = st.have_expected ? st.expected : 0;
        out.append(d);
    }
    return out;
}

// group: -1 = any, else the address as a big-endian u32; port: -1 = any; session: 10 bytes
// or empty = any.
void set_filter(Scanner& s, std::int64_t group, std::int32_t port, nb::bytes session) {
    s.filter.group_on = group >= 0;
    s.filter.group = group >= 0 ? static_cast<std::uint32_t>(group) : 0;
    s.filter.port_on = port >= 0;
    s.filter.port = port >= 0 ? static_cast<std::uint16_t>(port) : 0;
    s.filter.session_on = session.size() == 10;
    if (s.filter.session_on) std::memcpy(s.filter.session, session.c_str(), 10);
}

}  // namespace

void register_pcap(nb::module_& m) {
    nb::class_<Scanner>(m, "PcapScanner", "Classic PCAP -> MoldUDP64 message blocks, by chunks")
        .def(nb::init<>())
        .def("feed", &feed, nb::arg("buffer"),
             "Consume whole records; return (framed message blocks as uint8 array, bytes used)")
        .def("stats", &stats, nb::sig("def stats(self) -> dict[str, int | str]"))
        .def("streams", &streams, nb::sig("def streams(self) -> list[dict[str, int | str]]"))
        .def("set_filter", &set_filter, nb::arg("group"), nb::arg("port"), nb::arg("session"),
             "Read only this destination group (-1: any), UDP port (-1: any), session (b'': any)")
        .def_ro("max_record", &Scanner::max_record)
        .def_ro("header_done", &Scanner::header_done)
        .def_ro("big_endian", &Scanner::big_endian)
        .def_ro("offset", &Scanner::offset)
        .def_prop_ro("error", [](const Scanner& s) { return static_cast<int>(s.error); })
        .def_ro("error_value", &Scanner::error_value);
}
