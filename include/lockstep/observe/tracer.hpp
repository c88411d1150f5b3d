// Whether a step is profiled is decided at compile time: code that a step
// runs (the layers' loop, the step skeleton, an executor) reaches its track
// through a tracer, NoTrace or Traced. NoTrace holds nothing and its track
// is a constant null, so observe::scope(NoTrace{}, ...) is an empty object
// and an unprofiled step carries no member, no clock read and no branch for
// profiling. Traced holds the replica's track (null while the profiler is
// not recording: then a scope costs one test).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lockstep/observe/trace.hpp"

namespace lockstep::observe {

struct NoTrace {
  static constexpr bool kTraced = false;
  static constexpr Track* track() { return nullptr; }
};

// A host replica's tracer: spans of host time. A tracer opens a span with
// open(phase, name, value, detail), whose result ends it when destroyed; a
// device backend's tracer also times the span on its stream (the CUDA one:
// backend/cuda/stream_trace.cuh).
struct Traced {
  static constexpr bool kTraced = true;
  Track* track_ = nullptr;
  Track* track() const { return track_; }
  Scope open(Phase phase, const char* name, std::uint64_t value, const char* detail) const {
    return Scope(track_, phase, name, value, detail);
  }
};

// What observe::scope gives an unprofiled step: nothing, with a destructor
// only so that `const auto span = scope(...)` reads as used, as a Scope does.
struct NoScope {
  ~NoScope() {}  // NOLINT: not = default, which would make the variable look unused
};

// A span on `tracer`'s track for as long as the result lives; nothing at all for NoTrace.
template <class Tracer>
auto scope(const Tracer& tracer, Phase phase, const char* name, std::uint64_t value = 0,
           const char* detail = nullptr) {
  if constexpr (Tracer::kTraced)
    return tracer.open(phase, name, value, detail);
  else
    return (void)tracer, (void)phase, (void)name, (void)value, (void)detail, NoScope{};
}

// Waiting, as the executors record it: a collective cannot finish before
// every replica has entered it, so after a step each replica's last
// collective span gets a wait span from its own entry to the last replica's
// entry (the straggler's, which waited for nobody). Measured here, after the
// fact, rather than inside the collective's barrier, so that no collective
// carries profiling code. Null tracks are skipped.
inline void mark_collective_waits(const std::vector<Track*>& tracks) {
  std::vector<const Span*> last(tracks.size(), nullptr);
  std::int64_t latest = 0;
  bool any = false;
  for (std::size_t t = 0; t < tracks.size(); ++t) {
    if (!tracks[t]) continue;
    const std::vector<Span>& spans = tracks[t]->spans();
    for (auto it = spans.rbegin(); it != spans.rend(); ++it)
      if (it->phase == Phase::kCollective) {
        last[t] = &*it;
        latest = any ? std::max(latest, it->begin_ns) : it->begin_ns;
        any = true;
        break;
      }
  }
  for (std::size_t t = 0; t < tracks.size(); ++t)
    if (last[t] && last[t]->begin_ns < latest) {
      const Span wait{"waiting for the other replicas", nullptr, Phase::kWait, last[t]->begin_ns,
                      std::min(latest, last[t]->end_ns), 0};
      tracks[t]->add(wait);
    }
}

}  // namespace lockstep::observe
