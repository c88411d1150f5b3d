// RAII CUDA streams, events and graphs, and a guard that makes a device
// current for a scope. Every replica owns a compute stream and a
// communication stream on its device; events order one after the other.
#pragma once

#include <utility>

#include "lockstep/backend/cuda/check.cuh"

namespace lockstep::gpu {

// Makes `device` current until the end of the scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    LOCKSTEP_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device != previous_) LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

// A non-blocking stream on the current device.
class Stream {
 public:
  Stream() { LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  ~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  void synchronize() const { LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing, for ordering streams (cheapest kind), or with
// timing for benchmarks.
class Event {
 public:
  explicit Event(bool timing = false) {
    LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  ~Event() {
    if (event_) cudaEventDestroy(event_);
  }
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) { LOCKSTEP_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  // Makes `stream` wait, on the device, for the work before the last record.
  void wait_in(cudaStream_t stream) const { LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }
  void synchronize() const { LOCKSTEP_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Milliseconds between `start` and this event (both recorded with timing).
  float elapsed_ms_since(const Event& start) const {
    float ms = 0;
    LOCKSTEP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// A captured and instantiated CUDA graph: capture(stream, f) records the work
// f enqueues on `stream` (and the streams it forks to through events) once;
// launch(stream) replays it with one call.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() { reset(); }

  template <class F>
  void capture(cudaStream_t stream, F&& enqueue) {
    reset();
    LOCKSTEP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream, &broken);  // leave the stream usable
      if (broken) cudaGraphDestroy(broken);
      // An unjoined or invalidated capture makes EndCapture fail: clear that
      // error so that a later launch check does not report it as its own.
      (void)cudaGetLastError();
      throw;
    }
    LOCKSTEP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    LOCKSTEP_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  bool ready() const { return exec_ != nullptr; }
  void launch(cudaStream_t stream) const { LOCKSTEP_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }
  void reset() noexcept {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace lockstep::gpu
