// ReductionToOneDevice: the simplest all-reduce (tf.distribute's
// ReductionToOneDevice): every replica's buffer is summed onto replica 0's in
// replica order, then replica 0's result is copied to every replica. Slower
// than a reduce-scatter (one replica does all the adds) but easy to trust:
// the reference the other collectives are compared with.
// ReductionToOneDevice<Host> is defined here; ReductionToOneDevice<Cuda> (the
// default) is declared here, without CUDA headers, and its Group is defined
// in reduction_to_one_device.cuh (nvcc, link lockstep::cuda).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/queue.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

template <class Backend = Cuda>
struct ReductionToOneDevice;

template <>
struct ReductionToOneDevice<Host> {
  using backend = Host;
  static constexpr const char* kName = "ReductionToOneDevice";

  // The placement log's words for a `count`-float buffer.
  static std::string describe(std::size_t, int replicas, int = 1, CollectiveCall call = CollectiveCall::kAllReduce) {
    if (replicas <= 1) return "nothing to combine with 1 replica";
    return detail::concat("every replica's buffer summed onto replica 0's in replica order (replica 0 does all ",
                          replicas - 1, " adds per float)",
                          call == CollectiveCall::kAllReduce ? ", then copied to every replica" : "",
                          " in shared memory; 3 barriers");
  }

  // The HostAllReduce::Group interface: replicas are threads of this process.
  class Group : public detail::SingleProcess {
   public:
    explicit Group(int replicas)
        : replicas_(replicas),
          buffers_(static_cast<std::size_t>(replicas > 0 ? replicas : 1)),
          barrier_(replicas > 0 ? replicas : 1) {
      require(replicas >= 1, "ReductionToOneDevice: ", replicas, " replicas, expected at least 1");
    }
    explicit Group(const std::vector<int>& devices) : Group(static_cast<int>(devices.size())) {}

    int size() const { return replicas_; }

    // Called by every replica with a buffer of the same `count`.
    void all_reduce(int replica, float* data, std::size_t count, ReduceOp op = ReduceOp::kSum) {
      reduce(replica, data, count, op, true);
    }
    void all_reduce(int replica, float* data, std::size_t count, host::Queue) {
      reduce(replica, data, count, ReduceOp::kSum, true);
    }

    // The same without the copy back: only replica 0's buffer holds the result.
    void reduce_to_root(int replica, float* data, std::size_t count, ReduceOp op = ReduceOp::kSum) {
      reduce(replica, data, count, op, false);
    }
    void reduce_to_root(int replica, float* data, std::size_t count, host::Queue) {
      reduce(replica, data, count, ReduceOp::kSum, false);
    }

    // Releases replicas waiting in all_reduce after one of them failed.
    void abort() { barrier_.abort(); }

    // How long a replica waits for the others, and the step under way (-1:
    // none), for a timeout's message.
    void set_timeout(double seconds) { barrier_.set_timeout(seconds); }
    void set_step(std::int64_t step) { step_ = step; }

   private:
    void wait(int replica, bool everywhere, std::size_t count) {
      barrier_.wait(replica, [&](const host::Stall& stall) {
        return detail::barrier_timeout(kName, everywhere ? "all_reduce" : "reduce_to_root", count * sizeof(float), step_,
                                       nullptr, stall.text());
      });
    }

    void reduce(int replica, float* data, std::size_t count, ReduceOp op, bool everywhere) {
      if (replicas_ == 1) return;  // the sum and the mean of one buffer are itself
      buffers_[static_cast<std::size_t>(replica)] = data;
      wait(replica, everywhere, count);  // every buffer is visible to replica 0
      if (replica == 0) {
        const float scale = op == ReduceOp::kMean ? 1.0f / static_cast<float>(replicas_) : 1.0f;
        // In place, element by element: replica 0's value is read before it is overwritten.
        for (std::size_t i = 0; i < count; ++i) {
          float acc = data[i];
          for (std::size_t s = 1; s < buffers_.size(); ++s) acc += buffers_[s][i];
          data[i] = scale != 1.0f ? acc * scale : acc;
        }
      }
      wait(replica, everywhere, count);  // replica 0's result is complete
      if (everywhere && replica != 0 && count > 0) std::memcpy(data, buffers_[0], count * sizeof(float));
      // Replica 0 may not touch its buffer again until every copy from it is done.
      wait(replica, everywhere, count);
    }

    int replicas_;
    std::vector<float*> buffers_;
    host::SpinBarrier barrier_;
    std::int64_t step_ = -1;
  };
};

template <>
struct ReductionToOneDevice<Cuda> {
  using backend = Cuda;
  static constexpr const char* kName = "ReductionToOneDevice";
  class Group;

  // The placement log's words for a `count`-float buffer (reduction_to_one_device.cuh).
  static std::string describe(std::size_t, int replicas, int = 1, CollectiveCall call = CollectiveCall::kAllReduce) {
    if (replicas <= 1) return "nothing to combine with 1 replica";
    return detail::concat("peer copies (cudaMemcpyPeerAsync) of the other ", replicas - 1,
                          replicas == 2 ? " replica's buffer" : " replicas' buffers",
                          " onto replica 0's GPU, summed there in replica order",
                          call == CollectiveCall::kAllReduce ? ", then copied from it to every replica"
                                                             : "; the updated variables then copied from it to every "
                                                               "replica",
                          "; 3 host barriers per call");
  }
};

}  // namespace lockstep
