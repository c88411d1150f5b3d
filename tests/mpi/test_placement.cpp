// The device placement log under mpirun -np P: rank 0 prints the job's lines
// and every rank's replica lines (task:0 .. task:P-1), gathered over MPI;
// the other ranks print nothing. A switch set on some ranks only is an Error
// on every rank, not a hang in the gathering.
#include <doctest/doctest.h>
#include <mpi.h>

#include <sstream>
#include <string>
#include <vector>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;  // 53 parameters
using Strategy = MultiWorkerMirroredPolicy<MpiAllReduce>;
constexpr int kLocal = 2;

int world(int (*what)(MPI_Comm, int*)) {
  int value = 0;
  what(MPI_COMM_WORLD, &value);
  return value;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}
}  // namespace

TEST_CASE("placement log: rank 0 prints every rank's replicas, the other ranks nothing") {
  const int rank = world(MPI_Comm_rank), size = world(MPI_Comm_size);
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model model{11};
  Trainer<Strategy, Adam> trainer{Strategy{kLocal}};
  std::ostringstream out;
  log_device_placement(true, &out);
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  log_device_placement(false);
  const std::vector<std::string> lines = lines_of(out.str());
  if (rank != 0) {
    CHECK(out.str().empty());
    return;
  }
  MESSAGE(out.str());
  REQUIRE(lines.size() == static_cast<std::size_t>(2 + size * kLocal));
  CHECK(lines[0] == "placement: strategy MultiWorkerMirroredPolicy<MpiAllReduce>, " + std::to_string(size * kLocal) +
                        " replicas in " + std::to_string(size) +
                        " processes (2 each); variables mirrored on every replica, optimizer state mirrored on every "
                        "replica");
  CHECK(lines[1].find("placement: gradients 53 floats (212 bytes) + 2 statistics, all-reduced by MpiAllReduce: "
                      "HostAllReduce over the 2 replicas of each process, then a ring over " +
                      std::to_string(size) + " processes") == 0);
  for (int p = 0; p < size; ++p)
    for (int r = 0; r < kLocal; ++r) {
      const std::string& line = lines[static_cast<std::size_t>(2 + p * kLocal + r)];
      CAPTURE(line);
      CHECK(line.find("placement: /job:worker/replica:0/task:" + std::to_string(p) + "/device:CPU:" +
                      std::to_string(r) + " -> thread ") == 0);
      CHECK(line.find(" on host \"") != std::string::npos);
    }
}

TEST_CASE("placement log: a switch set on some ranks only is an Error on every rank") {
  const int rank = world(MPI_Comm_rank);
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model model{11};
  Trainer<Strategy, Adam> trainer{Strategy{1}};
  std::ostringstream out;
  log_device_placement(rank == 0, &out);
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, testing::quiet_fit(8, 1)),
                       doctest::Contains("log_device_placement: rank 0 has 1; rank 1 has 0;"), Error);
  log_device_placement(false);
  CHECK(out.str().empty());
  CHECK(trainer.fit(model, data, testing::quiet_fit(8, 1)).epochs == 1);  // the job goes on once they agree
}

TEST_CASE("placement log: the deterministic mode names its units and its exchange in replica order") {
  const int rank = world(MPI_Comm_rank), size = world(MPI_Comm_size);
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model model{11};
  Strategy strategy{kLocal};
  strategy.set_deterministic(Deterministic{12});  // np 2 and 3 x 2 replicas
  Trainer<Strategy, Adam> trainer{strategy};
  std::ostringstream out;
  log_device_placement(true, &out);
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  log_device_placement(false);
  if (rank != 0) return;
  const std::vector<std::string> lines = lines_of(out.str());
  REQUIRE(lines.size() == static_cast<std::size_t>(2 + 12));  // a line per unit
  CHECK(lines[0].find("placement: strategy MultiWorkerMirroredPolicy<MpiAllReduce> in the deterministic mode: each "
                      "batch split into 12 units") == 0);
  CHECK(lines[1].find("all-reduced by MpiAllReduce: the deterministic mode's sum in replica order over " +
                      std::to_string(size) + " processes x " + std::to_string(12 / size) + " replicas") !=
        std::string::npos);
}
