// The profiler on a GPU replica: its step's spans timed on the GPU.
//
// What the host thread of a GPU replica spends in a step is the time to
// enqueue work, not the work. So a profiled CUDA step opens each span
// (a layer's forward or backward, the loss, the collective, the update) with
// two things: an NVTX range, which Nsight Systems shows on the host thread,
// and a pair of timing events recorded on the compute stream around the
// work it enqueues. While the stream is being captured the events are
// recorded with cudaEventRecordExternal, so the step graph holds them as
// event record nodes: a step replayed from a graph is timed the same way,
// although no host code of the step runs. (That flag is an error outside a
// capture, cudaErrorIllegalState: an eager step records them plainly.) Once the
// step has finished, StreamTrace turns each pair into a span on the
// replica's GPU track, on the host clock (anchored at the moment the host
// saw the step end).
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/backend/cuda/check.cuh"
#include "lockstep/observe/trace.hpp"

namespace lockstep::gpu {

class StreamTrace {
 public:
  StreamTrace() = default;
  StreamTrace(const StreamTrace&) = delete;
  StreamTrace& operator=(const StreamTrace&) = delete;
  ~StreamTrace() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  // Before a step's work is enqueued on `stream` (eagerly or into a graph
  // being captured): the spans opened from here on replace the last step's.
  // Whether the stream is being captured is asked once here, not per event.
  void begin_enqueue(cudaStream_t stream) {
    marks_.clear();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    LOCKSTEP_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    capturing_ = capture == cudaStreamCaptureStatusActive;
  }

  // Opens a span: an NVTX range and an event on `stream`. Returns its mark.
  std::size_t open(cudaStream_t stream, observe::Phase phase, const char* name, std::uint64_t value,
                   const char* detail) {
    nvtxRangePushA(name ? name : observe::phase_name(phase));
    const std::size_t mark = marks_.size();
    marks_.push_back(Mark{name, detail, phase, value, event(2 * mark), event(2 * mark + 1)});
    record(marks_.back().begin, stream);
    return mark;
  }
  // Unchecked, as it runs in a destructor: a failed record shows up at the
  // step's synchronisation, which reports it.
  void close(std::size_t mark, cudaStream_t stream) noexcept {
    (void)record_flagged(marks_[mark].end, stream);
    nvtxRangePop();
  }

  // After the step finished on the GPU (its stream synchronised): the
  // spans of the work last enqueued or replayed, onto `track`, the last
  // event placed at `end_ns` on the host clock; step spans get the index
  // `step` (a replayed graph's marks were made for an earlier step).
  void to_track(observe::Track& track, std::int64_t end_ns, std::uint64_t step) const {
    if (marks_.empty()) return;
    const cudaEvent_t last = marks_.front().end;  // the outermost span ends last
    for (const Mark& m : marks_) {
      float begin_ms = 0, end_ms = 0;
      LOCKSTEP_CUDA_CHECK(cudaEventElapsedTime(&begin_ms, m.begin, last));
      LOCKSTEP_CUDA_CHECK(cudaEventElapsedTime(&end_ms, m.end, last));
      track.add(observe::Span{m.name, m.detail, m.phase, end_ns - static_cast<std::int64_t>(begin_ms * 1e6f),
                              end_ns - static_cast<std::int64_t>(end_ms * 1e6f),
                              m.phase == observe::Phase::kStep ? step : m.value});
    }
  }

 private:
  struct Mark {
    const char* name;
    const char* detail;
    observe::Phase phase;
    std::uint64_t value;
    cudaEvent_t begin, end;
  };
  // Events are made once and reused step after step (a captured graph keeps them).
  cudaEvent_t event(std::size_t i) {
    while (events_.size() <= i) {
      cudaEvent_t e = nullptr;
      LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));
      events_.push_back(e);
    }
    return events_[i];
  }
  void record(cudaEvent_t e, cudaStream_t stream) const { LOCKSTEP_CUDA_CHECK(record_flagged(e, stream)); }
  // An event record node in a graph being captured, else a plain record.
  cudaError_t record_flagged(cudaEvent_t e, cudaStream_t stream) const noexcept {
    return capturing_ ? cudaEventRecordWithFlags(e, stream, cudaEventRecordExternal) : cudaEventRecord(e, stream);
  }

  std::vector<Mark> marks_;
  std::vector<cudaEvent_t> events_;
  bool capturing_ = false;  // begin_enqueue's stream is being captured
};

// A span on the GPU replica's host track (NVTX only: the host part) and on its stream.
class StreamScope {
 public:
  StreamScope(StreamTrace* trace, cudaStream_t stream, observe::Phase phase, const char* name, std::uint64_t value,
              const char* detail)
      : trace_(trace), stream_(stream), mark_(trace ? trace->open(stream, phase, name, value, detail) : 0) {}
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;
  ~StreamScope() {
    if (trace_) trace_->close(mark_, stream_);
  }

 private:
  StreamTrace* trace_;
  cudaStream_t stream_;
  std::size_t mark_;
};

// The tracer of a profiled GPU replica's pass (observe/tracer.hpp): spans on
// the compute stream, and the host track for what only the host does.
struct StreamTraced {
  static constexpr bool kTraced = true;
  observe::Track* track_ = nullptr;  // null: the profiler is not recording
  StreamTrace* trace_ = nullptr;
  cudaStream_t stream_ = nullptr;
  observe::Track* track() const { return track_; }
  StreamScope open(observe::Phase phase, const char* name, std::uint64_t value, const char* detail) const {
    return StreamScope(track_ ? trace_ : nullptr, stream_, phase, name, value, detail);
  }
};

}  // namespace lockstep::gpu
