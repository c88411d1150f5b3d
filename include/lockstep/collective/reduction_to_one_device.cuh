// ReductionToOneDevice<Cuda>::Group: every replica's buffer is peer-copied
// into scratch on devices[0], added there in replica order on replica 0's
// stream, and every other replica copies the result back from replica 0. The
// peer-copy engine (events between the replicas' streams, host barriers
// between the steps) is HierarchicalCopyAllReduce's with a single part owned
// by replica 0; see hierarchical_copy_all_reduce.cuh. Needs (N - 1) x count
// floats of scratch on devices[0].
#pragma once

#include "lockstep/backend/cuda/check.cuh"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/collective/hierarchical_copy_all_reduce.cuh"
#include "lockstep/collective/reduction_to_one_device.hpp"

namespace lockstep {

class ReductionToOneDevice<Cuda>::Group : public detail::SingleProcess {
 public:
  // Its replicas meet at host barriers inside all_reduce, which a graph replay would skip.
  static constexpr bool kCapturable = false;
  // Alone it has no one to wait for: every call returns at once (PeerCopyAllReduce::run).
  static constexpr bool kCapturableAlone = true;
  // Three host barriers a call: the trainer reduces the whole gradient once per step.
  static constexpr bool kPartial = false;
  // Replicas may share a GPU: their copies are then device-local.
  static constexpr bool kSharedDevices = true;

  // Replica r runs on devices[r]; a device may appear several times.
  explicit Group(const std::vector<int>& devices) : engine_(kName, devices, 1) {}

  int size() const { return engine_.size(); }
  const std::vector<int>& devices() const { return engine_.devices(); }

  // Every replica calls it from its own thread (devices[replica] current) with
  // the same count; when `stream`'s work completes every buffer holds the sum.
  void all_reduce(int replica, float* data, std::size_t count, cudaStream_t stream) {
    engine_.all_reduce(replica, data, count, stream);
  }
  // The sum in replica 0's buffer only (the others keep partial data):
  // gradients sent to the central device (CudaCentralStoragePolicy).
  void reduce_to_root(int replica, float* data, std::size_t count, cudaStream_t stream) {
    engine_.reduce_to_root(replica, data, count, stream);
  }
  // Replica 0's buffer copied to every replica: the central variables sent out.
  void copy_from_root(int replica, float* data, std::size_t count, cudaStream_t stream) {
    engine_.copy_from_root(replica, data, count, stream);
  }

  // Releases replicas waiting at a barrier after one failed: they throw lockstep::Error.
  void abort() { engine_.abort(); }
  // Nothing to release on the GPUs after a failure: streams only wait for
  // events already recorded, so whatever was enqueued completes.
  void release_after_failure() noexcept {}

 private:
  gpu::detail::PeerCopyAllReduce engine_;
};

}  // namespace lockstep
