// What a strategy is: where replicas live and which collective combines them.
// A strategy has `using collective`, `using backend` (from the collective),
// kName and replicas(). Trainer checks these with the traits below.
#pragma once

#include <utility>

#include "lockstep/core/traits.hpp"

namespace lockstep::detail {
template <class S>
using strategy_probe = decltype(S::kName, static_cast<typename S::collective*>(nullptr),
                                static_cast<typename S::backend*>(nullptr), std::declval<const S&>().replicas());
template <class S>
inline constexpr bool is_strategy = is_detected<strategy_probe, S>;
}  // namespace lockstep::detail
