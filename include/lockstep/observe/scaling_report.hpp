// The scaling report: what the recorded spans say about how well the
// replicas scale, as plain text a person reads after profiler::stop(). It is a
// pure function of the tracks (no clock, no session, no files), so the tests
// build tracks by hand and check the figures and the reading.
//
// How the spans are counted:
//   - A step is a kStep span. Every other span belongs to the step span of
//     its track that contains it (the innermost one); spans outside any step
//     are left out, and the report says how many there were.
//   - Time is counted exclusively: a span's own time is its length minus the
//     lengths of its children (the spans of the same track nested inside it).
//     So a kWait inside a kCollective counts as waiting, and the rest of the
//     collective as communication; a step's own time, covered by no child, is
//     "unaccounted" (the step's glue: callbacks, metrics, loop overhead).
//   - Per replica, the share of its step time in compute (forward, loss,
//     backward, update), communication (collective), waiting (wait), data
//     (data, copy) and unaccounted; the shares add up to 100%.
//   - The slowest replica is the one with the most non-waiting time per step
//     (its step time less its waiting): the others wait for it.
//   - Bandwidth: for kCollective spans that carry bytes, the algorithm
//     bandwidth is the bytes over the collective's time less its kWait
//     children (the time spent moving and reducing data, not the time spent
//     waiting for a late replica), and the bus bandwidth is that times
//     2(n-1)/n for n = global_replicas: the all-reduce convention of NVIDIA's
//     nccl-tests (doc/PERFORMANCE.md, "bus bandwidth"), which makes the figure
//     comparable to the link's peak and to what benchmarks/all_reduce prints.
//     Every collective lockstep has is an all-reduce, so the factor is the
//     all-reduce's. The figures are grouped by collective name and algorithm.
//
// The reading, one sentence, is the first of these rules that holds:
//   1. Nothing recorded (no step span): say so, and why that may be.
//   2. A straggler (two or more replicas on this track list): some replica
//      other than the slowest waits at least kStragglerWaitShare (10%) of its
//      step time, while the slowest waits less than that and at most half as
//      much as the waiter: "replica 0 waited 67% of each step for replica 1: a
//      straggler".
//   3. Waiting for other processes (one replica here, more in all): this
//      replica waits at least kStragglerWaitShare of its step: a replica of
//      another process is the slower one; the other ranks' reports say which.
//   4. Communication dominates: the replicas' mean communication share is at
//      least kDominantShare (25%) and at least the data share: "the
//      all-reduce is 40% of the step: a larger per-replica batch would scale
//      better" (more compute per byte reduced).
//   5. Data dominates: the mean data share is at least kDominantShare: "data
//      loading is 30% of the step: ...".
//   6. Otherwise: "the replicas are balanced: compute is 85% of the step"
//      ("one replica: compute is ..." when there is one replica in all).
// The thresholds are ReportInputs fields with those defaults.
//
// The report covers the tracks it is given: in a multi-process run, the
// replicas of one process; each rank writes its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/observe/trace.hpp"

