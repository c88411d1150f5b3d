// HierarchicalCopyAllReduce::Group, and the peer-copy engine it shares with
// ReductionToOneDevice<Cuda>. The buffer is cut into parts, each owned by one
// replica: HierarchicalCopy cuts N parts, part c owned by replica c (the
// reduce-scatter + all-gather shape of TensorFlow's HierarchicalCopy, for N
// replicas); ReductionToOneDevice cuts one part, owned by replica 0.
//   1. reduce: each owner copies the other replicas' part into scratch on its
//      own device (cudaMemcpyPeerAsync) and adds them to its own, always in
//      replica order: one device computes each element, so every replica
//      receives the same bits, and the bits do not depend on timing;
//   2. gather: every replica copies each part it does not own from its owner.
// All work is enqueued on the calling replica's stream. Replicas order their
// streams through events (cudaStreamWaitEvent works across devices); the host
// barriers between the steps only let each thread see the events and buffer
// pointers that its peers recorded, so each call costs three host barriers
// and the group cannot be captured in a CUDA graph. Several replicas may share
// one device: their copies are then device-local.
#pragma once

#include "lockstep/backend/cuda/check.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/collective/hierarchical_copy_all_reduce.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep::gpu::detail {

// out[i] = x_0[i] + x_1[i] + ... + x_{sources-1}[i], added in that order,
// where x_self is `out` itself and the other sources are consecutive slots of
// `stride` elements in `slots`, skipping self. Additions only, so the compiler
// cannot contract anything into an FMA: the result is the host's float sum.
template <class T>
__global__ void sum_in_replica_order(T* out, const T* slots, std::size_t len, std::size_t stride, int sources,
                                     int self) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < len; i += step) {
    T acc = self == 0 ? out[i] : slots[i];
    for (int s = 1; s < sources; ++s)
      acc += s == self ? out[i] : slots[static_cast<std::size_t>(s < self ? s : s - 1) * stride + i];
    out[i] = acc;
  }
}

// Lets every device of the group read the others' memory directly where the
// topology allows (NVLink or a shared PCIe switch); elsewhere
// cudaMemcpyPeerAsync still works, staged through host memory by the driver.
inline void enable_peer_access(const std::vector<int>& devices) {
  std::vector<int> distinct(devices);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (int device : distinct) {
    DeviceGuard guard(device);
    for (int peer : distinct) {
      if (peer == device) continue;
      int can = 0;
      LOCKSTEP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
      if (!can) continue;
      const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // enabled by an earlier group: fine, and clear it for later checks
      else
        LOCKSTEP_CUDA_CHECK(status);
    }
  }
}

