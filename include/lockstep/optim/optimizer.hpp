// What an optimizer is. A policy value holds the hyper-parameters; its nested
// `template <class Backend> class State` holds the per-run slots, made when
// training starts for the flat parameter buffer, and applies one fused update:
//   State(const Opt&, std::size_t params);  state.step(opt, params, grads);
#pragma once

#include <type_traits>

#include "lockstep/backend/backends.hpp"
#include "lockstep/core/traits.hpp"

namespace lockstep::detail {
template <class O>
using optimizer_state_probe = typename O::template State<Host>;
template <class O>
inline constexpr bool is_optimizer = is_detected<optimizer_state_probe, O>;
}  // namespace lockstep::detail
