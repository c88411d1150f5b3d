// Training throughput of a Fashion-MNIST model (Adam) on synthetic data of
// the same shape: samples/s and ms per synchronous step.
// usage: train_throughput [--backend host|cuda] [--strategy mirrored|central|multiworker]
//                         [--collective nccl|hierarchical|one_device] [--replicas N]
//                         [--batch-size B] [--steps S] [--epochs E] [--blas-threads T]
//                         [--mfu yes|no] [--model mlp|mlp_bn_dropout|cnn|cnn_bn] [--conv builtin|onednn]
//                         [--profile off|compiled|recording] [--deterministic UNITS|rows] [--paired N]
// --model mlp (default): 784-256-10; mlp_bn_dropout: the same with
// BatchNormalization, Relu and Dropout 0.2 after the first Dense; cnn: Keras'
// simple MNIST convnet, and cnn_bn: the same with BatchNormalization after
// each convolution (examples/fashion_mnist/models.hpp) on 28x28x1 samples. --conv picks the
// host's convolution path (host::set_conv_path; default host::kDefaultConvPath).
// The data set is S batches of B synthetic samples; it is trained E times
// (default 1), so a longer measurement keeps the same data set size.
// --mfu no skips the SGEMM peak measured after training (for runs that share
// the machine with another training process, which the peak would slow).
// --profile (host): off (default) trains the plain strategy; compiled trains
// Profiled<strategy> with the profiler stopped; recording also records every
// timed step (profiler::start before, stop after the timing): the profiler's
// cost is recording's samples/s against off's (benchmarks/profile_overhead.sh).
// --deterministic UNITS trains in the deterministic mode with that many units
// (core/determinism.hpp; 24 covers 1, 2, 3, 4, 6 and 8 replicas); rows: in
// the row-order scheme (Deterministic::in_row_order(), no units).
// --paired N (with --deterministic) times that mode against the default mode
// in one process, N rounds of one fit each, taking turns (measure_paired),
// and prints the medians: default_samples_per_s, samples_per_s and ratio.
// multiworker runs under mpirun; --replicas is then per process, B global.
// --backend cuda (train_throughput_cuda, built by nvcc): N GPUs, MirroredPolicy
// with the chosen collective; it prints the model TFLOP/s instead of mfu.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <lockstep/core/flags.hpp>
#include <lockstep/core/output.hpp>
#include <lockstep/lockstep.hpp>

#include "../examples/fashion_mnist/models.hpp"
#include "gemm_timing.hpp"
#include "median.hpp"
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif
#if defined(LOCKSTEP_HAVE_CUDA)
#include <lockstep/cuda.hpp>
#endif

