// CommunicationOptions: how long a replica waits for the other replicas or
// processes of its job (tf.distribute.experimental.CommunicationOptions'
// timeout_seconds, PyTorch's init_process_group(timeout=...)). Every strategy
// holds one; the executors pass it to the collective's group, its barriers,
// the replica pool and the MPI calls, so that a peer which stopped (a hung
// thread, a SIGSTOPped or unreachable rank) ends in an Error naming who did
// not arrive instead of a silent hang.
#pragma once

#include <cmath>

#include "lockstep/core/error.hpp"

namespace lockstep {

struct CommunicationOptions {
  // Seconds any one wait on other replicas or processes may last (a barrier,
  // an all-reduce, a broadcast, the replica pool's join); > 0 and finite.
  // The default, 300 s, is generous: a step waits for the slowest replica.
  double timeout_seconds = 300;
};

namespace detail {
// An Error unless the timeout is a positive, finite number of seconds.
inline const CommunicationOptions& checked(const CommunicationOptions& options, const char* who) {
  require(std::isfinite(options.timeout_seconds) && options.timeout_seconds > 0, who,
          ": CommunicationOptions::timeout_seconds ", options.timeout_seconds,
          ", expected a finite number of seconds above 0 (the default is 300)");
  return options;
}

// The end of a host timeout's message: what happened next, what to change.
inline constexpr const char* kAfterTimeout =
    "Every replica is released with an Error and the collective made anew, so the trainer stays usable; if a "
    "step really takes this long, raise CommunicationOptions::timeout_seconds (strategy.set_communication)";
}  // namespace detail

}  // namespace lockstep
