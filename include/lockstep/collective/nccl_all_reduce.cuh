// NcclAllReduce::Group: one NCCL communicator per replica GPU, made together
// by ncclCommInitAll; each replica's own host thread then calls ncclAllReduce
// in place on its own communicator and stream. NCCL's rules this relies on
// (NCCL user guide): separate threads must use separate communicators, and no
// two communicators of this group share a device ("Thread Safety"); one GPU
// may not be two ranks of one communicator ("Creating a Communicator": it may
// hang), so a duplicate device is an Error here; captured NCCL calls are
// supported in CUDA graphs when every rank captures, and a multi-threaded
// process must capture in cudaStreamCaptureModeThreadLocal, which
// lockstep::gpu::Graph uses ("Using NCCL with CUDA Graphs").
#pragma once

#include "lockstep/backend/cuda/check.cuh"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/collective/collective.hpp"
#include "lockstep/collective/nccl_all_reduce.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {

// What both NCCL groups share: one communicator per local replica, the
// in-place all-reduce on a replica's stream, and the teardown. The groups
// differ in how the communicators are made (ncclCommInitAll in one process,
// ncclCommInitRank across processes).
class NcclCommunicators {
 public:
  // The trainer may record all_reduce in a CUDA graph: NCCL kernels are captured like any other.
  static constexpr bool kCapturable = true;
  // The trainer may reduce layer by layer, overlapping the backward pass: every call is independent.
  static constexpr bool kPartial = true;
  // One GPU cannot be two ranks of one communicator.
  static constexpr bool kSharedDevices = false;

  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;
  // Waits for this group's outstanding operations; never throws (a destructor).
  // CUDA graphs that captured calls on these communicators must be destroyed
  // first: from NCCL 2.26 on, ncclCommDestroy (and ncclCommAbort) wait until
  // no graph references the communicator, so a live graph hangs them.
  ~NcclCommunicators() {
    int current = 0;
    const bool restore = cudaGetDevice(&current) == cudaSuccess;
    for (ncclComm_t comm : comms_)
      if (comm) ncclCommDestroy(comm);
    if (restore) cudaSetDevice(current);  // NCCL switches devices to tear each rank down
  }

  // Local replicas (this process's).
  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<int>& devices() const { return devices_; }

  // Enqueues the in-place sum of every replica's `data` on `stream`, replica
  // r's stream on devices[r]. Every replica must call it, each from its own
  // thread, with the same count; the calls of one step may come in any order
  // across threads, as NCCL matches them by communicator.
  void all_reduce(int replica, float* data, std::size_t count, cudaStream_t stream) {
    require(replica >= 0 && replica < size(), "NcclAllReduce: replica ", replica, ", expected one in [0, ", size(),
            ")");
    if (count == 0) return;  // every replica skips it alike, so no rank waits for another
    LOCKSTEP_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum,
                                      comms_[static_cast<std::size_t>(replica)], stream));
  }

  // No replica waits on the host inside all_reduce, so there is nothing to
  // release here (the trainer stops waiting for its streams by itself).
  void abort() {}

  // "" while replica's communicator is healthy; otherwise the asynchronous
  // error NCCL recorded on it (a peer or network failure, an error inside an
  // enqueued collective), from ncclCommGetAsyncError and ncclGetLastError.
  // NCCL reports such errors only through this call: a replica waiting for
  // its stream polls it (the trainer's wait), and on an error the group is
  // aborted (release_after_failure), as NCCL asks ("Fault Tolerance": after an
  // error nothing can be assumed about enqueued operations; abort the
  // communicator). ncclInProgress, the state of a nonblocking communicator
  // still working, is not an error. Called by replica's own thread, the one
  // that enqueues on that communicator; an aborted (null) communicator is "".
  std::string async_error(int replica) const {
    if (replica < 0 || replica >= size()) return {};
    ncclComm_t comm = comms_[static_cast<std::size_t>(replica)];
    if (!comm) return {};
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) state = queried;
    if (state == ncclSuccess || state == ncclInProgress) return {};
    std::string what = std::string(ncclGetErrorString(state)) + " (result " + std::to_string(static_cast<int>(state)) + ")";
    const char* last = ncclGetLastError(comm);
    if (last && *last) what += std::string(": ") + last;
    return what;
  }

  // After a failed step, once no replica thread is inside the group and the
  // graphs that captured its calls are destroyed: aborts what the replicas
  // left on their GPUs (an all-reduce whose peer never enqueued its part
  // waits on the device forever, and so would ncclCommDestroy and any device
  // synchronisation) and frees the communicators. The group is unusable after.
  void release_after_failure() noexcept {
    int current = 0;
    const bool restore = cudaGetDevice(&current) == cudaSuccess;
    for (ncclComm_t& comm : comms_) {
      if (comm) ncclCommAbort(comm);
      comm = nullptr;
    }
    if (restore) cudaSetDevice(current);
  }

 protected:
  // Checks the devices: each visible and at most once.
  explicit NcclCommunicators(const std::vector<int>& devices) : devices_(devices), comms_(devices.size(), nullptr) {
    require(!devices.empty(), "NcclAllReduce: no devices given, expected one GPU per replica");
    for (std::size_t r = 0; r < devices.size(); ++r)
      for (std::size_t q = 0; q < r; ++q)
        require(devices[q] != devices[r], "NcclAllReduce: GPU ", devices[r], " is given to replicas ", q, " and ", r,
                ", but NCCL needs one replica per GPU (one GPU cannot be two ranks of a communicator); put several "
                "replicas on one GPU with HierarchicalCopyAllReduce or ReductionToOneDevice");
    int visible = 0;
    LOCKSTEP_CUDA_CHECK(cudaGetDeviceCount(&visible));
    for (std::size_t r = 0; r < devices.size(); ++r)
      require(devices[r] >= 0 && devices[r] < visible, "NcclAllReduce: replica ", r, " is on GPU ", devices[r],
              ", expected a GPU in [0, ", visible, ")");
  }

  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace detail

// All replicas in this process: ncclCommInitAll over their GPUs.
class NcclAllReduce::Group : public detail::NcclCommunicators, public detail::SingleProcess {
 public:
  // Replica r runs on devices[r]; every device at most once.
  explicit Group(const std::vector<int>& devices) : NcclCommunicators(devices) {
    int current = 0;
    LOCKSTEP_CUDA_CHECK(cudaGetDevice(&current));
    gpu::DeviceGuard keep(current);  // ncclCommInitAll visits every device; the caller's stays current
    LOCKSTEP_NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data()));
  }
};

}  // namespace lockstep
