// NcclAllReduce: the CUDA replicas' all-reduce through NCCL, one communicator
// per GPU, one replica per GPU. Only declared here, without CUDA headers, so
// that Trainer<MirroredPolicy<NcclAllReduce>, Adam> names a valid type in
// every build. Group (one process, ncclCommInitAll) is defined in
// nccl_all_reduce.cuh, which needs nvcc and NCCL (link lockstep::cuda);
// MultiWorkerGroup (every GPU of every process of an MPI job,
// ncclCommInitRank), used by MultiWorkerMirroredPolicy<NcclAllReduce>, in
// nccl_multi_worker.cuh, which needs MPI too (link lockstep::cuda and lockstep::mpi).
#pragma once

#include "lockstep/core/backend_tags.hpp"

namespace lockstep {

struct NcclAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "NcclAllReduce";
  class Group;
  class MultiWorkerGroup;
};

}  // namespace lockstep
