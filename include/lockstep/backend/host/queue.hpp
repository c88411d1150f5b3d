// host::Queue: the host's stand-in for a CUDA stream in the collective and
// context contracts. Host work is done when a call returns, so it is empty.
#pragma once

namespace lockstep::host {
struct Queue {};
}  // namespace lockstep::host
