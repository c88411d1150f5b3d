// MultiWorkerMirroredPolicy<Collective>: tf.distribute.MultiWorkerMirroredStrategy.
// P processes started by mpirun or srun, each with R local replicas; all P * R
// replicas take part in one synchronous step. MPI gives rank and size; the
// collective carries the gradients: MpiAllReduce for host replicas, or
// NcclAllReduce for GPUs (its MultiWorkerGroup: one communicator over every
// GPU of every process; <lockstep/cuda.hpp> with lockstep::mpi).
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/strategy/all_reduce_update.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"

namespace lockstep {

namespace detail {
// The Group a multi-worker job uses: the collective's own when it spans
// processes (MpiAllReduce), or its nested MultiWorkerGroup (NcclAllReduce).
template <class C, class = void>
struct multi_worker_group {
  using type = typename C::Group;
  static constexpr bool kExists = spans_processes<C>::value;
};
template <class C>
struct multi_worker_group<C, std::void_t<typename C::MultiWorkerGroup>> {
  using type = typename C::MultiWorkerGroup;
  static constexpr bool kExists = true;
};
}  // namespace detail

template <class Collective>
class MultiWorkerMirroredPolicy : public StrategyCommunication {
  static_assert(detail::is_collective<Collective>,
                "MultiWorkerMirroredPolicy<C>: C must be a collective that spans processes, such as MpiAllReduce "
                "(include <lockstep/mpi.hpp>).");
  static_assert(detail::multi_worker_group<Collective>::kExists,
                "MultiWorkerMirroredPolicy<C>: C must span processes: write MultiWorkerMirroredPolicy<MpiAllReduce> "
                "(include <lockstep/mpi.hpp>) or MultiWorkerMirroredPolicy<NcclAllReduce>, or "
                "MirroredPolicy<HostAllReduce> for one process.");

 public:
  using collective = Collective;
  using backend = typename Collective::backend;
  using group = typename detail::multi_worker_group<Collective>::type;
  static constexpr const char* kName = "MultiWorkerMirroredPolicy";

  // `local_replicas`: replicas in this process (threads for host replicas;
  // GPUs for NcclAllReduce, by default those after the other processes' on
  // the same machine).
  // `communication`: how long any rank or replica waits for the others
  // (TensorFlow's communication_options), 300 s by default.
  explicit MultiWorkerMirroredPolicy(int local_replicas = 1, const CommunicationOptions& communication = {})
      : StrategyCommunication(communication), local_replicas_(local_replicas) {
    require(local_replicas >= 1, "MultiWorkerMirroredPolicy: ", local_replicas,
            " local replicas, expected at least 1");
  }
  // This process's GPUs, named (NcclAllReduce): one replica on each.
  explicit MultiWorkerMirroredPolicy(std::vector<int> devices) : local_replicas_(static_cast<int>(devices.size())),
                                                                 devices_(std::move(devices)) {
    require(!devices_.empty(), "MultiWorkerMirroredPolicy: an empty device list, expected at least one device index");
  }
  int replicas() const { return local_replicas_; }
  const std::vector<int>& devices() const { return devices_; }
  Heterogeneous heterogeneous() const { return Heterogeneous::kError; }

 private:
  int local_replicas_;
  std::vector<int> devices_;
};

// Its step is the mirrored one across every replica of every process.
template <class Collective>
struct StepRule<MultiWorkerMirroredPolicy<Collective>> : AllReduceUpdate {};

}  // namespace lockstep
