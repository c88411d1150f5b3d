// MultiWorkerMirroredPolicy<NcclAllReduce> under mpirun: every process trains
// on its own GPU (those after the other processes' on the same machine), one
// NCCL communicator spans them all, and P processes x 1 GPU give the weights
// of P host replicas in one process. With no GPU (or fewer GPUs than
// processes on this machine) every rank exits 77: ctest reports a skip.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <mpi.h>

#include <cstdio>

#include "lockstep/cuda.hpp"
#include "train/test_helpers.hpp"

namespace {
using Model = lockstep::Sequential<lockstep::Input<6>, lockstep::Dense<5, lockstep::Relu>, lockstep::Dense<3>>;

template <class Strategy>
std::vector<float> train_three_steps(Strategy strategy) {
  // 18 samples at batch 8: steps of 8, 8 and 2 samples (a short last batch).
  const lockstep::Dataset data = lockstep::testing::argmax_dataset(18, 6, 3, 1);
  Model model{11};
  lockstep::Trainer<Strategy, lockstep::Adam> trainer{strategy, lockstep::Adam{0.01}};
  lockstep::FitOptions options;
  options.batch_size = 8;
  options.verbose = false;
  trainer.fit(model, data, options);
  return model.parameters();
}
}  // namespace

TEST_CASE("P processes x 1 GPU equal P host replicas after 3 steps (max abs difference <= 1e-4)") {
  int processes = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  using lockstep::MirroredPolicy;
  using lockstep::MultiWorkerMirroredPolicy;
  const auto gpus = train_three_steps(MultiWorkerMirroredPolicy<lockstep::NcclAllReduce>{1});
  const auto host = train_three_steps(MirroredPolicy<lockstep::HostAllReduce>{processes});
  CHECK(gpus != Model{11}.parameters());
  CHECK(lockstep::testing::max_abs_difference(gpus, host) <= 1e-4);
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, on_node = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &on_node);
  MPI_Comm_free(&node);
  const int gpus = lockstep::gpu::visible_devices();
  if (gpus < on_node) {  // the same on every rank of a machine, so all skip together
    if (rank == 0) std::printf("skipped: %d GPU(s) visible, %d process(es) on this machine need one each\n", gpus, on_node);
    MPI_Finalize();
    return 77;
  }
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);
  const int failed = context.run();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
