// The profiler under mpirun -np P: each rank records its own replicas and
// writes its own trace, with the rank as the trace's process id, and a
// report that counts the replicas of the whole job.
#include <doctest/doctest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

TEST_CASE("profiler: every rank writes its own trace, its replicas under its rank") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  using Strategy = Profiled<MultiWorkerMirroredPolicy<MpiAllReduce>>;
  using Model = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;
  const Dataset data = testing::argmax_dataset(64, 6, 3, 1);
  Model model{11};
  Trainer<Strategy, Adam> trainer{Strategy{2}};
  // One folder for the job (rank 0's process id), made by rank 0 before the others look.
  long long job = rank == 0 ? static_cast<long long>(::getpid()) : 0;
  MPI_Bcast(&job, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  const std::string dir = "/tmp/lockstep-test-mpi-profile-" + std::to_string(job);
  profiler::start(dir);
  trainer.fit(model, data, testing::quiet_fit(16, 1));  // 4 steps
  const profiler::Result result = profiler::stop();
  CHECK(result.trace_path == dir + "/lockstep.rank" + std::to_string(rank) + ".trace.json");
  std::ifstream in(result.trace_path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string pid = "\"pid\":" + std::to_string(rank) + ",";
  CHECK(text.str().find(pid) != std::string::npos);
  CHECK(text.str().find("\"pid\":" + std::to_string((rank + 1) % size) + ",") == std::string::npos);
  CHECK(text.str().find("\"name\":\"MpiAllReduce\"") != std::string::npos);
  CHECK(result.report.find("rank " + std::to_string(rank) + " of " + std::to_string(size)) != std::string::npos);
  CHECK(result.report.find(std::to_string(2 * size) + " in all") != std::string::npos);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
}