namespace lockstep::observe {

struct ReportInputs {
  int global_replicas = 0;                  // n for the bus bandwidth; 0: the number of tracks given
  double reference_bus_bandwidth_gbps = 0;  // what benchmarks/all_reduce measured here; 0: unknown
  int rank = 0;                             // this process, for the heading
  int processes = 1;
  double straggler_wait_share = 0.10;  // rule 2 and 3 (see the header comment)
  double dominant_share = 0.25;        // rules 4 and 5
};

namespace detail {

// A span's place on its track: its parent (the innermost span containing it)
// and the step it belongs to, as indices into the track's spans; -1 for none.
struct SpanTree {
  std::vector<std::ptrdiff_t> parent, step;
  std::vector<std::int64_t> self_ns;       // length less the children's lengths
  std::vector<std::int64_t> wait_kids_ns;  // the lengths of its kWait children
  std::vector<std::size_t> order;          // parents before children, by begin time
};

inline bool contains(const Span& outer, const Span& inner) {
  return outer.begin_ns <= inner.begin_ns && inner.end_ns <= outer.end_ns;
}

// The spans ordered by begin, the longer first; among spans of equal times a
// step first and a wait last (a wait added after the fact, as
// observe::mark_collective_waits adds it, may cover its whole collective),
// else the one recorded later first (spans are recorded when they end, so a
// parent that ends at the same nanosecond as its child comes after it).
// Walking this order with a stack of open spans finds each span's parent.
// Spans that overlap without nesting (which one thread cannot produce) are
// treated as siblings.
inline SpanTree span_tree(const std::vector<Span>& spans) {
  const std::size_t n = spans.size();
  SpanTree t;
  t.parent.assign(n, -1);
  t.step.assign(n, -1);
  t.self_ns.assign(n, 0);
  t.wait_kids_ns.assign(n, 0);
  t.order.resize(n);
  for (std::size_t i = 0; i < n; ++i) t.order[i] = i;
  std::sort(t.order.begin(), t.order.end(), [&](std::size_t a, std::size_t b) {
    if (spans[a].begin_ns != spans[b].begin_ns) return spans[a].begin_ns < spans[b].begin_ns;
    if (spans[a].end_ns != spans[b].end_ns) return spans[a].end_ns > spans[b].end_ns;
    const auto outer = [](Phase p) { return p == Phase::kStep ? 0 : p == Phase::kWait ? 2 : 1; };
    if (outer(spans[a].phase) != outer(spans[b].phase)) return outer(spans[a].phase) < outer(spans[b].phase);
    return a > b;
  });
  std::vector<std::size_t> open;
  for (std::size_t i : t.order) {
    const Span& s = spans[i];
    while (!open.empty() && !contains(spans[open.back()], s)) open.pop_back();
    t.self_ns[i] = s.end_ns - s.begin_ns;
    if (!open.empty()) {
      const std::size_t p = open.back();
      t.parent[i] = static_cast<std::ptrdiff_t>(p);
      t.self_ns[p] -= s.end_ns - s.begin_ns;
      if (s.phase == Phase::kWait) t.wait_kids_ns[p] += s.end_ns - s.begin_ns;
      t.step[i] = spans[p].phase == Phase::kStep ? static_cast<std::ptrdiff_t>(p) : t.step[p];
    }
    open.push_back(i);
  }
  return t;
}

enum Category : std::size_t { kCompute, kCommunication, kWaiting, kData, kUnaccounted, kCategories };

inline Category category(Phase p) {
  switch (p) {
    case Phase::kForward:
    case Phase::kLoss:
    case Phase::kBackward:
    case Phase::kUpdate: return kCompute;
    case Phase::kCollective: return kCommunication;
    case Phase::kWait: return kWaiting;
    case Phase::kData:
    case Phase::kCopy: return kData;
    case Phase::kStep: return kUnaccounted;
  }
  return kUnaccounted;
}

struct ReplicaFigures {
  int replica = 0;
  std::size_t steps = 0;
  std::uint64_t first_step = 0, last_step = 0;  // the global step indices seen
  std::int64_t step_ns = 0;                     // the steps' lengths added up
  std::int64_t ns[kCategories] = {};
  std::size_t outside = 0;  // spans in no step
  double share(Category c) const { return step_ns > 0 ? static_cast<double>(ns[c]) / static_cast<double>(step_ns) : 0; }
  double mean_step_ns() const { return steps ? static_cast<double>(step_ns) / static_cast<double>(steps) : 0; }
  double busy_ns_per_step() const {
    return steps ? static_cast<double>(step_ns - ns[kWaiting]) / static_cast<double>(steps) : 0;
  }
};

struct CollectiveFigures {
  std::size_t calls = 0;
  std::uint64_t bytes = 0;
  std::int64_t moving_ns = 0;  // the collectives' time less their kWait children
};

inline std::string fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}
inline std::string percent(double share, int digits = 1) { return fixed(100.0 * share, digits) + "%"; }
inline std::string percent0(double share) { return fixed(100.0 * share, 0) + "%"; }
inline std::string millis(double ns) { return fixed(ns / 1e6, 3) + " ms"; }
inline std::string megabytes(double bytes) { return fixed(bytes / 1e6, 2) + " MB"; }

inline std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

inline bool names_all_reduce(const std::string& name) {
  std::string lower;
  for (char c : name)
    if (c != '_' && c != '-' && c != ' ') lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return lower.find("allreduce") != std::string::npos;
}

inline std::string join_replicas(const std::vector<int>& replicas) {
  std::string out;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    if (i) out += i + 1 == replicas.size() ? " and " : ", ";
    out += std::to_string(replicas[i]);
  }
  return out;
}

}  // namespace detail

