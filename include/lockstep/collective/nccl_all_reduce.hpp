// NcclAllReduce: the CUDA replicas' all-reduce through NCCL, one communicator
// per GPU, one replica per GPU. Only declared here, without CUDA headers, so
// that Trainer<MirroredPolicy<NcclAllReduce>, Adam> names a valid type in
// every build. Group (one process, ncclCommInitAll) is defined in
// nccl_all_reduce.cuh, which needs nvcc and NCCL (link lockstep::cuda);
// MultiWorkerGroup (every GPU of every process of an MPI job,
// ncclCommInitRank), used by MultiWorkerMirroredPolicy<NcclAllReduce>, in
// nccl_multi_worker.cuh, which needs MPI too (link lockstep::cuda and lockstep::mpi).
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

struct NcclAllReduce {
  using backend = Cuda;
  static constexpr const char* kName = "NcclAllReduce";
  class Group;
  class MultiWorkerGroup;

  // The placement log's words for a `count`-float buffer. NCCL chooses ring or
  // tree, and its chunking, per call from the size and the topology: not known here.
  static std::string describe(std::size_t, int replicas, int processes = 1,
                              CollectiveCall = CollectiveCall::kAllReduce) {
    const int procs = processes > 0 ? processes : 1;
    if (procs == 1)
      return detail::concat("ncclAllReduce in place over ", replicas, replicas == 1 ? " GPU" : " GPUs",
                            ", one communicator per GPU (ncclCommInitAll); NCCL picks ring or tree and its chunks");
    return detail::concat("ncclAllReduce in place over ", replicas * procs, " GPUs (", replicas, " in each of ",
                          procs, " processes), one communicator across the job (ncclCommInitRank); NCCL picks "
                          "ring or tree and its chunks");
  }
};

}  // namespace lockstep
