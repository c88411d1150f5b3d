// CentralStoragePolicy: tf.distribute.experimental.CentralStorageStrategy.
// The variables and the optimizer state live once, on the central device
// (host memory); each step every replica computes with the current weights,
// its gradients are reduced onto the central device, which applies the update.
#pragma once

#include <type_traits>

#include "lockstep/backend/backends.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

class CentralStoragePolicy {
 public:
  using collective = HostAllReduce;
  using backend = Host;
  static constexpr const char* kName = "CentralStoragePolicy";
  static constexpr bool kCentralVariables = true;

  CentralStoragePolicy() : CentralStoragePolicy(Host::hardware_threads()) {}
  explicit CentralStoragePolicy(int replicas) : replicas_(replicas) {
    require(replicas >= 1, "CentralStoragePolicy: ", replicas, " replicas, expected at least 1");
  }
  int replicas() const { return replicas_; }

 private:
  int replicas_;
};

namespace detail {
template <class S, class = void>
struct central_variables : std::false_type {};
template <class S>
struct central_variables<S, std::enable_if_t<S::kCentralVariables>> : std::true_type {};
template <class S>
inline constexpr bool central_variables_v = central_variables<S>::value;
}  // namespace detail

}  // namespace lockstep