class PeerCopyAllReduce {
 public:
  // `parts` is devices.size() (every replica owns a part) or 1 (replica 0 owns all).
  PeerCopyAllReduce(const char* name, const std::vector<int>& devices, int parts)
      : name_(name), devices_(devices), parts_(parts), barrier_(static_cast<int>(devices.size())) {
    require(!devices.empty(), name, ": no devices given, expected one GPU per replica");
    int visible = 0;
    LOCKSTEP_CUDA_CHECK(cudaGetDeviceCount(&visible));
    for (std::size_t r = 0; r < devices.size(); ++r)
      require(devices[r] >= 0 && devices[r] < visible, name, ": replica ", r, " is on GPU ", devices[r],
              ", expected a GPU in [0, ", visible, ")");
    enable_peer_access(devices);
    replicas_.reserve(devices.size());
    for (int device : devices) {
      DeviceGuard guard(device);  // an event is recorded only on streams of the device it was made on
      replicas_.emplace_back();
    }
  }
  PeerCopyAllReduce(const PeerCopyAllReduce&) = delete;
  PeerCopyAllReduce& operator=(const PeerCopyAllReduce&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<int>& devices() const { return devices_; }

  void all_reduce(int replica, float* data, std::size_t count, cudaStream_t stream) {
    run(replica, data, count, stream, true, true);
  }
  // With one part (replica 0 owns it): the sum lands in replica 0's buffer
  // only (the others keep theirs); CentralStoragePolicy's "gradients to the
  // central device".
  void reduce_to_root(int replica, float* data, std::size_t count, cudaStream_t stream) {
    run(replica, data, count, stream, true, false);
  }
  // With one part: replica 0's buffer copied into every other replica's
  // (the central variables sent to the replicas).
  void copy_from_root(int replica, float* data, std::size_t count, cudaStream_t stream) {
    run(replica, data, count, stream, false, true);
  }

  void abort() { barrier_.abort(); }

 private:
  // The three phases, each ended by a host barrier: (1) every replica's
  // buffer is ready; (2) each owner sums its part from every peer (`reduce`);
  // (3) every replica copies the parts it does not own from their owners
  // (`gather`). Every replica takes the same phases, so none is left waiting.
  void run(int replica, float* data, std::size_t count, cudaStream_t stream, bool reduce, bool gather) {
    require(replica >= 0 && replica < size(), name_, ": replica ", replica, ", expected one in [0, ", size(), ")");
    const int n = size();
    if (n == 1 || count == 0) return;  // every replica returns alike: no one waits at a barrier
    const std::size_t r = static_cast<std::size_t>(replica);
    const int device = devices_[r];
    DeviceGuard guard(device);
    Replica& me = replicas_[r];
    const bool owner = replica < parts_;
    const auto [first, last] = part(replica, count);
    if (owner && reduce) reserve_scratch(me, static_cast<std::size_t>(n - 1) * (last - first));
    me.data = data;
    me.ready.record(stream);  // the caller's work on `data` so far
    barrier_.wait();          // 1: every replica's pointer and `ready` are visible

    if (reduce && owner && last > first) {
      const std::size_t len = last - first;
      for (int p = 0; p < n; ++p) {
        if (p == replica) continue;
        const Replica& peer = replicas_[static_cast<std::size_t>(p)];
        peer.ready.wait_in(stream);
        float* slot = me.scratch.data() + static_cast<std::size_t>(p < replica ? p : p - 1) * len;
        LOCKSTEP_CUDA_CHECK(cudaMemcpyPeerAsync(slot, device, peer.data + first, devices_[static_cast<std::size_t>(p)],
                                                len * sizeof(float), stream));
      }
      constexpr unsigned kThreads = 256;
      const std::size_t blocks = std::min<std::size_t>((len + kThreads - 1) / kThreads, 4096);
      sum_in_replica_order<float><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          data + first, me.scratch.data(), len, len, n, replica);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    }
    me.reduced.record(stream);  // this replica's part is summed, and it read its part of every peer
    barrier_.wait();            // 2: every `reduced` is visible

    for (int c = 0; c < parts_; ++c) {
      if (c == replica) continue;
      const auto [f, l] = part(c, count);
      if (l == f) continue;
      const Replica& holder = replicas_[static_cast<std::size_t>(c)];
      // Also orders this copy (or, without a gather, this replica's next
      // write to its buffer) after owner c's reads of this replica's part c.
      holder.reduced.wait_in(stream);
      if (!gather) continue;
      LOCKSTEP_CUDA_CHECK(cudaMemcpyPeerAsync(data + f, device, holder.data + f, devices_[static_cast<std::size_t>(c)],
                                              (l - f) * sizeof(float), stream));
    }
    me.done.record(stream);  // this replica read every part it gathers
    barrier_.wait();         // 3: every `done` is visible

    // An owner's part was read by every peer in the gather: the caller's next
    // work on this buffer must wait for those reads. A non-owner's buffer was
    // read only in the reduce, and its stream already waited for that
    // (`reduced` above).
    if (owner && gather)
      for (int p = 0; p < n; ++p)
        if (p != replica) replicas_[static_cast<std::size_t>(p)].done.wait_in(stream);
  }

  struct Replica {
    Event ready, reduced, done;  // on the replica's device, without timing
    DeviceBuffer<float> scratch;
    float* data = nullptr;
  };

  // Part c of `count` elements; parts are whole multiples of 64 floats
  // (256 bytes) but the last, so that peer copies stay aligned.
  std::pair<std::size_t, std::size_t> part(int c, std::size_t count) const {
    constexpr std::size_t kGrain = 64;
    const std::size_t grains = (count + kGrain - 1) / kGrain;
    const std::size_t i = static_cast<std::size_t>(c), k = static_cast<std::size_t>(parts_);
    return {std::min(count, grains * i / k * kGrain), std::min(count, grains * (i + 1) / k * kGrain)};
  }

  // Grows only. Freeing the old scratch synchronises the device, so no copy
  // into it is pending; the new one is zeroed on the legacy default stream,
  // which the replicas' non-blocking streams do not wait for: synchronise once
  // more so that no zeroing lands on top of a copy.
  static void reserve_scratch(Replica& me, std::size_t elements) {
    if (me.scratch.size() >= elements) return;
    me.scratch.resize(elements);
    LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
  }

  const char* name_;
  std::vector<int> devices_;
  int parts_;
  std::vector<Replica> replicas_;
  host::SpinBarrier barrier_;
};

}  // namespace lockstep::gpu::detail

namespace lockstep {

class HierarchicalCopyAllReduce::Group : public detail::SingleProcess {
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
  explicit Group(const std::vector<int>& devices)
      : engine_(kName, devices, static_cast<int>(devices.size())) {}

  int size() const { return engine_.size(); }
  const std::vector<int>& devices() const { return engine_.devices(); }

  // Every replica calls it from its own thread (devices[replica] current) with
  // the same count; when `stream`'s work completes every buffer holds the sum.
  void all_reduce(int replica, float* data, std::size_t count, cudaStream_t stream) {
    engine_.all_reduce(replica, data, count, stream);
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
