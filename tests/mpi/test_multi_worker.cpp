// MultiWorkerMirroredPolicy<MpiAllReduce> under mpirun -np P: P processes x R
// replicas equal one process with P * R replicas; evaluation, the weight
// broadcast and the start-up layout check span processes.
#include <doctest/doctest.h>
#include <mpi.h>

#include <string>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;
constexpr int kLocal = 2;

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}
int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

FitOptions three_steps() {
  FitOptions options;
  options.batch_size = 8;  // 18 samples: steps of 8, 8 and 2, the last leaving replicas empty
  options.epochs = 1;
  options.verbose = false;
  return options;
}
}  // namespace

TEST_CASE("P processes x 2 replicas equal one process with 2P replicas after 3 steps") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model multi{11}, single{11};
  Trainer<MultiWorkerMirroredPolicy<MpiAllReduce>, Adam> trainer{MultiWorkerMirroredPolicy<MpiAllReduce>{kLocal},
                                                                 Adam{0.01}};
  REQUIRE(trainer.global_replicas() == kLocal * world_size());
  trainer.fit(multi, data, three_steps());
  Trainer<MirroredPolicy<HostAllReduce>, Adam> reference{MirroredPolicy<HostAllReduce>{kLocal * world_size()},
                                                         Adam{0.01}};
  reference.fit(single, data, three_steps());
  CHECK(multi.parameters() != Model{11}.parameters());
  CHECK(testing::max_abs_difference(multi.parameters(), single.parameters()) <= 1e-5);

  // Every rank holds bit-identical weights.
  std::vector<float> root = multi.parameters();
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  CHECK(root == multi.parameters());

  // Evaluation over P processes equals single-process evaluation.
  const Dataset test = testing::argmax_dataset(37, 6, 3, 2);
  const Logs a = trainer.evaluate(multi, test, 5), b = reference.evaluate(multi, test, 5);
  CHECK(a["loss"] == doctest::Approx(b["loss"]).epsilon(1e-6));
  CHECK(a["accuracy"] == doctest::Approx(b["accuracy"]));
}

TEST_CASE("rank 0's initial weights are broadcast even when seeds differ") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model model{static_cast<std::uint64_t>(100 + world_rank())};
  Trainer<MultiWorkerMirroredPolicy<MpiAllReduce>, Adam> trainer{MultiWorkerMirroredPolicy<MpiAllReduce>{1}};
  FitOptions options = three_steps();
  options.epochs = 0;
  options.seed = static_cast<std::uint64_t>(world_rank());
  trainer.fit(model, data, options);
  CHECK(model.parameters() == Model{100}.parameters());
}

TEST_CASE("a layout that differs between ranks is an Error on every rank naming what differs") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model model{0};
  Trainer<MultiWorkerMirroredPolicy<MpiAllReduce>, Adam> trainer{MultiWorkerMirroredPolicy<MpiAllReduce>{1}};
  FitOptions options = three_steps();
  options.batch_size = world_rank() == 0 ? 8 : 6;
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options),
                       doctest::Contains("global batch size: rank 0 has 8; rank 1 has 6;"), Error);
  options.batch_size = 8;
  CHECK(trainer.fit(model, data, options).epochs == 1);  // the job goes on once the layouts agree
}

TEST_CASE("a different model on one rank is named at start-up") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Trainer<MultiWorkerMirroredPolicy<MpiAllReduce>, Adam> trainer{MultiWorkerMirroredPolicy<MpiAllReduce>{1}};
  using Wider = Sequential<Input<6>, Dense<7, Relu>, Dense<3>>;
  Model model{0};
  Wider wider{0};
  auto fit_mine = [&] { return world_rank() == 0 ? trainer.fit(model, data, three_steps()) : trainer.fit(wider, data, three_steps()); };
  CHECK_THROWS_WITH_AS(fit_mine(), doctest::Contains("model layout hash:"), Error);
}
