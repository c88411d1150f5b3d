// Trains under mpirun; at step 20 a layer throws inside a replica of rank 1,
// while rank 0 waits in the collective. The job must end non-zero, naming
// rank 1, instead of hanging (tests/mpi/check_job_ends.cmake).
#include <atomic>
#include <cstdio>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

namespace {
std::atomic<bool> fail_now{false};

// Relu that throws once fail_now is set: a stand-in for any error in a step.
struct FailingRelu {
  template <class In>
  struct Bind : lockstep::ActivationLayer<lockstep::Relu>::Bind<In> {
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P& pass, lockstep::Slots<T> s, const T* x, T* y, int rows) {
      if (fail_now.load()) lockstep::fail("injected failure in a replica's forward");
      lockstep::ActivationLayer<lockstep::Relu>::Bind<In>::forward(ctx, pass, s, x, y, rows);
    }
  };
};

struct FailOnRankOne {
  int rank;
  void on_batch_end(std::size_t step, const lockstep::Logs&) {
    if (rank == 1 && step == 20) fail_now = true;
  }
};
}  // namespace

int main() {
  using namespace lockstep;
  const Dataset data = testing::argmax_dataset(20000, 16, 4, 1);
  Sequential<Input<16>, Dense<32>, FailingRelu, Dense<4>> model{0};
  Trainer<MultiWorkerMirroredPolicy<MpiAllReduce>, Adam> trainer{MultiWorkerMirroredPolicy<MpiAllReduce>{2}};
  FitOptions options;
  options.epochs = 1000;
  options.batch_size = 32;
  options.verbose = false;
  try {
    trainer.fit(model, data, options, FailOnRankOne{trainer.process_rank()});
  } catch (const Error& e) {
    std::printf("rank %d caught: %s\n", trainer.process_rank(), e.what());
    return 1;
  }
  std::puts("training finished although rank 1 failed");
  return 0;
}
