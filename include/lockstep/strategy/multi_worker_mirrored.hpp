// MultiWorkerMirroredPolicy<Collective>: tf.distribute.MultiWorkerMirroredStrategy.
// P processes started by mpirun or srun, each with R local replicas; all P * R
// replicas take part in one synchronous step. MPI gives rank and size; the
// collective (MpiAllReduce for host replicas) carries the gradients.
#pragma once

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

template <class Collective>
class MultiWorkerMirroredPolicy {
  static_assert(detail::is_collective<Collective>,
                "MultiWorkerMirroredPolicy<C>: C must be a collective that spans processes, such as MpiAllReduce "
                "(include <lockstep/mpi.hpp>).");
  static_assert(detail::spans_processes<Collective>::value,
                "MultiWorkerMirroredPolicy<C>: C must span processes: write MultiWorkerMirroredPolicy<MpiAllReduce> "
                "(include <lockstep/mpi.hpp>), or MirroredPolicy<HostAllReduce> for one process.");

 public:
  using collective = Collective;
  using backend = typename Collective::backend;
  static constexpr const char* kName = "MultiWorkerMirroredPolicy";

  // `local_replicas`: replicas in this process (threads for host replicas).
  explicit MultiWorkerMirroredPolicy(int local_replicas = 1) : local_replicas_(local_replicas) {
    require(local_replicas >= 1, "MultiWorkerMirroredPolicy: ", local_replicas,
            " local replicas, expected at least 1");
  }
  int replicas() const { return local_replicas_; }

 private:
  int local_replicas_;
};

}  // namespace lockstep
