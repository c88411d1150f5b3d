// All-reduce time and bandwidth of lockstep's collectives, with nccl-tests'
// definitions: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n.
// usage: all_reduce [--backend host] [--replicas N] [--count C] [--iters I]
//        mpirun -np P all_reduce --mpi [--count C] [--iters I]
//        all_reduce_cuda --backend cuda [--devices 0,1] [--collective nccl|hierarchical|one_device|all]
//                        [--count C] [--iters I]
//   host: HostAllReduce over N replica threads, for the model's gradient
//     (203,530 floats) or --count: all_reduce (every replica gets the sum),
//     and reduce_update, the reduce-scatter that the trainer's sharded update
//     runs each step (here with an update that only stores the summed
//     gradient it reads: the collective alone), and cross_core_read_floor,
//     each replica only reading its chunk of the others' freshly written
//     buffers: the least any all-reduce between threads must do.
//   --mpi: MPI_Allreduce and lockstep's MpiAllReduce (one replica per process).
//   --backend cuda (all_reduce_cuda, built in the cuda preset from
//     all_reduce.cu, which includes this file): NcclAllReduce,
//     HierarchicalCopyAllReduce and ReductionToOneDevice with one replica
//     thread per listed GPU (default: every visible GPU; a GPU may be listed
//     several times, except for NCCL), in place, for 4 B to 256 MiB by powers
//     of 4 plus the gradient size (or only --count), as an nccl-tests-like
//     table and then key=value lines. With one replica no bytes cross
//     devices (the copy collectives return at once), so the table says n/a
//     for the bandwidths and the key=value lines give 0, never inf or NaN.
//     With no GPU visible it says so and prints gpus=0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <lockstep/lockstep.hpp>
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif
#if defined(LOCKSTEP_ALL_REDUCE_CUDA)
#include <exception>
#include <thread>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/collective/hierarchical_copy_all_reduce.cuh"
#include "lockstep/collective/nccl_all_reduce.cuh"
#include "lockstep/collective/reduction_to_one_device.cuh"
#endif

#include "median.hpp"

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kGradientCount = 203530;  // the fashion_mnist model's parameters

using lockstep::bench::median;

void report(const char* collective, int n, std::size_t count, double seconds) {
  const double bytes = static_cast<double>(count) * sizeof(float);
  const double algbw = bytes / seconds * 1e-9;
  std::printf("collective=%s replicas=%d count=%zu bytes=%.0f median_us=%.2f algbw_gbs=%.3f busbw_gbs=%.3f\n",
              collective, n, count, bytes, seconds * 1e6, algbw, algbw * 2.0 * (n - 1) / n);
}

