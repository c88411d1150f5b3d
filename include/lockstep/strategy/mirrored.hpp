// MirroredPolicy<Collective>: N replicas in one process, each with a mirror of
// every variable, gradients combined by Collective every step, the same update
// applied on every replica (tf.distribute.MirroredStrategy).
#pragma once

#include "lockstep/backend/backends.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

template <class Collective>
class MirroredPolicy {
  static_assert(detail::is_collective<Collective>,
                "MirroredPolicy<C>: C must be a collective, such as HostAllReduce for CPU replicas or NcclAllReduce "
                "for GPUs: write MirroredPolicy<HostAllReduce>.");

 public:
  using collective = Collective;
  using backend = typename Collective::backend;
  static constexpr const char* kName = "MirroredPolicy";

  // One replica per hardware thread, as MirroredStrategy takes every device.
  MirroredPolicy() : MirroredPolicy(Host::hardware_threads()) {}
  explicit MirroredPolicy(int replicas) : replicas_(replicas) {
    require(replicas >= 1, "MirroredPolicy: ", replicas, " replicas, expected at least 1");
  }

  int replicas() const { return replicas_; }

 private:
  int replicas_;
};

}  // namespace lockstep
