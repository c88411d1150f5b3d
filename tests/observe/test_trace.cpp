// The profiler's recording, its scaling report and its files: Scope on a null
// and a real track, the report's accounting and reading on tracks built by
// hand (a straggler, a communication-bound step, data-bound, balanced, one
// replica, nothing recorded), the bus bandwidth against a figure worked out
// here, and profiler::start/stop writing a trace whose JSON parses and whose
// spans nest on every thread, with the errors of a misused session.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/io/json.hpp"
#include "lockstep/observe/profiler.hpp"
#include "lockstep/observe/scaling_report.hpp"
#include "lockstep/observe/trace.hpp"

using lockstep::Error;
using lockstep::observe::Phase;
using lockstep::observe::ReportInputs;
using lockstep::observe::Scope;
using lockstep::observe::Span;
using lockstep::observe::Track;

namespace {

constexpr std::int64_t kMs = 1'000'000;

// A span from `begin` to `end` milliseconds after `base`.
Span span(Phase phase, const char* name, std::int64_t base, double begin, double end, std::uint64_t value = 0,
          const char* detail = nullptr) {
  return Span{name, detail, phase, base + std::llround(begin * kMs), base + std::llround(end * kMs), value};
}

// Adds the spans in the order a real step records them: each when it ends,
// children before their parents.
void add_in_end_order(Track& t, std::vector<Span> spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.end_ns != b.end_ns) return a.end_ns < b.end_ns;
    return a.begin_ns > b.begin_ns;  // the inner one ends first
  });
  for (const Span& s : spans) t.add(s);
}

// Three steps of 34 ms. Replica 0 computes 11 ms and then waits 18 ms inside
// the all-reduce for replica 1, whose forward, loss and backward take three
// times as long (27 ms against 9 ms); both then move 4 MB in 4 ms.
void straggler_tracks(Track& fast, Track& slow) {
  for (int step = 0; step < 3; ++step) {
    const std::int64_t base = 1000 * kMs + step * 34 * kMs;
    const auto s = static_cast<std::uint64_t>(10 + step);
    add_in_end_order(fast, {span(Phase::kStep, "step", base, 0, 34, s), span(Phase::kData, "data", base, 0, 1),
                            span(Phase::kForward, "dense", base, 1, 4), span(Phase::kLoss, "loss", base, 4, 5),
                            span(Phase::kBackward, "dense", base, 5, 10),
                            span(Phase::kCollective, "HostAllReduce", base, 10, 32, 4'000'000, "ring"),
                            span(Phase::kWait, "barrier", base, 10, 28), span(Phase::kUpdate, "sgd", base, 32, 34)});
    add_in_end_order(slow, {span(Phase::kStep, "step", base, 0, 34, s), span(Phase::kData, "data", base, 0, 1),
                            span(Phase::kForward, "dense", base, 1, 10), span(Phase::kLoss, "loss", base, 10, 13),
                            span(Phase::kBackward, "dense", base, 13, 28),
                            span(Phase::kCollective, "HostAllReduce", base, 28, 32, 4'000'000, "ring"),
                            span(Phase::kUpdate, "sgd", base, 32, 34)});
  }
}