namespace {

// The flags' ranges: a replica is a thread (or a GPU), a batch's rows per
// replica must fit the int the layers take, and the timed steps an int.
constexpr int kMaxReplicas = 1024;
constexpr std::size_t kMaxBatchSize = 2147483647;  // 2^31 - 1
constexpr int kMaxSteps = 1000000;
constexpr int kMaxRounds = 1000;

// --deterministic rows: the row-order scheme, where Run::deterministic holds a unit count.
constexpr int kRowOrder = -1;

// What to measure: the batch, the batches per epoch, the epochs, BLAS threads (0: cores / replicas).
struct Run {
  std::size_t batch = 128;
  int steps = 200, epochs = 1, blas_threads = 0;
  int deterministic = 0;  // units of the deterministic mode; kRowOrder: row order; 0: the default mode
  int paired = 0;         // rounds of the deterministic mode against the default mode in one process; 0: no pairs
  bool mfu = true;  // measure the SGEMM peak afterwards and print mfu
  std::string profile = "off";
};

// The example's models (examples/fashion_mnist/models.hpp).
using fashion_mnist::Cnn;
using fashion_mnist::CnnBn;
using fashion_mnist::Mlp;
using fashion_mnist::MlpBnDropout;

// A data set of run.steps batches of uniform pixels and random labels, in Model's input shape.
template <class Model>
lockstep::Dataset synthetic_data(const Run& run) {
  using namespace lockstep;
  const std::size_t batch = run.batch;
  const std::size_t samples = batch * static_cast<std::size_t>(run.steps);
  constexpr std::size_t kFeatures = Model::kInputs;
  // Checked before the allocation, which Linux may grant and then kill the process for.
  const double data_bytes = static_cast<double>(batch) * run.steps *
                            static_cast<double>(kFeatures * sizeof(float) + sizeof(std::int32_t));
  require(data_bytes <= host::physical_memory_bytes() || host::physical_memory_bytes() == 0, "the synthetic data "
          "set of --steps ", run.steps, " batches of --batch-size ", batch, " samples needs ", host::byte_count(data_bytes),
          ", more than this machine's ", host::byte_count(host::physical_memory_bytes()),
          " of memory; lower --steps or --batch-size");
  std::vector<float> x(samples * kFeatures);
  std::vector<std::int32_t> y(samples);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = Philox4x32::uniform(1, rng_stream::kData, i);
  for (std::size_t i = 0; i < samples; ++i) y[i] = static_cast<std::int32_t>(Philox4x32::bits64(2, rng_stream::kData, i) % 10);
  return Dataset(std::move(x), kFeatures, std::move(y));
}

// The options of a fit of `epochs` epochs of --batch-size batches, silent.
lockstep::FitOptions fit_options(const Run& run, int epochs) {
  lockstep::FitOptions options;
  options.batch_size = run.batch;
  options.verbose = false;
  options.epochs = epochs;
  return options;
}

// After the trainers are made: --blas-threads (host), then one untimed fit
// of up to 10 batches on each model, so that first calls (oneDNN's JIT,
// pages, threads) stay out of the timing.
template <class Strategy, class T, class M>
void prepare(const Run& run, const lockstep::Dataset& data, std::initializer_list<std::pair<T*, M*>> runs) {
  if constexpr (std::is_same_v<typename Strategy::backend, lockstep::Host>)
    if (run.blas_threads > 0) lockstep::host::set_blas_threads(run.blas_threads);  // instead of cores / replicas
  for (const auto& [trainer, model] : runs)
    trainer->fit(*model, data.slice(0, std::min<std::size_t>(data.size(), run.batch * 10)), fit_options(run, 1));
}

lockstep::Deterministic deterministic_of(const Run& run) {
  return run.deterministic == kRowOrder ? lockstep::Deterministic::in_row_order()
                                        : lockstep::Deterministic{run.deterministic};
}

// --paired N: the deterministic mode against the default mode in this one
// process, N rounds of one fit of --epochs each, the two modes taking turns
// (which goes first alternates). This machine's speed drifts over seconds, so
// two runs a fraction of a second apart see nearly the same machine, where
// two processes run one after the other often do not. Prints each round's
// pair, then the medians.
template <class Model, class Strategy>
int measure_paired(Strategy strategy, const char* name, const Run& run) {
  using namespace lockstep;
  const Dataset data = synthetic_data<Model>(run);
  Strategy det_strategy = strategy;
  det_strategy.set_deterministic(deterministic_of(run));
  Trainer<Strategy, Adam> plain{strategy, Adam{}}, deterministic{det_strategy, Adam{}};
  Model plain_model{0}, deterministic_model{0};
  Trainer<Strategy, Adam>* trainers[2] = {&plain, &deterministic};
  Model* models[2] = {&plain_model, &deterministic_model};
  prepare<Strategy>(run, data, {std::pair{&plain, &plain_model}, std::pair{&deterministic, &deterministic_model}});
  const FitOptions options = fit_options(run, run.epochs);
  const double samples = static_cast<double>(data.size()) * run.epochs;
  std::vector<double> rates[2], ratios;
  for (int round = 0; round < run.paired; ++round) {
    double rate[2] = {0, 0};
    for (int turn = 0; turn < 2; ++turn) {
      const int m = (turn + round) % 2;
      const auto t0 = std::chrono::steady_clock::now();
      trainers[m]->fit(*models[m], data, options);
      rate[m] = samples / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rates[m].push_back(rate[m]);
    }
    ratios.push_back(rate[1] / rate[0]);
    if (plain.process_rank() == 0)
      std::printf("round %d default_samples_per_s=%.0f deterministic_samples_per_s=%.0f ratio=%.3f\n", round + 1,
                  rate[0], rate[1], ratios.back());
  }
  if (plain.process_rank() != 0) return 0;
  std::printf("backend=%s strategy=%s replicas=%d batch_size=%zu steps=%d deterministic=%s rounds=%d\n",
              Strategy::backend::kName, name, plain.global_replicas(), run.batch, run.steps * run.epochs,
              run.deterministic == kRowOrder ? "rows" : std::to_string(run.deterministic).c_str(), run.paired);
  std::printf("default_samples_per_s=%.0f samples_per_s=%.0f ratio=%.3f\n", bench::median(rates[0]),
              bench::median(rates[1]), bench::median(ratios));
  return 0;
}

template <class Model, class Strategy>
int measure(Strategy strategy, const char* name, const Run& run) {
  if (run.paired) return measure_paired<Model>(strategy, name, run);
  const std::size_t batch = run.batch;
  const int steps = run.steps * run.epochs;  // timed steps
  const std::size_t samples = batch * static_cast<std::size_t>(run.steps);
  using namespace lockstep;
  const Dataset data = synthetic_data<Model>(run);

  Model model{0};
  if (run.deterministic) strategy.set_deterministic(deterministic_of(run));
  Trainer<Strategy, Adam> trainer{strategy, Adam{}};
  constexpr bool kHost = std::is_same_v<typename Strategy::backend, Host>;
  prepare<Strategy>(run, data, {std::pair{&trainer, &model}});
  const FitOptions options = fit_options(run, run.epochs);
  const bool record = run.profile == "recording";
  if (record) profiler::start((std::filesystem::temp_directory_path() / "lockstep-train-throughput-profile").string());
  const auto t0 = std::chrono::steady_clock::now();
  trainer.fit(model, data, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double span_share = 0, per_step = 0, span_ns = 0;  // recording: what its spans cost, per step
  if (record) {
    std::size_t spans = 0;
    for (int r = 0; r < trainer.replicas(); ++r) spans += observe::session().track(r)->spans().size();
    profiler::stop();
    constexpr int kProbes = 200000;  // one span's cost, measured on this thread now
    observe::Track probe(0, 0);
    const auto p0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kProbes; ++i) observe::Scope span(&probe, observe::Phase::kForward, "probe");
    span_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - p0).count() / kProbes;
    per_step = static_cast<double>(spans) / trainer.replicas() / steps;
    span_share = per_step * span_ns / (seconds * 1e9 / steps);
  }
  if (trainer.process_rank() != 0) return 0;
  const double samples_per_s = static_cast<double>(samples) * run.epochs / seconds;
  if constexpr (!kHost) {
    std::printf("backend=cuda strategy=%s replicas=%d batch_size=%zu steps=%d\n", name, trainer.global_replicas(),
                batch, steps);
    std::printf("samples_per_s=%.0f step_ms=%.4f model_tflops=%.3f\n", samples_per_s, seconds * 1e3 / steps,
                samples_per_s * Model::kTrainFlopsPerSample * 1e-12);
    return 0;
  }
  // replicas: the strategy's (the deterministic mode's units are not replicas).
  std::printf("backend=host strategy=%s replicas=%d batch_size=%zu steps=%d gemm=%s profile=%s deterministic=%s", name,
              strategy.replicas() * trainer.executor().group().process_count(), batch, steps, host::kGemmPath,
              run.profile.c_str(),
              run.deterministic == kRowOrder ? "rows" : std::to_string(run.deterministic).c_str());
  if constexpr (!std::is_same_v<Model, Mlp>)
    std::printf(" conv=%s", host::conv_path() == host::ConvPath::kOneDnn ? "onednn" : "builtin");
  if (record) std::printf(" spans_per_replica_step=%.1f span_ns=%.1f", per_step, span_ns);
  if (!run.mfu) {  // another process may still be training: measure no peak under it
    std::printf("\nsamples_per_s=%.0f step_ms=%.4f", samples_per_s, seconds * 1e3 / steps);
    if (record) std::printf(" span_share=%.6f", span_share);
    std::printf("\n");
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

// Runs measure with the model --model names, where the strategy's backend has its layers.
template <class Strategy>
int measure(Strategy strategy, const char* name, const Run& run, const std::string& model) {
  using Context = typename lockstep::Trainer<Strategy, lockstep::Adam>::executor_type::context_type;
  if (model == "cnn" || model == "cnn_bn") {
    if constexpr (lockstep::supports_conv2d_v<Context>)
      return model == "cnn" ? measure<Cnn>(strategy, name, run) : measure<CnnBn>(strategy, name, run);
    else
      lockstep::fail("--model ", model, ": the ", Strategy::backend::kName,
                     " backend of this build has no convolutions; run it with --backend host");
  }
  if (model == "mlp_bn_dropout") return measure<MlpBnDropout>(strategy, name, run);
  lockstep::require(model == "mlp", "--model: '", model, "', expected mlp, mlp_bn_dropout, cnn or cnn_bn");
  return measure<Mlp>(strategy, name, run);
}

// --deterministic's unit count, whose message also names its other value, rows.
int parse_units(const std::string& value) {
  const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
  lockstep::require(digits, "--deterministic: '", value, "', expected a unit count from 1 to ",
                    lockstep::detail::kMaxUnits, " or rows (the row-order scheme)");
  return lockstep::parse_integer("--deterministic", value, 1, lockstep::detail::kMaxUnits);
}

}  // namespace

int benchmark(int argc, char** argv) {
  using namespace lockstep;
  int replicas = 1;
  Run run;
  std::string strategy = "mirrored", backend = "host", collective = "nccl", model = "mlp";
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
      if (flag == "--strategy" || flag == "--backend" || flag == "--collective" || flag == "--model") {
        (flag == "--strategy" ? strategy : flag == "--backend" ? backend : flag == "--model" ? model : collective) =
            argv[i + 1];
        continue;
      }
      if (flag == "--profile") {
        run.profile = argv[i + 1];
        require(run.profile == "off" || run.profile == "compiled" || run.profile == "recording", "--profile: '",
                run.profile, "', expected off, compiled or recording");
        continue;
      }
      if (flag == "--conv") {
        const std::string v = argv[i + 1];
        require(v == "builtin" || v == "onednn", "--conv: '", v, "', expected builtin or onednn");
        host::set_conv_path(v == "onednn" ? host::ConvPath::kOneDnn : host::ConvPath::kBuiltin);
        continue;
      }
      // Range-checked (core/flags.hpp): a value past the maximum is an Error, never narrowed.
      const std::string value = argv[i + 1];
      if (flag == "--replicas") replicas = parse_integer(flag, value, 1, kMaxReplicas);
      else if (flag == "--batch-size") run.batch = parse_integer<std::size_t>(flag, value, 1, kMaxBatchSize);
      else if (flag == "--steps") run.steps = parse_integer(flag, value, 1, kMaxSteps);
      else if (flag == "--epochs") run.epochs = parse_integer(flag, value, 1, kMaxSteps);
      else if (flag == "--blas-threads") run.blas_threads = parse_integer(flag, value, 1, kMaxReplicas);
      else if (flag == "--deterministic")
        run.deterministic = value == "rows" ? kRowOrder : parse_units(value);
      else if (flag == "--paired") run.paired = parse_integer(flag, value, 1, kMaxRounds);
      else fail("unknown flag '", flag, "'; expected --backend, --strategy, --collective, --replicas, --batch-size, "
                "--steps, --epochs, --blas-threads, --mfu, --model, --conv, --profile, --deterministic or --paired");
    }
    // The timed steps are counted in an int.
    require(static_cast<long long>(run.steps) * run.epochs <= kMaxSteps, "--steps ", run.steps, " times --epochs ",
            run.epochs, " is ", static_cast<long long>(run.steps) * run.epochs, " timed steps, expected at most ",
            kMaxSteps);
    require(!run.paired || run.deterministic, "--paired ", run.paired,
            ": pairs the deterministic mode with the default mode; give --deterministic UNITS or rows too");
    require(!run.paired || run.profile == "off", "--paired with --profile ", run.profile,
            ": pairs run unprofiled; drop one of the two");
    if (backend == "cuda") {
#if defined(LOCKSTEP_HAVE_CUDA)
      require(strategy == "mirrored", "--strategy ", strategy, ": the cuda backend runs mirrored");
      if (collective == "hierarchical")
        return measure(MirroredPolicy<HierarchicalCopyAllReduce>{replicas}, "mirrored-hierarchical", run, model);
      if (collective == "one_device")
        return measure(MirroredPolicy<ReductionToOneDevice<>>{replicas}, "mirrored-one_device", run, model);
      require(collective == "nccl", "--collective: '", collective, "', expected nccl, hierarchical or one_device");
      return measure(MirroredPolicy<NcclAllReduce>{replicas}, "mirrored-nccl", run, model);
#else
      fail("--backend cuda: this build has no CUDA backend; run build/cuda/benchmarks/train_throughput_cuda");
#endif
    }
    require(backend == "host", "--backend: '", backend, "', expected host or cuda");
    if (strategy == "mirrored" && run.profile != "off")
      return measure(Profiled<MirroredPolicy<HostAllReduce>>{replicas}, "mirrored", run, model);
    require(run.profile == "off", "--profile ", run.profile, ": profiled runs are built for --strategy mirrored");
    if (strategy == "mirrored") return measure(MirroredPolicy<HostAllReduce>{replicas}, "mirrored", run, model);
    if (strategy == "central") return measure(CentralStoragePolicy{replicas}, "central", run, model);
#if defined(LOCKSTEP_HAVE_MPI)
    if (strategy == "multiworker")
      return measure(MultiWorkerMirroredPolicy<MpiAllReduce>{replicas}, "multiworker", run, model);
#endif
    fail("--strategy: '", strategy, "', expected mirrored, central or multiworker (multiworker needs MPI)");
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
}

int main(int argc, char** argv) {
  int status = 0;
  try {
    status = benchmark(argc, argv);
  } catch (const std::exception& e) {  // not a lockstep::Error, still a message rather than an abort
    std::cerr << "train_throughput: " << e.what() << '\n';
    return 2;
  }
  return lockstep::finish_output("train_throughput", status);  // a result not written (a full disk) is no result
}
