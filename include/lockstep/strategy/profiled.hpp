// Profiled<Strategy>: the same strategy, with a step the profiler can see.
//
//   lockstep::Trainer<lockstep::Profiled<lockstep::MirroredPolicy<lockstep::HostAllReduce>>, lockstep::Adam>
//
// trains exactly as the strategy does; while profiler::start(logdir) ..
// profiler::stop() records (observe/profiler.hpp), each replica's step is
// recorded as spans: the batch gathered, each layer's forward and backward,
// the loss, the collective call with its bytes, the time spent waiting for
// the other replicas, the optimizer update. Without the wrapper the step has
// no tracer at all (observe/tracer.hpp), so profiling costs nothing unless
// it is asked for at compile time; with it and the profiler stopped, one
// test per step and per layer.
#pragma once

#include <type_traits>
#include <utility>

#include "lockstep/strategy/step_rule.hpp"

namespace lockstep {

template <class Strategy>
class Profiled : public Strategy {
 public:
  using profiled_strategy = Strategy;
  Profiled() = default;
  // Profiled<MirroredPolicy<HostAllReduce>>(2), or from a strategy object.
  template <class... Args, class = std::enable_if_t<std::is_constructible_v<Strategy, Args&&...>>>
  explicit Profiled(Args&&... args) : Strategy(std::forward<Args>(args)...) {}
};

// The wrapped strategy's step.
template <class Strategy>
struct StepRule<Profiled<Strategy>> : StepRule<Strategy> {};

namespace detail {
template <class S>
struct is_profiled : std::false_type {};
template <class S>
struct is_profiled<Profiled<S>> : std::true_type {};
template <class S>
inline constexpr bool is_profiled_v = is_profiled<S>::value;
}  // namespace detail

}  // namespace lockstep