// One step of 14 ms per replica: 5 ms of compute, then an all-reduce of
// 16 MB that takes 9 ms, 1 ms of it waiting.
void communication_bound_track(Track& t) {
  for (int step = 0; step < 2; ++step) {
    const std::int64_t base = step * 14 * kMs;
    add_in_end_order(t, {span(Phase::kStep, "step", base, 0, 14, static_cast<std::uint64_t>(step)),
                         span(Phase::kForward, "dense", base, 0, 2), span(Phase::kBackward, "dense", base, 2, 4),
                         span(Phase::kCollective, "HostAllReduce", base, 4, 13, 16'000'000, "ring"),
                         span(Phase::kWait, "barrier", base, 4, 5), span(Phase::kUpdate, "sgd", base, 13, 14)});
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("trace: a Scope on a null track records nothing, and the session hands out none when idle") {
  { Scope idle(nullptr, Phase::kForward, "dense", 3, "detail"); }
  Track t(0, 0);
  { Scope nothing(nullptr, Phase::kStep, "step"); }
  CHECK(t.spans().empty());
  REQUIRE_FALSE(lockstep::profiler::active());
  CHECK(lockstep::observe::session().track(0) == nullptr);
}

TEST_CASE("trace: nested Scopes record the child before the parent, inside the parent's times") {
  Track t(0, 1);
  {
    Scope step(&t, Phase::kStep, "step", 41);
    {
      Scope forward(&t, Phase::kForward, "dense_1");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    Scope collective(&t, Phase::kCollective, "HostAllReduce", 4096, "ring");
    Scope wait(&t, Phase::kWait, "barrier");
  }
  REQUIRE(t.spans().size() == 4);
  const Span& forward = t.spans()[0];
  const Span& wait = t.spans()[1];
  const Span& collective = t.spans()[2];
  const Span& step = t.spans()[3];
  CHECK(forward.phase == Phase::kForward);
  CHECK(std::string(forward.name) == "dense_1");
  CHECK(forward.end_ns - forward.begin_ns >= 50'000);
  CHECK(wait.phase == Phase::kWait);
  CHECK(collective.phase == Phase::kCollective);
  CHECK(collective.value == 4096);
  CHECK(std::string(collective.detail) == "ring");
  CHECK(step.phase == Phase::kStep);
  CHECK(step.value == 41);
  for (const Span* inner : {&forward, &wait, &collective}) {
    CHECK(step.begin_ns <= inner->begin_ns);
    CHECK(inner->begin_ns <= inner->end_ns);
    CHECK(inner->end_ns <= step.end_ns);
  }
  CHECK(forward.end_ns <= collective.begin_ns);
  CHECK(collective.begin_ns <= wait.begin_ns);
  CHECK(wait.end_ns <= collective.end_ns);
}

TEST_CASE("trace: exclusive time counts a wait inside a collective as waiting, the rest as communication") {
  Track t(0, 0);
  add_in_end_order(t, {span(Phase::kStep, "step", 0, 0, 10, 0), span(Phase::kForward, "dense", 0, 0, 4),
                       span(Phase::kCollective, "HostAllReduce", 0, 4, 10, 0), span(Phase::kWait, "barrier", 0, 5, 7)});
  const auto tree = lockstep::observe::detail::span_tree(t.spans());
  for (std::size_t i = 0; i < t.spans().size(); ++i) {
    const Span& s = t.spans()[i];
    if (s.phase == Phase::kStep) {
      CHECK(tree.self_ns[i] == 0);
      CHECK(tree.step[i] == -1);
    } else {
      REQUIRE(tree.step[i] >= 0);
      CHECK(t.spans()[static_cast<std::size_t>(tree.step[i])].phase == Phase::kStep);
    }
    if (s.phase == Phase::kCollective) CHECK(tree.self_ns[i] == 4 * kMs);
    if (s.phase == Phase::kWait) {
      CHECK(tree.self_ns[i] == 2 * kMs);
      CHECK(t.spans()[static_cast<std::size_t>(tree.parent[i])].phase == Phase::kCollective);
    }
  }
}

TEST_CASE("trace: a wait added after its step, as long as its collective, still nests inside it") {
  Track t(0, 0);
  add_in_end_order(t, {span(Phase::kStep, "step", 0, 0, 10, 0), span(Phase::kForward, "dense", 0, 0, 4),
                       span(Phase::kCollective, "HostAllReduce", 0, 4, 10, 6'000'000)});
  t.add(span(Phase::kWait, "waiting for the other replicas", 0, 4, 10));  // as mark_collective_waits adds it
  const auto tree = lockstep::observe::detail::span_tree(t.spans());
  CHECK(t.spans()[static_cast<std::size_t>(tree.parent[3])].phase == Phase::kCollective);
  CHECK(tree.self_ns[3] == 6 * kMs);
  ReportInputs in;
  in.global_replicas = 1;
  const std::string report = lockstep::observe::scaling_report({&t}, in);
  INFO(report);
  CHECK(report.find("      0      1     10.000 ms    40.0%           0.0%    60.0%    0.0%         0.0%") !=
        std::string::npos);
  CHECK(report.find("no time outside waiting to measure a bandwidth over") != std::string::npos);
}

TEST_CASE("trace: the report names the straggler and the replica that waits for it") {
  Track fast(0, 0), slow(0, 1);
  straggler_tracks(fast, slow);
  ReportInputs in;
  in.global_replicas = 2;
  const std::string report = lockstep::observe::scaling_report({&fast, &slow}, in);
  INFO(report);
  // Replica 0: compute 11 of 34 ms, communication 4, waiting 18, data 1.
  CHECK(report.find("      0      3     34.000 ms    32.4%          11.8%    52.9%    2.9%         0.0%") !=
        std::string::npos);
  CHECK(report.find("      1      3     34.000 ms    85.3%          11.8%     0.0%    2.9%         0.0%") !=
        std::string::npos);
  CHECK(report.find("global steps 10 to 12") != std::string::npos);
  CHECK(report.find("slowest replica: 1 (34.000 ms of non-waiting time per step); the others waited for it 52.9%") !=
        std::string::npos);
  // 4 MB in the 4 ms outside the wait: 1 GB/s, times 2(2-1)/2 = 1.
  CHECK(report.find("HostAllReduce (ring): 6 calls, 4.00 MB each, algorithm bandwidth 1.00 GB/s, bus bandwidth 1.00 GB/s") !=
        std::string::npos);
  CHECK(report.find("reading: replica 0 waited 53% of each step for replica 1: a straggler.") != std::string::npos);
}

TEST_CASE("trace: a communication-bound step reads as such, with the bus bandwidth worked out by hand") {
  Track a(1, 2), b(1, 3);
  communication_bound_track(a);
  communication_bound_track(b);
  ReportInputs in;
  in.global_replicas = 4;  // two processes of two replicas: this rank sees two
  in.reference_bus_bandwidth_gbps = 12;
  in.rank = 1;
  in.processes = 2;
  const std::string report = lockstep::observe::scaling_report({&a, &b}, in);
  INFO(report);
  CHECK(report.find("rank 1 of 2, 2 replicas here of 4 in all") != std::string::npos);
  // 16 MB over the 8 ms outside the wait: 2 GB/s; bus: 2 x 2(4-1)/4 = 3 GB/s, a quarter of 12.
  CHECK(report.find("HostAllReduce (ring): 4 calls, 16.00 MB each, algorithm bandwidth 2.00 GB/s, bus bandwidth 3.00 "
                    "GB/s, 25% of the 12.0 GB/s benchmarks/all_reduce measured") != std::string::npos);
  // 8 of 14 ms in the collective itself: 57%.
  CHECK(report.find("reading: the all-reduce is 57% of the step: a larger per-replica batch would scale better.") !=
        std::string::npos);
  CHECK(report.find("straggler") == std::string::npos);
  CHECK(report.find("slowest replica: 2 (13.000 ms of non-waiting time per step, every replica within 5% of it)") !=
        std::string::npos);
}

TEST_CASE("trace: data-bound, balanced and single-replica readings") {
  SUBCASE("data loading") {
    Track t(0, 0), u(0, 1);
    for (Track* track : {&t, &u})
      add_in_end_order(*track, {span(Phase::kStep, "step", 0, 0, 10, 0), span(Phase::kData, "data", 0, 0, 3),
                                span(Phase::kCopy, "h2d", 0, 3, 4, 100), span(Phase::kForward, "dense", 0, 4, 10)});
    const std::string report = lockstep::observe::scaling_report({&t, &u}, ReportInputs{});
    CHECK(report.find("reading: data loading is 40% of the step") != std::string::npos);
  }
  SUBCASE("balanced") {
    Track t(0, 0), u(0, 1);
    for (Track* track : {&t, &u})
      add_in_end_order(*track, {span(Phase::kStep, "step", 0, 0, 10, 0), span(Phase::kForward, "dense", 0, 0, 9),
                                span(Phase::kCollective, "HostAllReduce", 0, 9, 10, 1000)});
    const std::string report = lockstep::observe::scaling_report({&t, &u}, ReportInputs{});
    CHECK(report.find("reading: the replicas are balanced: compute is 90% of the step.") != std::string::npos);
  }
  SUBCASE("one replica never reads as a straggler, and has no bus bandwidth") {
    Track t(0, 0);
    add_in_end_order(t, {span(Phase::kStep, "step", 0, 0, 10, 0), span(Phase::kForward, "dense", 0, 0, 7),
                         span(Phase::kCollective, "HostAllReduce", 0, 7, 10, 3000), span(Phase::kWait, "w", 0, 7, 9)});
    ReportInputs in;
    in.global_replicas = 1;
    const std::string report = lockstep::observe::scaling_report({&t}, in);
    CHECK(report.find("straggler") == std::string::npos);
    CHECK(report.find("slowest replica") == std::string::npos);
    CHECK(report.find("no bus bandwidth") != std::string::npos);
    CHECK(report.find("reading: one replica: compute is 70% of the step.") != std::string::npos);
  }
  SUBCASE("one replica here of several waits for another process") {
    Track t(0, 0);
    add_in_end_order(t, {span(Phase::kStep, "step", 0, 0, 10, 0), span(Phase::kForward, "dense", 0, 0, 5),
                         span(Phase::kCollective, "MpiAllReduce", 0, 5, 10, 3000), span(Phase::kWait, "w", 0, 5, 8)});
    ReportInputs in;
    in.global_replicas = 2;
    const std::string report = lockstep::observe::scaling_report({&t}, in);
    CHECK(report.find("reading: replica 0 waited 30% of each step for the replicas of other processes") !=
          std::string::npos);
  }
}

TEST_CASE("trace: a report on nothing says so and why") {
  Track empty(0, 0), stray(0, 1);
  stray.add(span(Phase::kForward, "dense", 0, 0, 1));
  const std::string none = lockstep::observe::scaling_report({&empty, nullptr}, ReportInputs{});
  CHECK(none.find("Nothing was recorded: no replica recorded a span") != std::string::npos);
  CHECK(none.find("Profiled<...>") != std::string::npos);
  CHECK(none.find("no training step ran between start() and stop()") != std::string::npos);
  const std::string no_step = lockstep::observe::scaling_report({&stray}, ReportInputs{});
  CHECK(no_step.find("recorded 1 span but no step") != std::string::npos);
}

TEST_CASE("trace: JSON strings are escaped, and bytes that are not UTF-8 replaced") {
  using lockstep::observe::detail::json_string;
  CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_string("tab\there\nnl\x01") == "\"tab\\there\\nnl\\u0001\"");
  CHECK(json_string("caf\xc3\xa9 \xe2\x82\xac") == "\"caf\xc3\xa9 \xe2\x82\xac\"");   // é and € pass as they are
  CHECK(json_string("bad\xff\xc3(\xed\xa0\x80") == "\"bad\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd\"");  // a surrogate too
  CHECK(lockstep::observe::detail::micros(1'234'567) == "1234.567");
  CHECK(lockstep::observe::detail::micros(5) == "0.005");
  CHECK(lockstep::observe::detail::micros(-1'500) == "-1.500");
}

namespace {

struct Event {
  std::string name, cat;
  std::int64_t ts_ns, dur_ns;
  int tid;
};

// Checks that the complete events of each tid nest: sorted by begin (the
// longer first), each event lies inside the innermost open one or after it.
void check_nesting(std::vector<Event> events) {
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.ts_ns != b.ts_ns) return a.ts_ns < b.ts_ns;
    return a.dur_ns > b.dur_ns;
  });
  std::vector<const Event*> open;
  int tid = -1;
  for (const Event& e : events) {
    if (e.tid != tid) {
      open.clear();
      tid = e.tid;
    }
    while (!open.empty() && open.back()->ts_ns + open.back()->dur_ns <= e.ts_ns) open.pop_back();
    if (!open.empty()) {
      INFO("tid ", e.tid, ": '", e.name, "' at ", e.ts_ns, " ns for ", e.dur_ns, " ns inside '", open.back()->name,
           "' at ", open.back()->ts_ns, " for ", open.back()->dur_ns);
      CHECK(e.ts_ns + e.dur_ns <= open.back()->ts_ns + open.back()->dur_ns);
    }
    open.push_back(&e);
  }
}

}  // namespace

TEST_CASE("trace: profiler start and stop write a trace that parses, one nesting thread per replica") {
  lockstep::testing::TempDir dir("lockstep_test_trace");
  const std::string logdir = dir.file("logs/run1");  // made with its parent
  lockstep::observe::session().set_process(0, 1, 2);
  lockstep::profiler::start(logdir);
  CHECK(lockstep::profiler::active());
  static const char* const kOdd = "dense \"1\"\n\\";
  const auto replica = [](int r) {
    auto& session = lockstep::observe::session();
    for (std::uint64_t step = 0; step < 3; ++step) {
      REQUIRE(session.recording());
      Track* t = session.track(r);
      Scope s(t, Phase::kStep, "step", step);
      { Scope d(t, Phase::kData, "data"); }
      {
        Scope f(t, Phase::kForward, kOdd);
        std::this_thread::sleep_for(std::chrono::microseconds(100 * (r + 1)));
      }
      { Scope b(t, Phase::kBackward, kOdd); }
      {
        Scope c(t, Phase::kCollective, "HostAllReduce", 1024, "ring");
        Scope w(t, Phase::kWait, "barrier");
      }
      { Scope u(t, Phase::kUpdate, "sgd"); }
    }
  };
  std::thread zero(replica, 0), one(replica, 1);
  zero.join();
  one.join();
  const lockstep::profiler::Result result = lockstep::profiler::stop();
  CHECK_FALSE(lockstep::profiler::active());
  CHECK(lockstep::observe::session().track(0) == nullptr);

  CHECK(result.trace_path == (std::filesystem::path(logdir) / "lockstep.rank0.trace.json").string());
  CHECK(result.report_path == (std::filesystem::path(logdir) / "scaling_report.rank0.txt").string());
  CHECK(read_text(result.report_path) == result.report);
  CHECK(result.report.find("2 replicas here of 2 in all") != std::string::npos);
  CHECK(result.report.find("HostAllReduce (ring): 6 calls") != std::string::npos);
  for (const auto& entry : std::filesystem::directory_iterator(logdir))  // no temporary left behind
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);

  const std::string text = read_text(result.trace_path);
  const lockstep::io::Json doc = lockstep::io::detail::JsonReader(text, "trace").document();
  REQUIRE(doc.type == lockstep::io::Json::Type::kObject);
  REQUIRE(doc.find("displayTimeUnit"));
  CHECK(doc.find("displayTimeUnit")->text == "ns");
  const lockstep::io::Json* events = doc.find("traceEvents");
  REQUIRE(events);
  REQUIRE(events->type == lockstep::io::Json::Type::kArray);
  std::vector<Event> complete;
  std::vector<std::string> thread_names;
  bool process_named = false;
  int steps = 0, odd_names = 0;
  for (const lockstep::io::Json& e : events->items) {
    const std::string ph = e.find("ph")->text;
    CHECK(e.find("pid")->number == 0);
    const lockstep::io::Json* args = e.find("args");
    if (ph == "M") {
      if (e.find("name")->text == "process_name") {
        process_named = args->find("name")->text.rfind("rank 0 on ", 0) == 0;
      } else if (e.find("name")->text == "thread_name") {
        thread_names.push_back(args->find("name")->text);
        CHECK(args->find("name")->text == "replica " + std::to_string(static_cast<int>(e.find("tid")->number)));
      }
      continue;
    }
    REQUIRE(ph == "X");
    Event ev{e.find("name")->text, e.find("cat")->text, std::llround(e.find("ts")->number * 1000),
             std::llround(e.find("dur")->number * 1000), static_cast<int>(e.find("tid")->number)};
    CHECK(ev.ts_ns >= 0);
    CHECK(ev.dur_ns >= 0);
    if (ev.cat == "step") {
      ++steps;
      REQUIRE(args);
      CHECK(args->find("step")->number >= 0);
    }
    if (ev.cat == "collective") {
      REQUIRE(args);
      CHECK(args->find("bytes")->number == 1024);
      CHECK(args->find("algorithm")->text == "ring");
    }
    if (ev.name == kOdd) ++odd_names;
    complete.push_back(ev);
  }
  CHECK(process_named);
  std::sort(thread_names.begin(), thread_names.end());
  CHECK(thread_names == std::vector<std::string>{"replica 0", "replica 1"});
  CHECK(steps == 6);
  CHECK(odd_names == 12);
  CHECK(complete.size() == 2 * 3 * 7);
  check_nesting(complete);

  // A second session starts from empty tracks.
  lockstep::profiler::start(logdir);
  const lockstep::profiler::Result again = lockstep::profiler::stop();
  CHECK(again.report.find("Nothing was recorded") != std::string::npos);
}

TEST_CASE("trace: starting twice and stopping without a start are errors that say what to do") {
  lockstep::testing::TempDir dir("lockstep_test_trace");
  CHECK(error_of([] { lockstep::profiler::stop(); }) ==
        "lockstep: profiler::stop: no profiler is running; call profiler::start(logdir) first");
  lockstep::profiler::start(dir.str());
  const std::string twice = error_of([&] { lockstep::profiler::start(dir.str()); });
  CHECK(twice.find("profiler::start: a profiler is already running (started with logdir '" + dir.str() + "')") !=
        std::string::npos);
  CHECK(twice.find("call profiler::stop() before starting another") != std::string::npos);
  CHECK(lockstep::profiler::active());
  lockstep::profiler::stop();
  CHECK_FALSE(lockstep::profiler::active());
}

TEST_CASE("trace: a logdir that cannot be made is an error naming it, and nothing starts") {
  lockstep::testing::TempDir dir("lockstep_test_trace");
  const std::string file = dir.file("a_file");
  lockstep::testing::write_file(file, std::string("not a folder"));
  const std::string under = file + "/logs";
  const std::string message = error_of([&] { lockstep::profiler::start(under); });
  CHECK(message.find("cannot create the logdir '" + under + "'") != std::string::npos);
  CHECK(message.find("Not a directory") != std::string::npos);
  CHECK_FALSE(lockstep::profiler::active());
  CHECK(error_of([] { lockstep::profiler::start(""); }).find("the logdir is empty") != std::string::npos);
}
