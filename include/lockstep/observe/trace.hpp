// What the profiler records: spans of time on tracks. A track is one replica
// (a thread of this process, or the host thread that drives one GPU); a span
// is a phase of its step (gathering the batch, a layer's forward, a collective
// call, a wait at a barrier...), recorded when it ends, with its start and end
// on one monotonic clock. Each track is written by its own thread only, so
// recording takes no lock; the session (observe/profiler.hpp) reads the
// tracks once the replicas are idle.
//
// Instrumented code holds a Track* that is null when nothing records: a
// Scope on a null track reads no clock. Code compiled without profiling
// (a strategy not wrapped in Profiled<...>) holds no Track* at all.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::observe {

// The kind of work a span is, as the scaling report adds it up: compute
// (forward, loss, backward, update), communication (collective), waiting
// (wait) and data (data, copy). A step span holds the others.
enum class Phase : std::uint8_t { kStep, kData, kCopy, kForward, kLoss, kBackward, kCollective, kWait, kUpdate };

inline const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kStep: return "step";
    case Phase::kData: return "data";
    case Phase::kCopy: return "copy";
    case Phase::kForward: return "forward";
    case Phase::kLoss: return "loss";
    case Phase::kBackward: return "backward";
    case Phase::kCollective: return "collective";
    case Phase::kWait: return "wait";
    case Phase::kUpdate: return "update";
  }
  return "unknown";
}

// Nanoseconds on the steady clock, the one time base of every track.
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Span {
  const char* name;    // static storage: a layer's name, a collective's, "step"
  const char* detail;  // static storage or null: the collective's algorithm, ...
  Phase phase;
  std::int64_t begin_ns, end_ns;
  std::uint64_t value;  // the step's global index (kStep), the bytes moved (kCollective, kCopy), else 0
};

// One replica's spans, in the order they ended (children before parents).
class Track {
 public:
  Track(int process, int replica) : process_(process), replica_(replica) { spans_.reserve(1 << 14); }
  int process() const { return process_; }
  int replica() const { return replica_; }
  void add(const Span& s) { spans_.push_back(s); }
  const std::vector<Span>& spans() const { return spans_; }
  void clear() { spans_.clear(); }

 private:
  int process_, replica_;
  std::vector<Span> spans_;
};

// A span from construction to destruction, on `track` when it is not null.
class Scope {
 public:
  Scope(Track* track, Phase phase, const char* name, std::uint64_t value = 0, const char* detail = nullptr)
      : track_(track), name_(name), detail_(detail), phase_(phase), value_(value), begin_(track ? now_ns() : 0) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if (track_) track_->add(Span{name_, detail_, phase_, begin_, now_ns(), value_});
  }

 private:
  Track* track_;
  const char* name_;
  const char* detail_;
  Phase phase_;
  std::uint64_t value_;
  std::int64_t begin_;
};

}  // namespace lockstep::observe
