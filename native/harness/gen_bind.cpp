// Python bindings of the feed generators (twinmatch/gen.py is their documented face).
// Each call works on a whole chunk (megabytes of messages) with the GIL released, so a
// Python loop over chunks costs nothing next to the generation itself.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gen.hpp"
#include "../read_buffer.hpp"

namespace nb = nanobind;
using twinmatch::ReadBuffer;
using twinmatch::gen::Config;
using twinmatch::gen::MoldPcapWriter;
using twinmatch::gen::Simulator;

namespace {

nb::bytes to_bytes(const std::vector<std::uint8_t>& v) {
    return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

}  // namespace

void register_gen(nb::module_& m) {
    nb::class_<Simulator>(m, "GenSimulator",
                          "The exchange simulator of twinmatch.gen: a day of ITCH messages.")
        .def(
            "__init__",
            [](Simulator* self, std::uint64_t seed, std::uint64_t messages, std::uint32_t symbols,
               bool flow, bool all_types, bool intraday) {
                new (self) Simulator(Config{seed, messages, symbols, flow, all_types, intraday});
            },
            nb::arg("seed"), nb::arg("messages"), nb::arg("symbols"), nb::arg("flow"),
            nb::arg("all_types") = false, nb::arg("intraday") = false)
        .def(
            "next_chunk",
            [](Simulator& self, std::size_t min_bytes) {
                std::vector<std::uint8_t> out;
                {
                    nb::gil_scoped_release release;
                    out.reserve(min_bytes + 4096);
                    self.fill(out, min_bytes);
                }
                return to_bytes(out);
            },
            nb::arg("min_bytes"),
            "Whole framed messages, at least min_bytes unless the day ends; "
            "b'' once it has ended.")
        .def_prop_ro("done", &Simulator::done)
        .def_prop_ro("emitted", &Simulator::emitted)
        .def_prop_ro("live_orders", &Simulator::live_orders)
        .def(
            "counts",
            [](const Simulator& self) {
                std::map<std::string, std::uint64_t> d;
                const auto& c = self.counts();
                for (int t = 0; t < 256; ++t)
                    if (c[t]) d[std::string(1, static_cast<char>(t))] = c[t];
                return d;
            },
            "Messages written so far, by type character.")
        .def(
            "books_csv",
            [](const Simulator& self) {
                std::string s;
                {
                    nb::gil_scoped_release release;
                    s = self.books_csv();
                }
                return nb::bytes(s.data(), s.size());
            },
            "The books CSV of the simulator's books as they stand now.")
        .def_static("minimum_messages", &Simulator::minimum_messages, nb::arg("symbols"));

    nb::class_<MoldPcapWriter>(m, "GenPcapWriter",
                               "Packs framed ITCH messages into a MoldUDP64 pcap.")
        .def(nb::init<const std::string&, std::uint64_t, std::uint64_t, std::uint64_t>(),
             nb::arg("session"), nb::arg("window_ns"), nb::arg("heartbeat_ns"),
             nb::arg("epoch_s"))
        .def_static("global_header",
                    []() {
                        std::vector<std::uint8_t> out;
                        MoldPcapWriter::global_header(out);
                        return to_bytes(out);
                    })
        .def(
            "feed",
            [](MoldPcapWriter& self, nb::handle buffer) {
                ReadBuffer in(buffer);
                std::vector<std::uint8_t> out;
                {
                    nb::gil_scoped_release release;
                    out.reserve(in.size() + in.size() / 4 + 4096);
                    self.feed(in.data(), in.size(), out);
                }
                return to_bytes(out);
            },
            nb::arg("buffer"), "Whole framed messages in; the pcap records of finished packets out.")
        .def(
            "finish",
            [](MoldPcapWriter& self) {
                std::vector<std::uint8_t> out;
                self.finish(out);
                return to_bytes(out);
            },
            "The last packet and the end-of-session packet.")
        .def_prop_ro("packets", &MoldPcapWriter::packets)
        .def_prop_ro("heartbeats", &MoldPcapWriter::heartbeats)
        .def_prop_ro("next_seq", &MoldPcapWriter::next_seq);

    m.attr("GEN_MESSAGES_CSV_HEADER") = twinmatch::gen::kMessagesCsvHeader;
    // twinmatch/gen.py checks its arguments against this before calling in.
    m.attr("GEN_MAX_SYMBOLS") = twinmatch::gen::kMaxSymbols;
    m.def(
        "gen_messages_csv",
        [](nb::handle buffer) {
            ReadBuffer in(buffer);
            std::string s;
            {
                nb::gil_scoped_release release;
                s.reserve(in.size() * 2);
                twinmatch::gen::messages_csv(in.data(), in.size(), s);
            }
            return nb::bytes(s.data(), s.size());
        },
        nb::arg("buffer"), "Framed ITCH messages -> CSV rows (no header), one per message.");
}
