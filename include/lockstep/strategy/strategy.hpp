// What a strategy is: where replicas live and which collective combines them.
// A strategy has `using collective`, `using backend` (from the collective),
// kName and replicas(). Trainer checks these with the traits below. Every
// strategy of lockstep also holds the CommunicationOptions its replicas wait
// for each other with (StrategyCommunication).
#pragma once

#include <type_traits>
#include <utility>

#include "lockstep/core/communication.hpp"
#include "lockstep/core/determinism.hpp"
#include "lockstep/core/traits.hpp"

namespace lockstep {
// The CommunicationOptions part of a strategy. A setter on every strategy, so
// that code written for any of them (or for a default-constructed one) sets
// the timeout the same way; the strategies that take their replicas as a
// number also take the options as a constructor argument, as TensorFlow's
// strategies take communication_options. It also holds the Deterministic
// mode (core/determinism.hpp): like the options, it is about how replicas
// combine, and it belongs to the strategy, not to one fit, since it decides
// how many logical replicas the trainer makes.
class StrategyCommunication {
 public:
  StrategyCommunication() = default;
  explicit StrategyCommunication(const CommunicationOptions& options)
      : communication_(detail::checked(options, "strategy")) {}
  const CommunicationOptions& communication() const { return communication_; }
  // Before the Trainer is made: the executor reads the options when it starts.
  void set_communication(const CommunicationOptions& options) {
    communication_ = detail::checked(options, "set_communication");
  }
  // Before the Trainer is made: Deterministic{24} makes the trained bits the
  // same for 1, 2, 3, 4, 6 or 8 replicas (and processes x replicas).
  void set_deterministic(const Deterministic& mode) { deterministic_ = detail::checked(mode, "set_deterministic"); }
  const Deterministic& deterministic() const { return deterministic_; }

 private:
  CommunicationOptions communication_;
  Deterministic deterministic_;
};
}  // namespace lockstep

namespace lockstep::detail {
template <class S>
using strategy_probe = decltype(S::kName, static_cast<typename S::collective*>(nullptr),
                                static_cast<typename S::backend*>(nullptr), std::declval<const S&>().replicas());
template <class S>
inline constexpr bool is_strategy = is_detected<strategy_probe, S>;

// A strategy's CommunicationOptions; the defaults for one that holds none.
template <class S>
using strategy_communication = decltype(std::declval<const S&>().communication());
template <class S>
CommunicationOptions communication_of(const S& strategy) {
  if constexpr (is_detected<strategy_communication, S>)
    return checked(strategy.communication(), S::kName);
  else
    return CommunicationOptions{};
}
// A strategy's Deterministic mode; off for one that holds none.
template <class S>
using strategy_determinism = decltype(std::declval<const S&>().deterministic());
template <class S>
Deterministic determinism_of(const S& strategy) {
  if constexpr (is_detected<strategy_determinism, S>)
    return checked(strategy.deterministic(), S::kName);
  else
    return Deterministic{};
}
}  // namespace lockstep::detail
