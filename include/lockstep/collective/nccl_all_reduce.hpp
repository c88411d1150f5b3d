// NcclAllReduce: the CUDA replicas' all-reduce through NCCL. Declared here so
// that Trainer<MirroredPolicy<NcclAllReduce>, Adam> names a valid type in every
// build; its Group will come with the CUDA backend (not built yet).
#pragma once

#include "lockstep/backend/backends.hpp"

namespace lockstep {

struct NcclAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "NcclAllReduce";
  class Group;
};

}  // namespace lockstep
