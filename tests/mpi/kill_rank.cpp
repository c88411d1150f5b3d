// Trains under mpirun and kills rank 1 with SIGKILL at step 20, to show that
// the job then ends non-zero instead of hanging (tests/mpi/check_killed_rank.cmake).
#include <csignal>
#include <cstdio>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

namespace {
struct KillRankOne {
  int rank;
  void on_batch_end(std::size_t step, const lockstep::Logs&) {
    if (rank == 1 && step == 20) std::raise(SIGKILL);
  }
};
}  // namespace

int main() {
  using namespace lockstep;
  const Dataset data = testing::argmax_dataset(20000, 16, 4, 1);
  Sequential<Input<16>, Dense<32, Relu>, Dense<4>> model{0};
  Trainer<MultiWorkerMirroredPolicy<MpiAllReduce>, Adam> trainer{MultiWorkerMirroredPolicy<MpiAllReduce>{1}};
  FitOptions options;
  options.epochs = 1000;
  options.batch_size = 32;
  options.verbose = false;
  trainer.fit(model, data, options, KillRankOne{trainer.process_rank()});
  std::puts("training finished although rank 1 was killed");
  return 0;
}