// The report on `tracks` (null entries and tracks without spans are skipped).
inline std::string scaling_report(const std::vector<const Track*>& tracks, const ReportInputs& in) {
  using namespace detail;
  std::vector<ReplicaFigures> reps;
  std::map<std::pair<std::string, std::string>, CollectiveFigures> collectives;  // by name and algorithm
  std::string top_collective;  // the name with the most communication time
  std::map<std::string, std::int64_t> communication_by_name;
  std::size_t tracks_with_spans = 0;

  for (const Track* track : tracks) {
    if (!track || track->spans().empty()) continue;
    ++tracks_with_spans;
    const std::vector<Span>& spans = track->spans();
    const SpanTree tree = span_tree(spans);
    ReplicaFigures r;
    r.replica = track->replica();
    for (std::size_t i : tree.order) {
      const Span& s = spans[i];
      if (s.phase == Phase::kStep) {
        r.first_step = r.steps ? std::min(r.first_step, s.value) : s.value;
        r.last_step = r.steps ? std::max(r.last_step, s.value) : s.value;
        ++r.steps;
        r.step_ns += s.end_ns - s.begin_ns;
        r.ns[kUnaccounted] += tree.self_ns[i];
        continue;
      }
      if (tree.step[i] < 0) {
        ++r.outside;
        continue;
      }
      r.ns[category(s.phase)] += tree.self_ns[i];
      if (s.phase == Phase::kCollective) {
        const std::string name = s.name ? s.name : "collective";
        communication_by_name[name] += tree.self_ns[i];
        if (s.value > 0) {
          CollectiveFigures& c = collectives[{name, s.detail ? s.detail : ""}];
          ++c.calls;
          c.bytes += s.value;
          c.moving_ns += (s.end_ns - s.begin_ns) - tree.wait_kids_ns[i];
        }
      }
    }
    reps.push_back(r);
  }
  std::sort(reps.begin(), reps.end(), [](const ReplicaFigures& a, const ReplicaFigures& b) { return a.replica < b.replica; });
  std::int64_t most = -1;
  for (const auto& [name, ns] : communication_by_name)
    if (ns > most) {
      most = ns;
      top_collective = name;
    }

  std::size_t total_steps = 0, outside = 0;
  for (const ReplicaFigures& r : reps) {
    total_steps += r.steps;
    outside += r.outside;
  }
  const int n = in.global_replicas > 0 ? in.global_replicas : static_cast<int>(reps.size());

  std::ostringstream out;
  out << "lockstep scaling report: rank " << in.rank << " of " << in.processes << ", " << reps.size() << " replica"
      << (reps.size() == 1 ? "" : "s") << " here of " << n << " in all\n";
  if (total_steps == 0) {
    out << "\nNothing was recorded: ";
    if (tracks_with_spans == 0)
      out << "no replica recorded a span between profiler::start and profiler::stop.";
    else
      out << "the replicas recorded " << outside << " span" << (outside == 1 ? "" : "s") << " but no step.";
    out << " Either the strategy is not wrapped in Profiled<...> (only a profiled strategy records its steps),"
           " or no training step ran between start() and stop() (start before fit, or stop from a callback"
           " after at least one batch).\n";
    return out.str();
  }

  // The table, one row per replica.
  out << "\nshare of step time per replica (exclusive time: a wait inside a collective counts as waiting)\n";
  out << "replica  steps     mean step  compute  communication  waiting    data  unaccounted\n";
  for (const ReplicaFigures& r : reps) {
    out << pad_left(std::to_string(r.replica), 7) << pad_left(std::to_string(r.steps), 7)
        << pad_left(r.steps ? millis(r.mean_step_ns()) : "-", 14) << pad_left(percent(r.share(kCompute)), 9)
        << pad_left(percent(r.share(kCommunication)), 15) << pad_left(percent(r.share(kWaiting)), 9)
        << pad_left(percent(r.share(kData)), 8) << pad_left(percent(r.share(kUnaccounted)), 13) << "\n";
  }
  std::uint64_t first = 0, last = 0;
  bool any = false;
  for (const ReplicaFigures& r : reps) {
    if (!r.steps) continue;
    first = any ? std::min(first, r.first_step) : r.first_step;
    last = any ? std::max(last, r.last_step) : r.last_step;
    any = true;
  }
  out << "global steps " << first << " to " << last << "\n";
  if (outside) out << outside << " span" << (outside == 1 ? "" : "s") << " outside any step left out\n";

  // Only replicas that ran steps take part in the comparisons and means.
  std::vector<const ReplicaFigures*> ran;
  for (const ReplicaFigures& r : reps)
    if (r.steps) ran.push_back(&r);
  double mean_share[kCategories] = {};
  for (const ReplicaFigures* r : ran)
    for (std::size_t c = 0; c < kCategories; ++c) mean_share[c] += r->share(static_cast<Category>(c)) / static_cast<double>(ran.size());

  // The slowest replica and the others' wait for it.
  const ReplicaFigures* slowest = ran.front();
  for (const ReplicaFigures* r : ran)
    if (r->busy_ns_per_step() > slowest->busy_ns_per_step()) slowest = r;
  double others_wait = 0;
  std::vector<int> waiters;
  double waiters_share = 0;
  for (const ReplicaFigures* r : ran) {
    if (r == slowest) continue;
    others_wait += r->share(kWaiting) / static_cast<double>(ran.size() - 1);
    if (r->share(kWaiting) >= in.straggler_wait_share) {
      waiters.push_back(r->replica);
      waiters_share += r->share(kWaiting);
    }
  }
  if (!waiters.empty()) waiters_share /= static_cast<double>(waiters.size());
  if (ran.size() >= 2) {
    double fastest = slowest->busy_ns_per_step();
    for (const ReplicaFigures* r : ran) fastest = std::min(fastest, r->busy_ns_per_step());
    out << "\nslowest replica: " << slowest->replica << " (" << millis(slowest->busy_ns_per_step())
        << " of non-waiting time per step";
    // Replicas doing the same work differ a little by chance: say so, lest a 1% difference read as a straggler.
    if (fastest >= 0.95 * slowest->busy_ns_per_step()) out << ", every replica within 5% of it";
    out << "); the others waited for it " << percent(others_wait) << " of each step on average\n";
  }

  // Bandwidth, per collective and algorithm.
  if (!collectives.empty()) {
    out << "\ncollective bandwidth (bus bandwidth = algorithm bandwidth x 2(n-1)/n, n = " << n
        << ", as nccl-tests reports it)\n";
    for (const auto& [key, c] : collectives) {
      out << "  " << key.first;
      if (!key.second.empty()) out << " (" << key.second << ")";
      out << ": " << c.calls << " call" << (c.calls == 1 ? "" : "s") << ", "
          << megabytes(static_cast<double>(c.bytes) / static_cast<double>(c.calls)) << " each";
      if (c.moving_ns <= 0) {
        out << ", no time outside waiting to measure a bandwidth over\n";
        continue;
      }
      const double algbw = static_cast<double>(c.bytes) / static_cast<double>(c.moving_ns);  // bytes/ns = GB/s
      out << ", algorithm bandwidth " << fixed(algbw, 2) << " GB/s";
      if (n < 2) {
        out << " (one replica in all: nothing crosses a link, no bus bandwidth)\n";
        continue;
      }
      const double busbw = algbw * 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
      out << ", bus bandwidth " << fixed(busbw, 2) << " GB/s";
      if (in.reference_bus_bandwidth_gbps > 0)
        out << ", " << percent0(busbw / in.reference_bus_bandwidth_gbps) << " of the "
            << fixed(in.reference_bus_bandwidth_gbps, 1) << " GB/s benchmarks/all_reduce measured";
      out << "\n";
    }
    if (in.reference_bus_bandwidth_gbps <= 0)
      out << "  (pass profiler::Options::reference_bus_bandwidth_gbps, what benchmarks/all_reduce measured on this "
             "machine, to compare)\n";
  }

  // The reading.
  std::string reading;
  const double slowest_wait = slowest->share(kWaiting);
  if (ran.size() >= 2 && !waiters.empty() && slowest_wait < in.straggler_wait_share &&
      slowest_wait <= waiters_share / 2) {
    reading = (waiters.size() == 1 ? "replica " : "replicas ") + join_replicas(waiters) + " waited " +
              percent0(waiters_share) + " of each step" + (waiters.size() == 1 ? "" : " on average") +
              " for replica " + std::to_string(slowest->replica) + ": a straggler";
  } else if (ran.size() == 1 && n > 1 && slowest_wait >= in.straggler_wait_share) {
    reading = "replica " + std::to_string(slowest->replica) + " waited " + percent0(slowest_wait) +
              " of each step for the replicas of other processes: one of them is slower (the other ranks' "
              "reports say which)";
  } else if (mean_share[kCommunication] >= in.dominant_share && mean_share[kCommunication] >= mean_share[kData]) {
    reading = (names_all_reduce(top_collective) || top_collective.empty() ? std::string("the all-reduce")
                                                                           : "communication (" + top_collective + ")") +
              " is " + percent0(mean_share[kCommunication]) +
              " of the step: a larger per-replica batch would scale better";
  } else if (mean_share[kData] >= in.dominant_share) {
    reading = "data loading is " + percent0(mean_share[kData]) +
              " of the step: the replicas wait for their batches, so feed them faster";
  } else {
    reading = std::string(n > 1 ? "the replicas are balanced" : "one replica") + ": compute is " +
              percent0(mean_share[kCompute]) + " of the step";
  }
  out << "\nreading: " << reading << ".\n";
  return out.str();
}

}  // namespace lockstep::observe
