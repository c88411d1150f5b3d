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

#include "lockstep/backend/backends.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/collective/reduction_to_one_device.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

template <class Backend>
class BasicCentralStoragePolicy;

template <>
class BasicCentralStoragePolicy<Host> {
 public:
  using collective = HostAllReduce;
  using backend = Host;
  static constexpr const char* kName = "CentralStoragePolicy";
  static constexpr bool kCentralVariables = true;

  BasicCentralStoragePolicy() : BasicCentralStoragePolicy(Host::hardware_threads()) {}
  explicit BasicCentralStoragePolicy(int replicas) : replicas_(replicas) {
    require(replicas >= 1, "CentralStoragePolicy: ", replicas, " replicas, expected at least 1");
  }
  int replicas() const { return replicas_; }

 private:
  int replicas_;
};

template <>
class BasicCentralStoragePolicy<Cuda> {
 public:
  using collective = ReductionToOneDevice<Cuda>;
  using backend = Cuda;
  static constexpr const char* kName = "CudaCentralStoragePolicy";
  static constexpr bool kCentralVariables = true;

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

namespace detail {
template <class S, class = void>
struct central_variables : std::false_type {};
template <class S>
struct central_variables<S, std::enable_if_t<S::kCentralVariables>> : std::true_type {};
template <class S>
inline constexpr bool central_variables_v = central_variables<S>::value;
}  // namespace detail

}  // namespace lockstep
