// Python bindings of the order-entry server (optimized/entry.py wraps them). run() is the
// event loop and releases the GIL for its whole life; stop() may be called from any
// thread and ends it within one epoll wait (20 ms) plus the bounded goodbye (500 ms).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "entry.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace twinmatch::entry;

namespace {

Config make_config(const std::vector<std::string>& users,
                                    const std::vector<std::string>& passwords,
                                    const std::vector<std::string>& symbols,
                                    const std::string& session, std::int64_t heartbeat_ms,
                                    std::int64_t idle_timeout_ms, std::int64_t login_timeout_ms,
                                    std::size_t max_sessions, std::size_t prelogin_max,
                                    std::size_t out_limit, bool fixed_clock, int sndbuf) {
    // The Python side (contract.soupbin.EntryConfig.check) has already checked ranges.
    if (users.size() != passwords.size() || users.empty() || symbols.empty() || session.empty() ||
        session.size() > 10 || max_sessions < 1 || prelogin_max < 1)
        throw std::invalid_argument("entry server: bad configuration");
    Config c;
    c.users = users;
    c.passwords = passwords;
    for (const std::string& s : symbols) {
        if (s.size() > 8) throw std::invalid_argument("entry server: symbol over 8 bytes");
        std::array<char, 8> a;
        a.fill(' ');
        std::copy(s.begin(), s.end(), a.begin());
        c.symbols.push_back(a);
    }
    c.session.fill(' ');
    std::copy(session.begin(), session.end(), c.session.end() - session.size());
    c.heartbeat_ms = heartbeat_ms;
    c.idle_timeout_ms = idle_timeout_ms;
    c.login_timeout_ms = login_timeout_ms;
    c.max_sessions = max_sessions;
    c.prelogin_max = prelogin_max;
    c.out_limit = out_limit;
    c.fixed_clock = fixed_clock;
    c.sndbuf = sndbuf;
    return c;
}

}  // namespace

void register_entry(nb::module_& m) {
    nb::class_<Server>(m, "EntryServerCore",
                       "Chapter 12's order-entry server (native/entry.hpp): one thread, epoll")
        .def("__init__",
             [](Server* self, const std::vector<std::string>& users,
                const std::vector<std::string>& passwords, const std::vector<std::string>& symbols,
                const std::string& session, std::int64_t heartbeat_ms, std::int64_t idle_timeout_ms,
                std::int64_t login_timeout_ms, std::size_t max_sessions, std::size_t prelogin_max,
                std::size_t out_limit, bool fixed_clock, int sndbuf, std::uint16_t port,
                const std::string& itch_out) {
                 new (self) Server(make_config(users, passwords, symbols, session, heartbeat_ms,
                                               idle_timeout_ms, login_timeout_ms, max_sessions,
                                               prelogin_max, out_limit, fixed_clock, sndbuf),
                                   port, itch_out);
             },
             "users"_a, "passwords"_a, "symbols"_a, "session"_a, "heartbeat_ms"_a,
             "idle_timeout_ms"_a, "login_timeout_ms"_a, "max_sessions"_a, "prelogin_max"_a,
             "out_limit"_a,
             "fixed_clock"_a, "sndbuf"_a, "port"_a, "itch_out"_a = "")
        .def_prop_ro("port", &Server::port)
        .def("run", &Server::run, nb::call_guard<nb::gil_scoped_release>(),
             "The event loop, until stop() (GIL released)")
        .def("stop", &Server::stop, "Ask run() to end (any thread)")
        .def("timings", [](const Server& s) { return s.timings(); },
             "Server-side read-to-write times in ns, one per read (after run() returned)")
        .def("stats", [](const Server& s) {
            std::vector<std::uint64_t> out;
            for (int k = 0; k < kStats; ++k) out.push_back(s.stat(k));
            return out;
        });
}
