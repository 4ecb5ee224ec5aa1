// The whole pipeline (native/pipeline.hpp) end to end, built standalone (with
// -fsanitize=thread by `make sanitize-threads` and tests/test_pipeline.py): an order-flow
// feed from the exchange simulator (native/harness/gen.hpp) runs through every placement with
// tiny rings (so the stages stall and wake each other constantly), under the lossless and
// the drop policy, stopped from another thread, with a thread that fails to start, and
// with the stage counters packed (the false-sharing variant). Checks: every placement
// writes the same fills CSV; logged + dropped == produced; the failed start is an
// exception, not std::terminate. Exit status 0 = all held.
//
//   g++ -std=c++20 -O1 -g -fsanitize=thread -I native tests/native/pipeline_stress.cpp
//   ./a.out [messages]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "harness/gen.hpp"
#include "pipeline.hpp"

using namespace twinmatch;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAILED: %s\n", what.c_str());
        ++failures;
    }
}

// The fills CSV a run writes, read back from an unlinked temporary file.
struct Capture {
    std::FILE* f = std::tmpfile();
    ~Capture() { if (f) std::fclose(f); }
    int fd() const { return fileno(f); }
    std::string text() const {
        std::string s;
        std::rewind(f);
        char buf[1 << 16];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
        return s;
    }
};

template <bool kStageLines = true>
std::string run(const std::vector<std::uint8_t>& feed, PipelineConfig cfg, const char* label,
                PipelineStats* out = nullptr, bool stop_early = false) {
    Capture cap;
    BasicPipeline<kStageLines> p(cfg);
    std::jthread stopper;
    if (stop_early)  // another thread stops the parser while it runs
        stopper = std::jthread([&p] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            p.stop();
        });
    p.run(feed.data(), feed.size(), cap.fd());
    const PipelineStats& s = p.stats();
    check(s.error == itch::Error::Ok, std::string(label) + ": no decode error");
    check(s.fills_logged + s.fills_dropped == s.fills_produced,
          std::string(label) + ": logged + dropped == produced");
    check(s.matched == s.events, std::string(label) + ": every event matched");
    check(stop_early || s.consumed == feed.size(), std::string(label) + ": whole feed parsed");
    std::printf("%-28s records=%llu events=%llu fills=%llu logged=%llu dropped=%llu "
                "stalls=%llu/%llu placement=%d\n",
                label, (unsigned long long)s.records, (unsigned long long)s.events,
                (unsigned long long)s.fills_produced, (unsigned long long)s.fills_logged,
                (unsigned long long)s.fills_dropped, (unsigned long long)s.parser_stalls,
                (unsigned long long)s.engine_stalls, static_cast<int>(p.placement()));
    if (out) *out = s;
    return cap.text();
}

}  // namespace

int main(int argc, char** argv) {
    gen::Config g;
    g.messages = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20'000;
    g.symbols = 20;
    g.flow = true;
    g.seed = 5;
    gen::Simulator sim(g);
    std::vector<std::uint8_t> feed;
    while (sim.fill(feed, feed.size() + (1 << 20))) {
    }

    PipelineConfig base;
    base.mode = Mode::Match;
    base.ring_capacity = 8;  // tiny rings: the stages wait on each other all the time
    base.fill_capacity = 4;
    base.allow_tsc = false;  // steady_clock: the same clock on every core

    PipelineConfig fused = base;
    fused.placement = Placement::Fused;
    const std::string want = run(feed, fused, "fused");
    check(!want.empty(), "fused: some fills");

    for (auto [placement, wait, label] :
         {std::tuple{Placement::Shared, WaitKind::Yield, "shared, yield"},
          {Placement::Shared, WaitKind::Spin, "shared, spin"},
          {Placement::Pinned, WaitKind::Auto, "pinned (or its fallback)"},
          {Placement::Auto, WaitKind::Auto, "auto"}}) {
        PipelineConfig c = base;
        c.placement = placement;
        c.wait = wait;
        check(run(feed, c, label) == want, std::string(label) + ": same fills as fused");
    }

    PipelineConfig packed = base;
    packed.placement = Placement::Shared;
    check(run<false>(feed, packed, "shared, packed counters") == want,
          "packed counters: same fills as fused");

    PipelineConfig drop = base;
    drop.placement = Placement::Shared;
    drop.drop_fills = true;
    drop.logger_delay_ns = 2'000;
    run(feed, drop, "shared, drop, slow logger");

    PipelineConfig stopped = base;
    stopped.placement = Placement::Shared;
    stopped.logger_delay_ns = 1'000;
    PipelineStats st;
    const std::string part = run(feed, stopped, "shared, stopped", &st, /*stop_early=*/true);
    check(want.compare(0, part.size(), part) == 0, "stopped: a prefix of the full fills");

    for (int which = 1; which <= 3; ++which) {
        PipelineConfig c = base;
        c.placement = Placement::Shared;
        c.fail_spawn = which;
        Pipeline p(c);
        bool threw = false;
        try {
            p.run(feed.data(), feed.size(), -1);
        } catch (const std::system_error&) {
            threw = true;  // reached only if the started threads were joined
        }
        check(threw, "thread " + std::to_string(which) + " failing to start: an exception");
    }

    std::printf("pipeline_stress: %zu bytes, %s\n", feed.size(),
                failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
