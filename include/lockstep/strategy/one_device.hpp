// OneDevicePolicy: a single replica (tf.distribute.OneDeviceStrategy). On the
// host it runs on the calling thread and its all-reduce is a no-op.
#pragma once

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/strategy/mirrored.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"

namespace lockstep {

// Its one replica waits on no other; it holds CommunicationOptions like every strategy.
struct OneDevicePolicy : StrategyCommunication {
  using collective = HostAllReduce;
  using backend = Host;
  static constexpr const char* kName = "OneDevicePolicy";
  int replicas() const { return 1; }
};

// One replica: MirroredPolicy<HostAllReduce>{1}'s step (its collective is a no-op).
template <>
struct StepRule<OneDevicePolicy> : StepRule<MirroredPolicy<HostAllReduce>> {};

}  // namespace lockstep
