// NcclAllReduce::MultiWorkerGroup: one NCCL communicator over every GPU of
// every process of an MPI job, for MultiWorkerMirroredPolicy<NcclAllReduce>.
// Process p's local replica r is NCCL rank p * R + r (R local replicas, the
// same on every process: the trainer checks it). Rank 0 makes the
// ncclUniqueId and MPI broadcasts it; each process then creates its R ranks
// with ncclCommInitRank inside one ncclGroupStart/End, as NCCL requires when
// one thread initialises several ranks ("Creating a Communicator"). MPI gives
// rank, size and the trainer's broadcasts, sums and checks (MpiProcesses);
// NCCL carries the gradients.
#pragma once

#include "lockstep/backend/cuda/check.cuh"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/collective/mpi_all_reduce.hpp"
#include "lockstep/collective/nccl_all_reduce.cuh"
#include "lockstep/core/error.hpp"

namespace lockstep {

class NcclAllReduce::MultiWorkerGroup : public detail::NcclCommunicators, public detail::MpiProcesses {
 public:
  // This process's replica r runs on devices[r].
  explicit MultiWorkerGroup(const std::vector<int>& devices) : NcclCommunicators(devices) {
    const int local = static_cast<int>(devices.size());
    // Every process must bring as many GPUs, or the ranks would not be p * R + r.
    const char* names[] = {"local GPU replicas"};
    const std::uint64_t values[] = {static_cast<std::uint64_t>(local)};
    check_same_across_processes(names, values, 1);

    ncclUniqueId id{};
    if (process_rank() == 0) LOCKSTEP_NCCL_CHECK(ncclGetUniqueId(&id));
    broadcast_from_root(&id, sizeof id);

    int current = 0;
    LOCKSTEP_CUDA_CHECK(cudaGetDevice(&current));
    gpu::DeviceGuard keep(current);
    const int ranks = process_count() * local;
    LOCKSTEP_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < local; ++r) {
      LOCKSTEP_CUDA_CHECK(cudaSetDevice(devices[static_cast<std::size_t>(r)]));
      const ncclResult_t made =
          ncclCommInitRank(&comms_[static_cast<std::size_t>(r)], ranks, id, process_rank() * local + r);
      if (made != ncclSuccess) {
        ncclGroupEnd();
        LOCKSTEP_NCCL_CHECK(made);
      }
    }
    LOCKSTEP_NCCL_CHECK(ncclGroupEnd());
  }

  // The GPUs this process's R replicas take when the strategy names none:
  // those after the other processes' on the same machine, so that processes
  // sharing a machine share out its GPUs.
  static int first_local_device(int local_replicas) {
    detail::MpiSession::get();
    MPI_Comm node = MPI_COMM_NULL;
    int world_rank = 0, node_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    detail::mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node),
                      "MPI_Comm_split_type");
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_free(&node);
    return node_rank * local_replicas;
  }
};

}  // namespace lockstep
