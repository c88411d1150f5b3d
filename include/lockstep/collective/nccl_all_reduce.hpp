// NcclAllReduce: the CUDA replicas' all-reduce through NCCL. Declared here so
// that Trainer<MirroredPolicy<NcclAllReduce>, Adam> names a valid type in every
// build; its Group lives in backend/cuda/ and comes with <lockstep/cuda.hpp>.
#pragma once

#include "lockstep/backend/backends.hpp"

namespace lockstep {

struct NcclAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "NcclAllReduce";
  class Group;
};

}  // namespace lockstep
