// AllReduceUpdate: the mirrored step (tf.distribute.MirroredStrategy and its
// multi-worker form): the gradients are all-reduced, every replica applies
// the same update to its own copy of the variables. Where the collective
// takes parts of the buffer and the executor has a second queue (NCCL on
// GPUs), each layer's gradient is reduced as soon as backward has produced
// it, so the reduction of the late layers overlaps the backward of the early ones.
#pragma once

#include <cstddef>
#include <utility>

#include "lockstep/collective/collective.hpp"
#include "lockstep/strategy/step_rule.hpp"

namespace lockstep {

struct AllReduceUpdate {
  static constexpr Variables kVariables = Variables::kMirrored;
  static constexpr bool holds_optimizer_state(int) { return true; }

  template <class Step>
  static constexpr bool overlaps = Step::kCanOverlap && detail::partial<typename Step::group_type>::value;

  // The step's statistics ride with the first part reduced, the last layer's
  // (only the first: after a parameter-free last layer the layer before it
  // also ends at params_count, and reducing the statistics twice would
  // multiply them by the replica count).
  template <class Step>
  static void on_gradient_ready(Step& step, std::size_t offset, std::size_t size) {
    if constexpr (overlaps<Step>) {
      if (step.parts_started() == 0 && offset + size == step.params_count()) size = step.count() - offset;
      if (size == 0) return;
      step.reduce_part(offset, size);
    } else {
      (void)step, (void)offset, (void)size;
    }
  }

  template <class Step>
  static void combine_and_update(Step& step) {
    if constexpr (overlaps<Step>)
      step.wait_parts();
    else
      step.group().all_reduce(step.replica(), step.grads(), step.count(), step.queue());
    step.update(0, step.params_count(), static_cast<const float*>(step.grads()));
  }

  // Every replica holds the same state: replica 0's is the snapshot's.
  template <class Group>
  static std::pair<std::size_t, std::size_t> optimizer_range(const Group&, int replica, std::size_t params,
                                                             std::size_t) {
    return {0, replica == 0 ? params : 0};
  }
};

}  // namespace lockstep
