// All-reduce time and bandwidth of the host collectives, for the model's
// gradient (203,530 floats) or any --count. nccl-tests' definitions:
// algbw = bytes / time, busbw = algbw * 2 (n - 1) / n.
// usage: all_reduce [--backend host] [--replicas N] [--count C] [--iters I]
//        mpirun -np P all_reduce --mpi [--count C] [--iters I]
//   --mpi times MPI_Allreduce and lockstep's MpiAllReduce (one replica per process).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <lockstep/lockstep.hpp>
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif

namespace {
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const char* collective, int n, std::size_t count, double seconds) {
  const double bytes = static_cast<double>(count) * sizeof(float);
  const double algbw = bytes / seconds * 1e-9;
  std::printf("collective=%s replicas=%d count=%zu bytes=%.0f median_us=%.2f algbw_gbs=%.3f busbw_gbs=%.3f\n",
              collective, n, count, bytes, seconds * 1e6, algbw, algbw * 2.0 * (n - 1) / n);
}

// Every replica calls all_reduce `iters` times; replica 0 times each call.
template <class Group>
double time_threads(Group& group, lockstep::host::ReplicaPool& pool, std::size_t count, int iters) {
  std::vector<std::vector<float>> data(static_cast<std::size_t>(pool.size()), std::vector<float>(count, 1.0f));
  std::vector<double> times;
  pool.run([&](int r) {
    for (int i = 0; i < iters + 10; ++i) {  // 10 warm-up calls
      const auto t0 = Clock::now();
      group.all_reduce(r, data[static_cast<std::size_t>(r)].data(), count, lockstep::ReduceOp::kMean);
      if (r == 0 && i >= 10) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  });
  return median(times);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  int replicas = 2, iters = 1000;
  std::size_t count = 203530;
  bool mpi = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--mpi") {
        mpi = true;
        continue;
      }
      require(i + 1 < argc, flag, " needs a value");
      const std::string value = argv[++i];
      if (flag == "--backend") require(value == "host", "--backend: '", value, "', only host is built");
      else if (flag == "--replicas") replicas = std::max(1, std::atoi(value.c_str()));
      else if (flag == "--count") count = static_cast<std::size_t>(std::atoll(value.c_str()));
      else if (flag == "--iters") iters = std::max(1, std::atoi(value.c_str()));
      else fail("unknown flag '", flag, "'; expected --backend, --replicas, --count, --iters or --mpi");
    }
    if (!mpi) {
      host::ReplicaPool pool(replicas);
      HostAllReduce::Group group(replicas);
      report("HostAllReduce", replicas, count, time_threads(group, pool, count, iters));
      return 0;
    }
#if defined(LOCKSTEP_HAVE_MPI)
    host::ReplicaPool pool(1);
    MpiAllReduce::Group group(1);  // initialises MPI
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<float> data(count, 1.0f);
    std::vector<double> times;
    for (int i = 0; i < iters + 10; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = Clock::now();
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (i >= 10) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double mpi_allreduce = median(times);
    const double lockstep_mpi = time_threads(group, pool, count, iters);
    if (rank == 0) {
      report("MPI_Allreduce", size, count, mpi_allreduce);
      report("MpiAllReduce", size, count, lockstep_mpi);
    }
    return 0;
#else
    fail("--mpi: this build has no MPI; install libopenmpi-dev and rebuild");
#endif
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
