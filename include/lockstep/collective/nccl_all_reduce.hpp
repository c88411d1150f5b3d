// NcclAllReduce: the CUDA replicas' all-reduce through NCCL, one communicator
// per GPU (ncclCommInitAll), one replica per GPU. Only declared here, without
// CUDA headers, so that Trainer<MirroredPolicy<NcclAllReduce>, Adam> names a
// valid type in every build; the Group is defined in nccl_all_reduce.cuh,
// which needs nvcc and NCCL (link lockstep::cuda).
#pragma once

#include "lockstep/backend/backends.hpp"

namespace lockstep {

struct NcclAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "NcclAllReduce";
  class Group;
};

}  // namespace lockstep
