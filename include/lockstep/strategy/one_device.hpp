// OneDevicePolicy: a single replica (tf.distribute.OneDeviceStrategy). On the
// host it runs on the calling thread and its all-reduce is a no-op.
#pragma once

#include "lockstep/backend/backends.hpp"
#include "lockstep/collective/host_all_reduce.hpp"

namespace lockstep {

struct OneDevicePolicy {
  using collective = HostAllReduce;
  using backend = Host;
  static constexpr const char* kName = "OneDevicePolicy";
  int replicas() const { return 1; }
};

}  // namespace lockstep
