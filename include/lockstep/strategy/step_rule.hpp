// StepRule<Strategy>: how a strategy's step combines the replicas' gradients
// and applies the update. The executors run one step skeleton
// (train/step.hpp) and call the rule at two points; each strategy's own
// header specialises this template (CUTLASS's dispatch-policy shape), so a
// new strategy is one new header. A rule has
//   kVariables                      where the variables live (Variables below)
//   holds_optimizer_state(r)        whether replica r keeps optimizer state
//   on_gradient_ready(step, offset, size)
//                                   during backward, as each layer's gradient
//                                   [offset, offset + size) is complete
//   combine_and_update(step)        after backward: combine, then update
//   optimizer_range(group, r, params, count)
//                                   the part of the optimizer state replica r
//                                   holds authoritatively (for snapshots)
// `step` is the executor's view of one replica's step (ReplicaStep): group(),
// replica(), queue(), grads() (the parameters' gradients, then the step's
// statistics), count(), params_count(), variables(), update(first, last,
// grads) through this replica's optimizer state, and the constants
// kSharedMemory (replicas may read each other's memory: host threads) and
// kCanOverlap (the executor can reduce parts on a second queue:
// reduce_part(offset, size), then wait_parts()).
#pragma once

#include <cstddef>
#include <utility>

#include "lockstep/core/config.hpp"

namespace lockstep {

// Where a strategy's variables live.
enum class Variables {
  kMirrored,  // every replica its own copy, all updated alike
  kShared,    // one copy every replica computes with (shared memory only)
  kCentral,   // replica 0's copy; the others compute with a copy of it, or read it in shared memory
};

template <class Strategy, class = void>
struct StepRule {
  static_assert(dependent_false<Strategy>,
                "This strategy has no StepRule: a strategy says how its step combines gradients by specialising "
                "lockstep::StepRule<YourStrategy> in its own header (see strategy/step_rule.hpp and "
                "strategy/mirrored.hpp).");
};

}  // namespace lockstep
