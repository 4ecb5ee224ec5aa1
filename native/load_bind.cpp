// Python binding of chapter 12's native load client (native/load.hpp); twinmatch/load.py's
// run_load(client="native") calls it. The run releases the GIL for its whole life; its
// failures come back as the exceptions the Python client raises: ConnectionError
// (refused, closed by the server, login rejected) and TimeoutError (logins too slow).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <exception>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "load.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// The latencies as a numpy int64 array without a copy: the vector moves into a capsule
// that the array owns and frees.
using Latencies = nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>;

Latencies latencies_array(std::vector<std::int64_t>& v) {
    auto* owned = new std::vector<std::int64_t>(std::move(v));
    nb::capsule owner(owned, [](void* p) noexcept {
        delete static_cast<std::vector<std::int64_t>*>(p);
    });
    return Latencies(owned->data(), {owned->size()}, owner);
}

}  // namespace

void register_load(nb::module_& m) {
    // load::Error -> the Python client's exception types (the translator runs with the
    // GIL held, after the run has ended).
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const twinmatch::load::Error& e) {
            PyErr_SetString(e.kind == twinmatch::load::Error::Timeout ? PyExc_TimeoutError
                                                                      : PyExc_ConnectionError,
                            e.what());
        }
    });
    m.def(
        "run_load_native",
        [](int port, int sessions, std::int64_t requests, bool open, double rate, int window,
           double cancel_share, double replace_share, std::uint64_t seed, double timeout,
           int first_user, bool pace) {
            twinmatch::load::Params p;
            p.port = port;
            p.sessions = sessions;
            p.requests = requests;
            p.open = open;
            p.rate = rate;
            p.window = window;
            p.cancel_share = cancel_share;
            p.replace_share = replace_share;
            p.seed = seed;
            p.timeout = timeout;
            p.first_user = first_user;
            p.pace = pace;
            twinmatch::load::check(p);               // ValueError, before any socket
            twinmatch::load::Result r;
            // Every 100 ms the run takes the GIL for a moment to see whether a signal
            // came (Ctrl-C); if so, the KeyboardInterrupt stays set and is raised here.
            auto interrupted = [] {
                nb::gil_scoped_acquire locked;
                return PyErr_CheckSignals() != 0;
            };
            try {
                nb::gil_scoped_release unlocked;     // the whole run: no Python inside
                r = twinmatch::load::run(p, interrupted);
            } catch (const twinmatch::load::Interrupted&) {
                throw nb::python_error();            // the error PyErr_CheckSignals set
            }
            return std::make_tuple(r.sent, r.acks, r.seconds, r.unanswered, r.late_sends,
                                   latencies_array(r.latencies_ns),
                                   latencies_array(r.send_delays_ns));
        },
        "port"_a, "sessions"_a, "requests"_a, "open"_a, "rate"_a, "window"_a, "cancel_share"_a,
        "replace_share"_a, "seed"_a, "timeout"_a, "first_user"_a, "pace"_a,
        "Chapter 12's load client in C++ (native/load.hpp), GIL released.\n\n"
        "Returns (sent, acks, seconds, unanswered, late_sends, latencies_ns, send_delays_ns).");
}
