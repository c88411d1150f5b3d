// The profiler session, after TensorFlow's tf.profiler.experimental.start(logdir)
// and stop(): between profiler::start and profiler::stop the instrumented
// training step (a strategy wrapped in Profiled<...>) records spans on one
// track per replica; stop() writes them as a Chrome trace-event file, which
// Perfetto's UI (ui.perfetto.dev) and chrome://tracing open, and writes the
// scaling report (observe/scaling_report.hpp) beside it:
//
//   <logdir>/lockstep.rank<R>.trace.json    one complete event per span
//   <logdir>/scaling_report.rank<R>.txt     the report text, also returned
//
// R is this process's rank (0 in a single-process run), so the ranks of a
// multi-process run write side by side into one shared logdir.
//
// Threads: start() and stop() are called by the thread that drives training
// (before fit, after it, or from a callback), while the replicas are idle
// between steps. The replicas ask session().recording() once per step (a
// relaxed atomic load) and session().track(replica) for their track; each
// track is then written by its own replica only, without a lock, and read by
// stop() only between steps, which is why stop() must not run while a step
// is in flight.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "lockstep/core/atomic_file.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/observe/placement.hpp"
#include "lockstep/observe/scaling_report.hpp"
#include "lockstep/observe/trace.hpp"

namespace lockstep::profiler {

struct Options {
  // The bus bandwidth benchmarks/all_reduce measured on this machine, in GB/s,
  // which the report compares the training's all-reduce with; 0 = unknown.
  double reference_bus_bandwidth_gbps = 0;
};

// What stop() wrote: the two files and the report's text.
struct Result {
  std::string trace_path, report_path, report;
};

}  // namespace lockstep::profiler

namespace lockstep::observe {

namespace detail {


// `s` as a JSON string literal. Control characters, quotes and backslashes
// are escaped; bytes that are not well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates) become U+FFFD, since a strict reader such as
// Python's json module rejects the whole file over one bad byte.
inline void append_json_string(std::string& out, const char* s) {
  out += '"';
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : "");
  static const char kHex[] = "0123456789abcdef";
  while (*p) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++p;
    } else if (c < 0x20) {
      switch (c) {
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
      }
      ++p;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++p;
    } else {
      // The length of the sequence and the range its second byte must be in.
      const std::size_t length = c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
      const unsigned char low = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;   // no overlong forms
      const unsigned char high = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;  // no surrogates, nothing past U+10FFFF
      bool ok = length > 0;
      for (std::size_t i = 1; ok && i < length; ++i) {
        const unsigned char lo = i == 1 ? low : 0x80, hi = i == 1 ? high : 0xbf;
        ok = p[i] >= lo && p[i] <= hi;  // a NUL ends the loop here too: it is below 0x80
      }
      if (ok) {
        out.append(reinterpret_cast<const char*>(p), length);
        p += length;
      } else {
        out += "\\ufffd";
        ++p;
      }
    }
  }
  out += '"';
}

inline std::string json_string(const std::string& s) {
  std::string out;
  append_json_string(out, s.c_str());
  return out;
}

// Nanoseconds as microseconds with three decimals: the trace format's unit,
// at the clock's precision.
inline std::string micros(std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t a = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::string fraction = std::to_string(a % 1000);
  fraction.insert(0, 3 - fraction.size(), '0');
  return (negative ? "-" : "") + std::to_string(a / 1000) + "." + fraction;
}


