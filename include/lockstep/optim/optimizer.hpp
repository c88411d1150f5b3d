// What an optimizer is. A policy value holds the hyper-parameters (Keras'
// names; a callback may change them between steps). Its nested
// `template <class Ctx> class State` is the per-run state for one backend's
// context (host::Context, gpu::Context), written once for all of them:
//   State(const Opt&, std::size_t params)      slots in the backend's memory
//   prepare(const Opt&)                        on the host, before each step:
//       (optional)                             the step's scalars (learning
//                                              rate, step count, betas) into
//                                              memory the kernels read when
//                                              they run, so a step replayed
//                                              from a CUDA graph uses them
//   step(ctx, params, grads, first, last)      the update of [first, last),
//                                              enqueued on ctx; grads a
//                                              `const float*` or, where the
//                                              state takes it, host::SumOfTwo
//   iterations(), set_iterations(t), for_each_slot(f(name, data, size))
//       (optional)                             for snapshots and restore
//   set_variables(ranges)  (optional)          the [offset, offset + size) of
//                                              each trainable variable, given
//                                              once when the state is made
//                                              (ClipNorm clips each by its norm)
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/backend/host/context.hpp"
#include "lockstep/core/traits.hpp"

namespace lockstep::detail {
template <class O>
using optimizer_state_probe = typename O::template State<host::Context>;
template <class O>
inline constexpr bool is_optimizer = is_detected<optimizer_state_probe, O>;

template <class S, class O>
using prepare_probe = decltype(std::declval<S&>().prepare(std::declval<const O&>()));
struct SlotProbe {
  void operator()(const char*, float*, std::size_t) const {}
};
template <class S>
using slots_probe = decltype(std::declval<S&>().for_each_slot(SlotProbe{}),
                             std::declval<S&>().set_iterations(std::int64_t{}), std::declval<const S&>().iterations());

// Whether a state's step needs the whole gradient at once (kNeedsWholeGradient).
template <class S, class = void>
struct needs_whole_gradient : std::false_type {};
template <class S>
struct needs_whole_gradient<S, std::enable_if_t<S::kNeedsWholeGradient>> : std::true_type {};

// Calls state.set_variables(ranges) where the state has it: the flat
// buffer's trainable variables of Model, as (offset, size) pairs.
template <class S>
using set_variables_probe = decltype(std::declval<S&>().set_variables(
    std::declval<const std::vector<std::pair<std::size_t, std::size_t>>&>()));
template <class Model, class S>
void give_variables(S& state) {
  if constexpr (is_detected<set_variables_probe, S>) {
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const auto& v : Model::variables())
      if (v.trainable) ranges.emplace_back(v.offset, v.size());
    state.set_variables(ranges);
  }
}

// Calls state.prepare(opt) where the state has it.
template <class S, class O>
void prepare_step(S& state, const O& opt) {
  if constexpr (is_detected<prepare_probe, S, O>) state.prepare(opt);
}
}  // namespace lockstep::detail
