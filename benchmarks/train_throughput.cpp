// Training throughput of the Fashion-MNIST model (784-256-10, Adam) on
// synthetic data of the same shape: samples/s and ms per synchronous step.
// usage: train_throughput [--backend host|cuda] [--strategy mirrored|central|multiworker]
//                         [--collective nccl|hierarchical|one_device] [--replicas N]
//                         [--batch-size B] [--steps S] [--epochs E] [--blas-threads T]
//                         [--mfu yes|no]
// The data set is S batches of B synthetic samples; it is trained E times
// (default 1), so a longer measurement keeps the same data set size.
// --mfu no skips the SGEMM peak measured after training (for runs that share
// the machine with another training process, which the peak would slow).
// multiworker runs under mpirun; --replicas is then per process, B global.
// --backend cuda (train_throughput_cuda, built by nvcc): N GPUs, MirroredPolicy
// with the chosen collective; it prints the model TFLOP/s instead of mfu.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

#include <lockstep/lockstep.hpp>

#include "gemm_timing.hpp"
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif
#if defined(LOCKSTEP_HAVE_CUDA)
#include <lockstep/cuda.hpp>
#endif

namespace {

// What to measure: the batch, the batches per epoch, the epochs, BLAS threads (0: cores / replicas).
struct Run {
  std::size_t batch = 128;
  int steps = 200, epochs = 1, blas_threads = 0;
  bool mfu = true;  // measure the SGEMM peak afterwards and print mfu
};

template <class Strategy>
int measure(Strategy strategy, const char* name, const Run& run) {
  const std::size_t batch = run.batch;
  const int steps = run.steps * run.epochs;  // timed steps
  using namespace lockstep;
  using Model = Sequential<Input<784>, Dense<256, Relu>, Dense<10>>;
  // A data set of run.steps batches of uniform pixels and random labels.
  const std::size_t samples = batch * static_cast<std::size_t>(run.steps);
  std::vector<float> x(samples * 784);
  std::vector<std::int32_t> y(samples);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = Philox4x32::uniform(1, rng_stream::kData, i);
  for (std::size_t i = 0; i < samples; ++i) y[i] = static_cast<std::int32_t>(Philox4x32::bits64(2, rng_stream::kData, i) % 10);
  const Dataset data(std::move(x), 784, std::move(y));

  Model model{0};
  Trainer<Strategy, Adam> trainer{strategy, Adam{}};
  constexpr bool kHost = std::is_same_v<typename Strategy::backend, Host>;
  if (kHost && run.blas_threads > 0) host::set_blas_threads(run.blas_threads);  // instead of cores / replicas
  FitOptions options;
  options.batch_size = batch;
  options.verbose = false;
  options.epochs = 1;
  trainer.fit(model, data.slice(0, std::min<std::size_t>(samples, batch * 10)), options);  // warm-up
  options.epochs = run.epochs;
  const auto t0 = std::chrono::steady_clock::now();
  trainer.fit(model, data, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (trainer.process_rank() != 0) return 0;
  const double samples_per_s = static_cast<double>(samples) * run.epochs / seconds;
  if constexpr (!kHost) {
    std::printf("backend=cuda strategy=%s replicas=%d batch_size=%zu steps=%d\n", name, trainer.global_replicas(),
                batch, steps);
    std::printf("samples_per_s=%.0f step_ms=%.4f model_tflops=%.3f\n", samples_per_s, seconds * 1e3 / steps,
                samples_per_s * Model::kTrainFlopsPerSample * 1e-12);
    return 0;
  }
  std::printf("backend=host strategy=%s replicas=%d batch_size=%zu steps=%d gemm=%s", name,
              trainer.global_replicas(), batch, steps, host::kGemmPath);
  if (!run.mfu) {  // another process may still be training: measure no peak under it
    std::printf("\nsamples_per_s=%.0f step_ms=%.4f\n", samples_per_s, seconds * 1e3 / steps);
    return 0;
  }
  // Model FLOP utilisation: training FLOPs per second over the SGEMM peak of
  // this machine, measured here with all cores (benchmarks/gemm_peak).
  host::set_blas_threads(Host::hardware_threads());
  const double peak = bench::sgemm_peak_gflops();
  std::printf(" sgemm_peak_gflops=%.1f\nsamples_per_s=%.0f step_ms=%.4f mfu=%.3f\n", peak, samples_per_s,
              seconds * 1e3 / steps, samples_per_s * Model::kTrainFlopsPerSample * 1e-9 / peak);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  int replicas = 1;
  Run run;
  std::string strategy = "mirrored", backend = "host", collective = "nccl";
  try {
    for (int i = 1; i < argc; i += 2) {
      const std::string flag = argv[i];
      require(i + 1 < argc, flag, " needs a value");
      if (flag == "--mfu") {
        const std::string v = argv[i + 1];
        require(v == "yes" || v == "no", "--mfu: '", v, "', expected yes or no");
        run.mfu = v == "yes";
        continue;
      }
      if (flag == "--strategy" || flag == "--backend" || flag == "--collective") {
        (flag == "--strategy" ? strategy : flag == "--backend" ? backend : collective) = argv[i + 1];
        continue;
      }
      const long v = std::strtol(argv[i + 1], nullptr, 10);
      require(v >= 1, flag, ": '", argv[i + 1], "' is not an integer >= 1");
      if (flag == "--replicas") replicas = static_cast<int>(v);
      else if (flag == "--batch-size") run.batch = static_cast<std::size_t>(v);
      else if (flag == "--steps") run.steps = static_cast<int>(v);
      else if (flag == "--epochs") run.epochs = static_cast<int>(v);
      else if (flag == "--blas-threads") run.blas_threads = static_cast<int>(v);
      else fail("unknown flag '", flag, "'; expected --backend, --strategy, --collective, --replicas, --batch-size, "
                "--steps, --epochs, --blas-threads or --mfu");
    }
    if (backend == "cuda") {
#if defined(LOCKSTEP_HAVE_CUDA)
      require(strategy == "mirrored", "--strategy ", strategy, ": the cuda backend runs mirrored");
      if (collective == "hierarchical")
        return measure(MirroredPolicy<HierarchicalCopyAllReduce>{replicas}, "mirrored-hierarchical", run);
      if (collective == "one_device")
        return measure(MirroredPolicy<ReductionToOneDevice<>>{replicas}, "mirrored-one_device", run);
      require(collective == "nccl", "--collective: '", collective, "', expected nccl, hierarchical or one_device");
      return measure(MirroredPolicy<NcclAllReduce>{replicas}, "mirrored-nccl", run);
#else
      fail("--backend cuda: this build has no CUDA backend; run build/cuda/benchmarks/train_throughput_cuda");
#endif
    }
    require(backend == "host", "--backend: '", backend, "', expected host or cuda");
    if (strategy == "mirrored") return measure(MirroredPolicy<HostAllReduce>{replicas}, "mirrored", run);
    if (strategy == "central") return measure(CentralStoragePolicy{replicas}, "central", run);
#if defined(LOCKSTEP_HAVE_MPI)
    if (strategy == "multiworker")
      return measure(MultiWorkerMirroredPolicy<MpiAllReduce>{replicas}, "multiworker", run);
#endif
    fail("--strategy: '", strategy, "', expected mirrored, central or multiworker (multiworker needs MPI)");
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
}