// Every replica calls `call(group, replica, buffer)` `iters` times; replica 0
// times each call. Before each call every replica rewrites its buffer, as
// backward does in training, so the other replicas' cached copies of it are
// stale and the call moves the bytes that a training step moves.
template <class Group, class Call>
double time_threads(Group& group, lockstep::host::ReplicaPool& pool, std::size_t count, int iters, Call call) {
  std::vector<std::vector<float>> data(static_cast<std::size_t>(pool.size()), std::vector<float>(count, 1.0f));
  std::vector<double> times;
  lockstep::host::SpinBarrier written(pool.size());
  pool.run([&](int r) {
    for (int i = 0; i < iters + 10; ++i) {  // 10 warm-up calls
      std::fill(data[static_cast<std::size_t>(r)].begin(), data[static_cast<std::size_t>(r)].end(),
                static_cast<float>(i % 7));
      written.wait();
      const auto t0 = Clock::now();
      call(group, r, data[static_cast<std::size_t>(r)].data());
      if (r == 0 && i >= 10) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  });
  return median(times);
}
template <class Group>
double time_threads(Group& group, lockstep::host::ReplicaPool& pool, std::size_t count, int iters) {
  return time_threads(group, pool, count, iters, [count](Group& g, int r, float* data) {
    g.all_reduce(r, data, count, lockstep::ReduceOp::kMean);
  });
}

// The floor under any all-reduce between threads: every replica must at
// least read its chunk of each other replica's freshly written buffer. This
// does only that, between the same two barriers as HostAllReduce, and stores
// no sum (it keeps a checksum so the reads are not optimised away).
class CrossCoreReadFloor {
 public:
  explicit CrossCoreReadFloor(int replicas)
      : buffers_(static_cast<std::size_t>(replicas)), checksums_(buffers_.size()), barrier_(replicas) {}
  void read(int replica, const float* data, std::size_t count) {
    const std::size_t r = static_cast<std::size_t>(replica), n = buffers_.size();
    buffers_[r] = data;
    barrier_.wait();
    constexpr std::size_t kLanes = 16;  // independent sums: the loads, not an add chain, set the pace
    float lanes[kLanes] = {};
    const std::size_t first = count * r / n / kLanes * kLanes, last = count * (r + 1) / n / kLanes * kLanes;
    for (std::size_t s = 0; s < n; ++s) {
      if (s == r) continue;
      for (std::size_t i = first; i < last; i += kLanes)
        for (std::size_t j = 0; j < kLanes; ++j) lanes[j] += buffers_[s][i + j];
    }
    float total = 0;
    for (float lane : lanes) total += lane;
    checksums_[r] = total;
    barrier_.wait();
  }

 private:
  std::vector<const float*> buffers_;
  std::vector<float> checksums_;
  lockstep::host::SpinBarrier barrier_;
};

#if defined(LOCKSTEP_ALL_REDUCE_CUDA)
namespace cuda_mode {
using namespace lockstep;

struct Options {
  std::vector<int> devices;  // empty: every visible GPU
  std::string collective = "all";
  std::size_t count = 0;  // 0: the size sweep
  int iters = 20, warmup = 5;
};

std::vector<int> parse_devices(const std::string& list) {
  std::vector<int> devices;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    require(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos, "--devices: '", list,
            "', expected GPU indices separated by commas, e.g. 0,1");
    devices.push_back(std::atoi(item.c_str()));
    at = comma + 1;
  }
  return devices;
}

// Every replica's buffer, stream and timing events, made once on its GPU and
// reused for every collective and size.
struct Replica {
  int device;
  gpu::DeviceBuffer<float> buffer;
  gpu::Stream stream;
  gpu::Event start{true}, stop{true};
};

// `warmup` untimed calls, then `iters` calls between two events on each
// replica's stream, one host thread per replica; the time of one call is the
// slowest replica's mean (a collective is done when its last replica is).
template <class Group>
double time_collective(Group& group, std::vector<Replica>& replicas, std::size_t count, const Options& options) {
  const std::size_t n = replicas.size();
  std::vector<double> seconds(n, 0.0);
  std::vector<std::exception_ptr> errors(n);
  host::SpinBarrier aligned(static_cast<int>(n));
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Replica& me = replicas[r];
        LOCKSTEP_CUDA_CHECK(cudaSetDevice(me.device));
        const int replica = static_cast<int>(r);
        for (int i = 0; i < options.warmup; ++i) group.all_reduce(replica, me.buffer.data(), count, me.stream);
        me.stream.synchronize();
        aligned.wait();  // every replica starts its clock with idle streams
        me.start.record(me.stream);
        for (int i = 0; i < options.iters; ++i) group.all_reduce(replica, me.buffer.data(), count, me.stream);
        me.stop.record(me.stream);
        me.stop.synchronize();
        seconds[r] = me.stop.elapsed_ms_since(me.start) * 1e-3 / options.iters;
      } catch (...) {
        errors[r] = std::current_exception();
        group.abort();
        aligned.abort();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return *std::max_element(seconds.begin(), seconds.end());
}

struct Result {
  std::size_t count;
  double seconds;
};

// nccl-tests' algbw and busbw in GB/s, or nothing where they mean nothing:
// with one replica no byte crosses devices (busbw's 2 (n - 1) / n is 0, and a
// copy collective returns without enqueuing anything, so the time is ~0 and
// bytes / time would be inf or NaN), and a time that is not positive.
struct Bandwidth {
  bool valid;
  double algbw, busbw;
};
Bandwidth bandwidth(std::size_t count, double seconds, int n) {
  const double bytes = static_cast<double>(count) * sizeof(float);
  if (n < 2 || !(seconds > 0) || !std::isfinite(seconds)) return {false, 0.0, 0.0};
  const double algbw = bytes / seconds * 1e-9;
  return {true, algbw, algbw * 2.0 * (n - 1) / n};
}

template <class Group>
std::vector<Result> sweep(const char* name, std::vector<Replica>& replicas, const std::vector<std::size_t>& counts,
                          const Options& options) {
  std::vector<int> devices;
  for (const auto& rep : replicas) devices.push_back(rep.device);
  Group group(devices);
  const int n = static_cast<int>(replicas.size());
  std::printf("\n# %s, %d replica%s on GPU%s", name, n, n == 1 ? "" : "s", n == 1 ? "" : "s");
  for (std::size_t r = 0; r < devices.size(); ++r) std::printf("%s%d", r ? "," : " ", devices[r]);
  std::printf(", in place, %d warm-up + %d timed calls\n", options.warmup, options.iters);
  bool one_gpu = true;
  for (int d : devices) one_gpu = one_gpu && d == devices[0];
  if (n < 2)
    std::printf("# one replica: no bytes cross devices, so the bandwidths are n/a\n");
  else if (one_gpu)
    std::printf("# every replica on GPU %d: the copies stay in its memory (no bytes cross devices)\n", devices[0]);
  std::printf("#%14s %12s %12s %12s %12s\n", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  std::vector<Result> results;
  for (std::size_t count : counts) {
    const double s = time_collective(group, replicas, count, options);
    const double bytes = static_cast<double>(count) * sizeof(float);
    const Bandwidth bw = bandwidth(count, s, n);
    if (bw.valid)
      std::printf("%15.0f %12zu %12.2f %12.3f %12.3f%s\n", bytes, count, s * 1e6, bw.algbw, bw.busbw,
                  count == kGradientCount ? "   (gradient)" : "");
    else
      std::printf("%15.0f %12zu %12.2f %12s %12s%s\n", bytes, count, s * 1e6, "n/a", "n/a",
                  count == kGradientCount ? "   (gradient)" : "");
    std::fflush(stdout);
    results.push_back({count, s});
  }
  return results;
}

int run(const Options& options) {
  int visible = 0;
  const cudaError_t status = cudaGetDeviceCount(&visible);
  if (status != cudaSuccess) {
    std::printf("no CUDA device is visible (%s: %s): nothing to time\ngpus=0\n", cudaGetErrorName(status),
                cudaGetErrorString(status));
    (void)cudaGetLastError();
    return 0;
  }
  if (visible == 0) {
    std::printf("no CUDA device is visible (cudaGetDeviceCount = 0): nothing to time\ngpus=0\n");
    return 0;
  }
  std::vector<int> devices = options.devices;
  if (devices.empty())
    for (int d = 0; d < visible; ++d) devices.push_back(d);
  for (int d : devices)
    require(d < visible, "--devices: GPU ", d, " does not exist, ", visible, " visible (0..", visible - 1, ")");

  std::vector<std::size_t> counts;
  if (options.count) {
    counts.push_back(options.count);
  } else {
    for (std::size_t bytes = 4; bytes <= (std::size_t{256} << 20); bytes *= 4) counts.push_back(bytes / sizeof(float));
    counts.push_back(kGradientCount);
    std::sort(counts.begin(), counts.end());
  }
  const std::size_t largest = *std::max_element(counts.begin(), counts.end());

  std::vector<Replica> replicas;
  replicas.reserve(devices.size());
  for (int d : devices) {
    gpu::DeviceGuard guard(d);  // buffers, streams and events belong to the replica's GPU
    replicas.push_back(Replica{d, gpu::DeviceBuffer<float>(largest), gpu::Stream(), gpu::Event(true),
                               gpu::Event(true)});
    LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());  // the buffer's zero-fill ran on the legacy default stream
  }
  std::printf("# all_reduce_cuda: %d GPU%s visible, %zu replicas\n", visible, visible == 1 ? "" : "s",
              replicas.size());

  struct Summary {
    const char* key;
    std::vector<Result> results;
  };
  std::vector<Summary> summaries;
  const bool all = options.collective == "all";
  if (all || options.collective == "nccl") {
    bool duplicate = false;
    for (std::size_t r = 0; r < devices.size(); ++r)
      for (std::size_t q = 0; q < r; ++q) duplicate = duplicate || devices[q] == devices[r];
    if (duplicate && all)
      std::printf("\n# NcclAllReduce skipped: a GPU is listed twice, and NCCL needs one replica per GPU\n");
    else
      summaries.push_back({"nccl", sweep<NcclAllReduce::Group>("NcclAllReduce", replicas, counts, options)});
  }
  if (all || options.collective == "hierarchical")
    summaries.push_back({"hierarchical", sweep<HierarchicalCopyAllReduce::Group>("HierarchicalCopyAllReduce",
                                                                                 replicas, counts, options)});
  if (all || options.collective == "one_device")
    summaries.push_back({"one_device", sweep<ReductionToOneDevice<Cuda>::Group>("ReductionToOneDevice", replicas,
                                                                                 counts, options)});

  const int n = static_cast<int>(replicas.size());
  std::printf("\ngpus=%d\nreplicas=%d\n", visible, n);
  for (const auto& summary : summaries)
    for (const auto& result : summary.results) {
      const double bytes = static_cast<double>(result.count) * sizeof(float);
      const Bandwidth bw = bandwidth(result.count, result.seconds, n);  // 0 where n/a
      const double algbw = bw.algbw, busbw = bw.busbw;
      std::string label;
      if (result.count == kGradientCount) label = "gradient";
      else if (bytes == static_cast<double>(std::size_t{256} << 20)) label = "256MiB";
      else if (options.count) label = std::to_string(result.count);
      else continue;
      std::printf("%s_us_%s=%.2f\n%s_algbw_gbps_%s=%.3f\n%s_busbw_gbps_%s=%.3f\n", summary.key, label.c_str(),
                  result.seconds * 1e6, summary.key, label.c_str(), algbw, summary.key, label.c_str(), busbw);
    }
  return 0;
}

}  // namespace cuda_mode
#endif
}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  int replicas = 2, iters = 0;
  std::size_t count = kGradientCount;
  bool mpi = false, count_given = false, replicas_given = false;
  std::string backend = "host", devices, collective;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--mpi") {
        mpi = true;
        continue;
      }
      require(i + 1 < argc, flag, " needs a value");
      const std::string value = argv[++i];
      if (flag == "--backend") {
        backend = value;
      } else if (flag == "--replicas") {
        replicas = std::max(1, std::atoi(value.c_str()));
        replicas_given = true;
      } else if (flag == "--count") {
        count = static_cast<std::size_t>(std::atoll(value.c_str()));
        count_given = true;
      } else if (flag == "--iters") {
        iters = std::max(1, std::atoi(value.c_str()));
      } else if (flag == "--devices") {
        devices = value;
      } else if (flag == "--collective") {
        collective = value;
      } else {
        fail("unknown flag '", flag,
             "'; expected --backend, --replicas, --count, --iters, --devices, --collective or --mpi");
      }
    }
    if (backend == "cuda") {
#if defined(LOCKSTEP_ALL_REDUCE_CUDA)
      require(!mpi && !replicas_given, "--backend cuda: runs one replica per listed GPU; list them with --devices "
              "(e.g. --devices 0,1 or --devices 0,0,0) instead of --replicas or --mpi");
      cuda_mode::Options options;
      if (!devices.empty()) options.devices = cuda_mode::parse_devices(devices);
      if (!collective.empty()) options.collective = collective;
      require(options.collective == "nccl" || options.collective == "hierarchical" ||
              options.collective == "one_device" || options.collective == "all",
              "--collective: '", options.collective, "', expected nccl, hierarchical, one_device or all");
      if (count_given) {
        require(count > 0, "--count: 0, expected at least 1 float");
        options.count = count;
      }
      if (iters) options.iters = iters;
      return cuda_mode::run(options);
#else
      (void)replicas_given;
      (void)count_given;
      fail("--backend cuda: this binary is built without CUDA; build the all_reduce_cuda target in the cuda preset "
           "(cmake --preset cuda)");
#endif
    }
    require(backend == "host", "--backend: '", backend, "', expected host or cuda");
    require(devices.empty() && collective.empty(), "--devices and --collective need --backend cuda");
    if (!iters) iters = 1000;
    if (!mpi) {
      host::ReplicaPool pool(replicas);
      HostAllReduce::Group group(replicas);
      report("HostAllReduce", replicas, count, time_threads(group, pool, count, iters));
      const double reduce_update = time_threads(group, pool, count, iters, [count](auto& g, int r, float* data) {
        // The least an update can do: store the summed gradient it reads.
        g.reduce_update(r, data, count, count, [data](std::size_t first, std::size_t last, auto summed) {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t i = first; i < last; ++i) data[i] = summed[i];
        });
      });
      report("HostAllReduce.reduce_update", replicas, count, reduce_update);
      if (replicas > 1) {
        CrossCoreReadFloor floor(replicas);
        report("cross_core_read_floor", replicas, count,
               time_threads(floor, pool, count, iters,
                            [count](CrossCoreReadFloor& f, int r, float* data) { f.read(r, data, count); }));
      }
      return 0;
    }
#if defined(LOCKSTEP_HAVE_MPI)
    MpiAllReduce::Group group(1);  // initialises MPI; one replica: this thread
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<float> data(count, 1.0f);
    // Both collectives timed alike: every rank rewrites its buffer (as
    // time_threads does), the ranks meet at a barrier, then one timed call.
    const auto time_mpi = [&](auto call) {
      std::vector<double> times;
      for (int i = 0; i < iters + 10; ++i) {
        std::fill(data.begin(), data.end(), static_cast<float>(i % 7));
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = Clock::now();
        call();
        if (i >= 10) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      return median(times);
    };
    const double mpi_allreduce = time_mpi([&] {
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const double lockstep_mpi = time_mpi([&] { group.all_reduce(0, data.data(), count, ReduceOp::kSum); });
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
