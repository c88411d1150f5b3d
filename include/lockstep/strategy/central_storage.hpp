// CentralStoragePolicy: tf.distribute.experimental.CentralStorageStrategy.
// The variables and the optimizer state live once, on the central device;
// each step every replica computes with the current weights, its gradients
// are reduced onto the central device, which applies the update, and the
// replicas receive the new weights.
//   CentralStoragePolicy       host replicas; the central device is host memory
//                              (replica 0's), the reduction HostAllReduce's.
//   CudaCentralStoragePolicy   GPU replicas; the central device is the first
//                              GPU (replica 0's), the reduction and the copies
//                              ReductionToOneDevice's (<lockstep/cuda.hpp>).
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/collective/reduction_to_one_device.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"

namespace lockstep {

template <class Backend>
class BasicCentralStoragePolicy;

template <>
class BasicCentralStoragePolicy<Host> : public StrategyCommunication {
 public:
  using collective = HostAllReduce;
  using backend = Host;
  static constexpr const char* kName = "CentralStoragePolicy";

  BasicCentralStoragePolicy() : BasicCentralStoragePolicy(Host::hardware_threads()) {}
  explicit BasicCentralStoragePolicy(int replicas, const CommunicationOptions& communication = {})
      : StrategyCommunication(communication), replicas_(replicas) {
    require(replicas >= 1, "CentralStoragePolicy: ", replicas, " replicas, expected at least 1");
  }
  int replicas() const { return replicas_; }

 private:
  int replicas_;
};

template <>
class BasicCentralStoragePolicy<Cuda> : public StrategyCommunication {
 public:
  using collective = ReductionToOneDevice<Cuda>;
  using backend = Cuda;
  static constexpr const char* kName = "CudaCentralStoragePolicy";

  // Every visible GPU; the first holds the variables.
  BasicCentralStoragePolicy() = default;
  // GPUs 0..replicas-1.
  explicit BasicCentralStoragePolicy(int replicas) : replicas_(replicas) {
    require(replicas >= 1, "CudaCentralStoragePolicy: ", replicas, " replicas, expected at least 1");
  }
  // One replica on each listed GPU; devices[0] holds the variables.
  explicit BasicCentralStoragePolicy(std::vector<int> devices, Heterogeneous heterogeneous = Heterogeneous::kError)
      : replicas_(static_cast<int>(devices.size())), devices_(std::move(devices)), heterogeneous_(heterogeneous) {
    require(!devices_.empty(), "CudaCentralStoragePolicy: an empty device list, expected at least one device index");
  }
  int replicas() const { return replicas_; }  // 0: every visible GPU
  const std::vector<int>& devices() const { return devices_; }
  Heterogeneous heterogeneous() const { return heterogeneous_; }

 private:
  int replicas_ = 0;
  std::vector<int> devices_;
  Heterogeneous heterogeneous_ = Heterogeneous::kError;
};

using CentralStoragePolicy = BasicCentralStoragePolicy<Host>;
using CudaCentralStoragePolicy = BasicCentralStoragePolicy<Cuda>;

// Its step: the gradients are reduced onto replica 0, which alone holds
// optimizer state and updates the variables; then the other replicas' copies
// are refreshed from it (where they share replica 0's memory, as host threads
// do, they compute with its variables directly and nothing is copied).
template <class Backend>
struct StepRule<BasicCentralStoragePolicy<Backend>> {
  static constexpr Variables kVariables = Variables::kCentral;
  static constexpr bool holds_optimizer_state(int replica) { return replica == 0; }

  template <class Step>
  static void on_gradient_ready(Step&, std::size_t, std::size_t) {}

  template <class Step>
  static void combine_and_update(Step& step) {
    using Group = typename Step::group_type;
    using Queue = decltype(step.queue());
    static_assert(detail::is_detected<detail::group_reduce_to_root, Group, Queue>,
                  "CentralStoragePolicy's collective needs reduce_to_root(int replica, float* data, std::size_t count, "
                  "Queue queue): the sum onto replica 0 only.");
    step.group().reduce_to_root(step.replica(), step.grads(), step.count(), step.queue());
    if (step.replica() == 0) step.update(0, step.params_count(), static_cast<const float*>(step.grads()));
    if constexpr (!Step::kSharedMemory) {
      static_assert(detail::is_detected<detail::group_copy_from_root, Group, Queue>,
                    "CentralStoragePolicy's collective needs copy_from_root(int replica, float* data, std::size_t "
                    "count, Queue queue): replica 0's variables sent to the others.");
      step.group().copy_from_root(step.replica(), step.variables(), step.params_count(), step.queue());
    }
  }

  template <class Group>
  static std::pair<std::size_t, std::size_t> optimizer_range(const Group&, int replica, std::size_t params,
                                                             std::size_t) {
    return {0, replica == 0 ? params : 0};
  }
};

}  // namespace lockstep
