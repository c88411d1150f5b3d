// ShardedUpdate: for replicas in shared memory whose collective fuses the
// optimizer into the all-reduce (HostAllReduce's reduce_update): the replicas
// compute with one shared copy of the variables, each reduces one shard of
// the gradient and applies the optimizer to that shard only (ZeRO's sharded
// update with nothing to gather): 1/N of the optimizer's work per replica and
// half the bytes of an all-reduce. With two replicas, and an optimizer state
// whose step takes a host::SumOfTwo, the optimizer reads both gradient
// buffers and sums as it goes; otherwise the collective sums into a buffer first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

#include "lockstep/backend/host/sum_of_two.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/strategy/step_rule.hpp"

namespace lockstep {

namespace detail {
template <class State, class Ctx, class Grads>
using ranged_step = decltype(std::declval<State&>().step(std::declval<Ctx&>(), std::declval<float*>(),
                                                          std::declval<Grads>(), std::size_t{}, std::size_t{}));
struct UpdateProbe {
  void operator()(std::size_t, std::size_t, const float*) const {}
};
template <class G>
using group_reduce_update = decltype(std::declval<G&>().reduce_update(0, std::declval<float*>(), std::size_t{},
                                                                      std::size_t{}, UpdateProbe{}));
}  // namespace detail

struct ShardedUpdate {
  static constexpr Variables kVariables = Variables::kShared;
  static constexpr bool holds_optimizer_state(int) { return true; }

  // Whether the optimizer reads the two replicas' gradients as it sums them.
  template <class State, class Ctx>
  static constexpr bool sums_as_it_reads = detail::is_detected<detail::ranged_step, State, Ctx, host::SumOfTwo>;

  template <class Step>
  static void on_gradient_ready(Step&, std::size_t, std::size_t) {}

  template <class Step>
  static void combine_and_update(Step& step) {
    static_assert(Step::kSharedMemory,
                  "ShardedUpdate needs replicas in shared memory (host threads): on GPUs use AllReduceUpdate.");
    const auto update = [&](std::size_t first, std::size_t last, auto summed) { step.update(first, last, summed); };
    if constexpr (sums_as_it_reads<typename Step::state_type, typename Step::context_type>)
      step.group().reduce_update(step.replica(), step.grads(), step.count(), step.params_count(), update);
    else  // a state that takes only pointers: the collective sums into a buffer first
      step.group().reduce_update(step.replica(), step.grads(), step.count(), step.params_count(),
                                 [&](std::size_t first, std::size_t last, const float* summed) {
                                   update(first, last, summed);
                                 });
  }

  // Each replica holds the state of the shard it updates.
  template <class Group>
  static std::pair<std::size_t, std::size_t> optimizer_range(const Group& group, int replica, std::size_t params,
                                                             std::size_t count) {
    const auto [first, last] = group.shard(replica, count);
    return {std::min(first, params), std::min(last, params)};
  }
};

}  // namespace lockstep
