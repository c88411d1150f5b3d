// The model whose weights and checkpoints fuzz_safetensors reads, and
// fuzz_seeds writes (one with variables of both kinds: BatchNormalization
// has state).
#pragma once

#include "lockstep/lockstep.hpp"

namespace lockstep_fuzz {
using Model = lockstep::Sequential<lockstep::Input<4>, lockstep::Dense<3>, lockstep::BatchNormalization<>,
                                   lockstep::Relu, lockstep::Dense<2>>;
}  // namespace lockstep_fuzz
