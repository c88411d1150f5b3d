// Trains under mpirun -np 2 with a 10 s collective timeout and writes each
// rank's pid to DIR/rank<r>.pid at step 20, so that a script can stop rank 1
// (SIGSTOP) mid-training (tests/mpi/check_stopped_rank.sh): rank 0 must give
// up after the timeout, naming rank 1, and the job end non-zero; stopped
// only for a while (SIGCONT within the timeout), training must finish.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

namespace {
struct WritePidAndPace {
  int rank;
  std::string dir;
  void on_batch_end(std::size_t step, const lockstep::Logs&) {
    if (step == 20 && !written) {
      const std::string path = dir + "/rank" + std::to_string(rank) + ".pid";
      if (std::FILE* f = std::fopen((path + ".tmp").c_str(), "w")) {
        std::fprintf(f, "%ld\n", static_cast<long>(getpid()));
        std::fclose(f);
        std::rename((path + ".tmp").c_str(), path.c_str());
      }
      written = true;
    }
    // A steady pace, whatever the machine: the 625 steps last at least 2.5 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
  bool written = false;
};
}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  if (argc != 2) {
    std::fprintf(stderr, "usage: stop_rank DIR (where each rank writes its pid)\n");
    return 2;
  }
  using Strategy = MultiWorkerMirroredPolicy<MpiAllReduce>;
  const Dataset data = testing::argmax_dataset(20000, 16, 4, 1);
  Sequential<Input<16>, Dense<32, Relu>, Dense<4>> model{0};
  Trainer<Strategy, Adam> trainer{Strategy{2, CommunicationOptions{10}}};
  FitOptions options;
  options.epochs = 1;
  options.batch_size = 32;
  options.verbose = false;
  trainer.fit(model, data, options, WritePidAndPace{trainer.process_rank(), argv[1]});
  const Logs result = trainer.evaluate(model, data);
  if (trainer.process_rank() == 0) std::printf("training finished: accuracy %.3f\n", result["accuracy"]);
  return 0;
}
