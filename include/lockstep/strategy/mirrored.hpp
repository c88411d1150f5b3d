// MirroredPolicy<Collective>: N replicas in one process, each with a mirror of
// every variable, gradients combined by Collective every step, the same update
// applied on every replica (tf.distribute.MirroredStrategy). The backend
// follows from the collective: HostAllReduce replicas are CPU threads,
// NcclAllReduce replicas are GPUs. Its step (StepRule below): all-reduce and
// update everywhere; with a collective in shared memory that fuses the
// optimizer into the reduction (HostAllReduce), the sharded update instead,
// which gives the same bits with one copy of the variables.
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/strategy/all_reduce_update.hpp"
#include "lockstep/strategy/sharded_update.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"

namespace lockstep {

template <class Collective>
class MirroredPolicy : public StrategyCommunication {
  static_assert(detail::is_collective<Collective>,
                "MirroredPolicy<C>: C must be a collective, such as HostAllReduce for CPU replicas or NcclAllReduce "
                "for GPUs: write MirroredPolicy<HostAllReduce>.");

 public:
  using collective = Collective;
  using backend = typename Collective::backend;
  static constexpr const char* kName = "MirroredPolicy";

  // Every device, as MirroredStrategy takes them all: one replica per
  // hardware thread on the host, every visible GPU on CUDA.
  MirroredPolicy() : replicas_(std::is_same_v<backend, Host> ? Host::hardware_threads() : 0) {}
  // `replicas` replicas: threads on the host, GPUs 0..replicas-1 on CUDA.
  explicit MirroredPolicy(int replicas, const CommunicationOptions& communication = {})
      : StrategyCommunication(communication), replicas_(replicas) {
    require(replicas >= 1, "MirroredPolicy: ", replicas, " replicas, expected at least 1");
  }
  // One replica on each listed GPU (CUDA), e.g. MirroredPolicy<NcclAllReduce>({0, 2}).
  explicit MirroredPolicy(std::vector<int> devices, Heterogeneous heterogeneous = Heterogeneous::kError)
      : replicas_(static_cast<int>(devices.size())), devices_(std::move(devices)), heterogeneous_(heterogeneous) {
    require(!devices_.empty(), "MirroredPolicy: an empty device list, expected at least one device index");
  }

  // 0 on CUDA means every visible GPU (counted when the trainer starts).
  int replicas() const { return replicas_; }
  // The GPUs asked for; empty means 0..replicas()-1, or all of them.
  const std::vector<int>& devices() const { return devices_; }
  Heterogeneous heterogeneous() const { return heterogeneous_; }

 private:
  int replicas_;
  std::vector<int> devices_;
  Heterogeneous heterogeneous_ = Heterogeneous::kError;
};

namespace detail {
// Host collectives that offer reduce_update take the sharded step. Asked only
// of host collectives: a CUDA collective's Group is incomplete in host code.
template <class C>
struct offers_reduce_update : std::integral_constant<bool, is_detected<group_reduce_update, typename C::Group>> {};
template <class C>
inline constexpr bool sharded_on_host =
    std::conditional_t<std::is_same_v<typename C::backend, Host>, offers_reduce_update<C>, std::false_type>::value;
}  // namespace detail

template <class Collective>
struct StepRule<MirroredPolicy<Collective>>
    : std::conditional_t<detail::sharded_on_host<Collective>, ShardedUpdate, AllReduceUpdate> {};

}  // namespace lockstep