// Creates `dir` and its parents, and checks a file can be made in it now,
// not at stop() after a long run.
inline void prepare_logdir(const std::string& dir) {
  require(!dir.empty(), "profiler::start: the logdir is empty; name the folder the trace and report go to");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("profiler::start: cannot create the logdir '", dir, "': ", ec.message());
  const std::string probe = (std::filesystem::path(dir) / (".lockstep-probe." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    fail("profiler::start: the logdir '", dir, "' is not writable: ", std::strerror(e));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

inline void append_event_args(std::string& out, const Span& s) {
  std::string args;
  const auto add = [&](const char* key, const std::string& json) {
    args += args.empty() ? "{" : ",";
    args += '"';
    args += key;
    args += "\":";
    args += json;
  };
  if (s.phase == Phase::kStep) {
    add("step", std::to_string(s.value));
  } else if (s.phase == Phase::kCollective || s.phase == Phase::kCopy) {
    if (s.value) add("bytes", std::to_string(s.value));
    if (s.detail) add("algorithm", json_string(s.detail));
  } else if (s.detail) {
    add("detail", json_string(s.detail));
  }
  if (!args.empty()) out += ",\"args\":" + args + "}";
}

}  // namespace detail

// The Chrome trace-event JSON of `tracks` (chrome://tracing's format, which
// Perfetto reads): metadata naming the process ("rank 0 on <host>") and each
// replica's thread, then one complete event ("ph":"X") per span, "ts" and
// "dur" in microseconds from `origin_ns`, "pid" the rank, "tid" the replica.
// Within a track the events come parents first, in begin order, so a viewer
// that nests by file order nests them right.
inline std::string chrome_trace_json(const std::vector<const Track*>& tracks, std::int64_t origin_ns, int rank,
                                     const std::string& host) {
  const std::string pid = std::to_string(rank);
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":" +
         detail::json_string("rank " + pid + " on " + host) + "}},\n";
  out += "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" +
         pid + "}}";
  for (const Track* t : tracks) {
    if (!t) continue;
    const std::string tid = std::to_string(t->replica());
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"args\":{\"name\":\"replica " + tid + "\"}}";
    out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
    const std::vector<Span>& spans = t->spans();
    for (std::size_t i : detail::span_tree(spans).order) {
      const Span& s = spans[i];
      out += ",\n{\"name\":";
      detail::append_json_string(out, s.name ? s.name : phase_name(s.phase));
      out += ",\"cat\":\"";
      out += phase_name(s.phase);
      out += "\",\"ph\":\"X\",\"ts\":" + detail::micros(s.begin_ns - origin_ns) +
             ",\"dur\":" + detail::micros(s.end_ns - s.begin_ns) + ",\"pid\":" + pid + ",\"tid\":" + tid;
      detail::append_event_args(out, s);
      out += "}";
    }
  }
  out += "\n]}\n";
  return out;
}

// The one profiling session of the process.
class Session {
 public:
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Whether a profiler is running: the instrumented step asks once per step.
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  // This process's track for `replica`, made on first ask; null when nothing
  // records. A track lives as long as the process (stop() empties it), so a
  // pointer once returned stays valid.
  Track* track(int replica) {
    if (!recording()) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Track>& slot = tracks_[replica];
    if (!slot) slot = std::make_unique<Track>(rank_, replica);
    return slot.get();
  }

  // Which process this is: executors call it when they are made. The rank is
  // the trace's pid and names the files; global_replicas is the n of the
  // report's bus bandwidth.
  void set_process(int rank, int processes, int global_replicas) {
    require(processes >= 1 && rank >= 0 && rank < processes, "profiler: process rank ", rank, " of ", processes,
            " processes, expected 0 <= rank < processes");
    require(global_replicas >= 1, "profiler: ", global_replicas, " replicas in all, expected at least 1");
    std::lock_guard<std::mutex> lock(mutex_);
    rank_ = rank;
    processes_ = processes;
    global_replicas_ = global_replicas;
  }

  // profiler::start: checks the logdir and starts recording.
  void start(const std::string& logdir, const profiler::Options& options) {
    std::lock_guard<std::mutex> lock(mutex_);
    require(!recording(), "profiler::start: a profiler is already running (started with logdir '", logdir_,
            "'); call profiler::stop() before starting another");
    require(options.reference_bus_bandwidth_gbps >= 0, "profiler::start: reference_bus_bandwidth_gbps is ",
            options.reference_bus_bandwidth_gbps, ", expected a bandwidth in GB/s or 0 for unknown");
    detail::prepare_logdir(logdir);
    for (auto& entry : tracks_) entry.second->clear();
    logdir_ = logdir;
    options_ = options;
    origin_ns_ = now_ns();
    recording_.store(true, std::memory_order_release);
  }

  // profiler::stop: stops recording, writes the trace and the report, and
  // empties the tracks (also when writing fails: the session is over either way).
  profiler::Result stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    require(recording(), "profiler::stop: no profiler is running; call profiler::start(logdir) first");
    recording_.store(false, std::memory_order_release);
    struct Clear {
      std::map<int, std::unique_ptr<Track>>& tracks;
      ~Clear() {
        for (auto& entry : tracks) entry.second->clear();
      }
    } clear{tracks_};

    std::vector<const Track*> tracks;
    for (const auto& entry : tracks_)
      if (!entry.second->spans().empty()) tracks.push_back(entry.second.get());
    profiler::Result result;
    const std::string rank = std::to_string(rank_);
    result.trace_path = (std::filesystem::path(logdir_) / ("lockstep.rank" + rank + ".trace.json")).string();
    result.report_path = (std::filesystem::path(logdir_) / ("scaling_report.rank" + rank + ".txt")).string();
    AtomicFile::write_whole(result.trace_path, "profiler", chrome_trace_json(tracks, origin_ns_, rank_, host_or_unknown()));
    ReportInputs inputs;
    inputs.global_replicas = global_replicas_;
    inputs.reference_bus_bandwidth_gbps = options_.reference_bus_bandwidth_gbps;
    inputs.rank = rank_;
    inputs.processes = processes_;
    result.report = scaling_report(tracks, inputs);
    AtomicFile::write_whole(result.report_path, "profiler", result.report);
    return result;
  }

 private:
  static std::string host_or_unknown() {
    const std::string host = host_name();
    return host.empty() ? "unknown host" : host;
  }

  std::atomic<bool> recording_{false};
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<Track>> tracks_;  // by replica
  int rank_ = 0, processes_ = 1, global_replicas_ = 0;  // 0: as many as there are tracks
  std::string logdir_;
  profiler::Options options_;
  std::int64_t origin_ns_ = 0;
};

// The process's session, made on first use.
inline Session& session() {
  static Session s;
  return s;
}

}  // namespace lockstep::observe

namespace lockstep::profiler {

// Starts recording into `logdir` (made with its parents if missing, and
// checked writable now). An Error if a profiler is already running.
inline void start(const std::string& logdir, const Options& options = {}) { observe::session().start(logdir, options); }

// Stops recording and writes the trace and the scaling report (see the top of
// this file). An Error if no profiler is running, or if a file cannot be written.
inline Result stop() { return observe::session().stop(); }

// Whether a profiler is running.
inline bool active() { return observe::session().recording(); }

}  // namespace lockstep::profiler
