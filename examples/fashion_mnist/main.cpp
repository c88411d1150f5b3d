// Trains the model of TensorFlow's MirroredStrategy guide (Dense 256 relu,
// Dense 10, Adam, sparse categorical cross-entropy) on Fashion-MNIST with
// MirroredPolicy<HostAllReduce> (or, built by nvcc as fashion_mnist_cuda,
// MirroredPolicy<NcclAllReduce> on the GPUs), and prints the test accuracy last.
// --model cnn trains Keras' "simple MNIST convnet" instead (cnn_bn: with
// BatchNormalization after each convolution). --log-placement, --profile DIR
// and --tensorboard DIR show where the replicas run, a trace of batches
// 10-20 with a scaling report, and TensorBoard's curves (README.md, docs/observe.md).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include <lockstep/core/flags.hpp>
#include <lockstep/core/output.hpp>
#include <lockstep/lockstep.hpp>
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif
#if defined(LOCKSTEP_HAVE_CUDA)
#include <lockstep/cuda.hpp>
#endif

#include "models.hpp"

namespace {

// The flags' ranges: beyond them a value is an error, never narrowed. Host
// replicas are threads (and GPU replicas devices), so a thousand is already
// far past a useful count; the batch's rows must fit the int the layers take.
constexpr int kMaxReplicas = 1024;
constexpr int kMaxEpochs = 1000000;
constexpr std::size_t kMaxBatchSize = 2147483647;  // 2^31 - 1
constexpr double kMaxTimeoutSeconds = 604800;      // a week

struct Flags {
  int replicas = 2;
  int epochs = 10;
  std::size_t batch_size = 128;
  std::string data = lockstep::fashion_mnist_dir();
  std::uint64_t seed = 0;
  double timeout_seconds = 300;  // --timeout: how long a collective waits for the other replicas
  std::string backup_dir;        // --backup-dir: BackupAndRestore's folder; empty: off
  bool help = false;
  std::string strategy = "mirrored";
  std::string backend = "host";
  std::string collective = "nccl";
  std::string model = "mlp";
  bool replicas_given = false;
  bool log_placement = false;
  std::string profile_dir, tensorboard_dir;  // empty: off
  int units = 0;           // --deterministic (24 units) or --units U; 0: the default mode
  bool row_order = false;  // --row-order: the deterministic mode without units
  std::string save_path;   // --save: the trained checkpoint; empty: not saved
};

const char* kUsage =
    "usage: fashion_mnist [--backend host|cuda] [--strategy mirrored|central|multiworker] [--replicas N]\n"
    "                     [--collective nccl|hierarchical|one_device] [--epochs E] [--batch-size B]\n"
    "                     [--data DIR] [--seed S] [--model mlp|mlp_bn_dropout|cnn|cnn_bn]\n"
    "                     [--log-placement] [--profile DIR] [--tensorboard DIR] [--timeout SECONDS]\n"
    "                     [--backup-dir DIR] [--deterministic] [--units U] [--row-order] [--save PATH]\n"
    "  --backend B     host (CPU threads) or cuda (GPUs; builds made by nvcc, the default there\n"
    "                  when a GPU is visible)\n"
    "  --strategy S    mirrored (default), central (CentralStoragePolicy; with cuda the\n"
    "                  variables live on the first GPU) or multiworker (MultiWorkerMirroredPolicy\n"
    "                  over MPI, or NCCL with cuda: start with mpirun -np P)\n"
    "  --replicas N    host replicas (threads) per process, default 2; with cuda, GPUs 0..N-1,\n"
    "                  default every visible GPU; at most 1024\n"
    "  --collective C  with cuda: nccl (default), hierarchical or one_device\n"
    "  --epochs E      default 10, at most 1000000\n"
    "  --batch-size B  global batch, split over the replicas, default 128, at most 2147483647\n"
    "  --data DIR      Fashion-MNIST IDX files (.gz or plain), default $FASHION_MNIST_DIR, else\n"
    "                  /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)\n"
    "  --seed S        seed of the initial weights, the shuffle and dropout, default 0\n"
    "  --model M       mlp (default): Dense 256 relu, Dense 10; mlp_bn_dropout: Dense 256,\n"
    "                  BatchNormalization, Relu, Dropout 0.2, Dense 10; cnn: Keras' simple MNIST\n"
    "                  convnet on 28x28x1 images (Conv2D 32 3x3 relu, MaxPooling2D 2, Conv2D 64\n"
    "                  3x3 relu, MaxPooling2D 2, Flatten, Dropout 0.5, Dense 10); cnn_bn: the same\n"
    "                  with BatchNormalization after each convolution (before its relu)\n"
    "  --log-placement  print where each replica runs, the collective and where variables\n"
    "                  live, at the start of fit (tf.debugging.set_log_device_placement)\n"
    "  --profile DIR   profile training batches 10-20 into DIR: a Chrome trace per process\n"
    "                  (open it in ui.perfetto.dev) and a scaling report, printed too\n"
    "  --tensorboard DIR  write TensorBoard event files into DIR (tensorboard --logdir DIR)\n"
    "  --timeout SECONDS  how long a collective waits for the other replicas before it is an\n"
    "                  error, default 300, a number greater than 0, at most 604800 (a week)\n"
    "  --backup-dir DIR  back up the training state into DIR at each epoch's end and resume from\n"
    "                  it when restarted (BackupAndRestore)\n"
    "  --deterministic  train bit for bit the same whatever --replicas (and processes): the\n"
    "                  batch is split into 24 units summed in a fixed order (covers 1, 2, 3, 4,\n"
    "                  6 and 8 replicas); host backend only\n"
    "  --units U       --deterministic with U units, a multiple of every replica count used,\n"
    "                  at most 4096\n"
    "  --row-order     train bit for bit the same whatever --replicas, without units: every\n"
    "                  product on lockstep's chain GEMM and every sum over rows in row order\n"
    "                  (0.73-0.92 of the default mode's speed); host backend, --model mlp only\n"
    "                  (not yet convolutions or a per-replica BatchNormalization)\n"
    "  --save PATH     write the trained weights, state and optimizer slots to PATH (a\n"
    "                  lockstep checkpoint: safetensors); a PATH that cannot be written is an\n"
    "                  error before training starts\n"
    "Exit status: 0 done, 1 the results could not be written, 2 an error (the message says which).\n";

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      f.help = true;
      return f;
    }
    if (flag == "--log-placement") {
      f.log_placement = true;
      continue;
    }
    if (flag == "--deterministic") {
      if (f.units == 0) f.units = 24;
      continue;
    }
    if (flag == "--row-order") {
      f.row_order = true;
      continue;
    }
    lockstep::require(flag.rfind("--", 0) == 0 && (flag == "--replicas" || flag == "--epochs" ||
                                                   flag == "--batch-size" || flag == "--data" || flag == "--seed" ||
                                                   flag == "--strategy" || flag == "--backend" ||
                                                   flag == "--collective" || flag == "--model" ||
                                                   flag == "--profile" || flag == "--tensorboard" ||
                                                   flag == "--timeout" || flag == "--backup-dir" ||
                                                   flag == "--units" || flag == "--save"),
                      "unknown flag '", flag,
                      "'; expected one of --backend --strategy --replicas --collective --epochs --batch-size --data "
                      "--seed --model --log-placement --profile --tensorboard --timeout --backup-dir "
                      "--deterministic --units --row-order --save");
    lockstep::require(i + 1 < argc, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--replicas") {
      f.replicas = lockstep::parse_integer(flag, value, 1, kMaxReplicas);
      f.replicas_given = true;
    }
    if (flag == "--backend") {
      lockstep::require(value == "host" || value == "cuda", "--backend: '", value, "', expected host or cuda");
      f.backend = value;
    }
    if (flag == "--collective") {
      lockstep::require(value == "nccl" || value == "hierarchical" || value == "one_device", "--collective: '", value,
                        "', expected nccl, hierarchical or one_device");
      f.collective = value;
    }
    if (flag == "--model") {
      lockstep::require(value == "mlp" || value == "mlp_bn_dropout" || value == "cnn" || value == "cnn_bn",
                        "--model: '", value, "', expected mlp, mlp_bn_dropout, cnn or cnn_bn");
      f.model = value;
    }
    if (flag == "--epochs") f.epochs = lockstep::parse_integer(flag, value, 0, kMaxEpochs);
    if (flag == "--batch-size") f.batch_size = lockstep::parse_integer<std::size_t>(flag, value, 1, kMaxBatchSize);
    if (flag == "--timeout") f.timeout_seconds = lockstep::parse_number(flag, value, 0, kMaxTimeoutSeconds, true);
    if (flag == "--backup-dir") {
      lockstep::require(!value.empty(), "--backup-dir: an empty path, expected a folder");
      f.backup_dir = value;
    }
    if (flag == "--units") f.units = lockstep::parse_integer(flag, value, 1, lockstep::detail::kMaxUnits);
    if (flag == "--save") {
      lockstep::require(!value.empty(), "--save: an empty path, expected a file to write");
      f.save_path = value;
    }
    if (flag == "--data") f.data = value;
    if (flag == "--profile") f.profile_dir = value;
    if (flag == "--tensorboard") f.tensorboard_dir = value;
    if (flag == "--seed")
      f.seed = lockstep::parse_integer<std::uint64_t>(flag, value, 0, std::numeric_limits<std::uint64_t>::max());
    if (flag == "--strategy") {
      lockstep::require(value == "mirrored" || value == "central" || value == "multiworker", "--strategy: '", value,
                        "', expected mirrored, central or multiworker");
      f.strategy = value;
    }
  }
  return f;
}

// Which backend runs when --backend is not given: cuda where this build has
// it and a GPU is visible.
[[maybe_unused]] bool backend_given(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--backend") return true;
  return false;
}

// The example's optional callbacks, --backup-dir, --profile and --tensorboard,
// as one callback object: fit takes a fixed list of callbacks, and each may be off.
struct Observers {
  std::optional<lockstep::BackupAndRestore> backup;
  std::optional<lockstep::ProfileBatches> profile;
  std::optional<lockstep::TensorBoard> tensorboard;

  explicit Observers(const Flags& flags) {
    if (!flags.backup_dir.empty()) backup.emplace(flags.backup_dir);
    if (!flags.profile_dir.empty()) profile.emplace(flags.profile_dir, 10, 20);
    if (!flags.tensorboard_dir.empty()) tensorboard.emplace(flags.tensorboard_dir);
  }
  template <class View>
  void on_train_begin(const lockstep::TrainInfo& info, View& view) {
    if (backup) {  // first: where it resumes, the others start from the restored run
      backup->on_train_begin(info, view);
      if (backup->restored() && view.process_rank() == 0)
        std::printf("BackupAndRestore: resumed at epoch %d step %zu from %s\n", backup->restored_from().epoch + 1,
                    backup->restored_from().step, backup->path().c_str());
    }
    if (profile) profile->on_train_begin(info, view);
    if (tensorboard) tensorboard->on_train_begin(info, view);
  }
  void on_batch_begin(std::size_t step) {
    if (profile) profile->on_batch_begin(step);
    if (tensorboard) tensorboard->on_batch_begin(step);
  }
  template <class View>
  void on_batch_end(std::size_t step, const lockstep::Logs& logs, View& view) {
    if (profile) profile->on_batch_end(step, logs);
    if (tensorboard) tensorboard->on_batch_end(step, logs, view);
    if (backup) backup->on_batch_end(step, logs, view);
  }
  template <class View>
  void on_epoch_end(int epoch, const lockstep::Logs& logs, View& view) {
    if (tensorboard) tensorboard->on_epoch_end(epoch, logs, view);
    if (backup) backup->on_epoch_end(epoch, logs, view);
  }
  template <class View>
  void on_train_end(const lockstep::Logs& logs, View& view) {
    if (profile) profile->on_train_end(logs);
    if (tensorboard) tensorboard->on_train_end(logs);
    if (backup) backup->on_train_end(logs, view);
  }
};

}  // namespace

// Trains and evaluates one model with one strategy; every strategy runs the same code.
template <class Model, class Strategy>
int train_model(const Flags& flags, Strategy strategy) {
  // example-begin fashion_mnist
  using namespace lockstep;

  const Dataset train = load_fashion_mnist(flags.data, "train");
  const Dataset test = load_fashion_mnist(flags.data, "test");

  Model model{flags.seed};
  Trainer<Strategy, Adam> trainer{strategy, Adam{1e-3}};
  if (!flags.save_path.empty()) check_can_save(trainer, flags.save_path);  // --save: an Error now, not after fit
  FitOptions options;
  options.epochs = flags.epochs;
  options.batch_size = flags.batch_size;
  options.seed = flags.seed;
  Observers observers(flags);  // --profile, --tensorboard
  const auto start = std::chrono::steady_clock::now();
  trainer.fit(model, train, options, observers);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const Logs result = trainer.evaluate(model, test);
  // example-end fashion_mnist
  if (!flags.save_path.empty()) save_checkpoint(trainer, model, flags.save_path);  // --save
  if (trainer.process_rank() == 0) {
    // What this process ran: all epochs, less what came before the backup it resumed from.
    const double per_epoch = static_cast<double>((train.size() + flags.batch_size - 1) / flags.batch_size);
    double steps = static_cast<double>(flags.epochs) * per_epoch;
    double samples = static_cast<double>(flags.epochs) * static_cast<double>(train.size());
    if (observers.backup && observers.backup->restored()) {
      const lockstep::RunState& from = observers.backup->restored_from();
      steps -= from.epoch * per_epoch + static_cast<double>(from.step);
      samples -= from.epoch * static_cast<double>(train.size()) + static_cast<double>(from.step * flags.batch_size);
    }
    // The strategy's replicas of every process (in the deterministic mode the
    // trainer's replicas are its units).
    const int replicas =
        flags.units ? strategy.replicas() * trainer.executor().group().process_count() : trainer.global_replicas();
    std::printf("backend=%s replicas=%d units=%d fit_seconds=%.3f samples_per_s=%.0f step_ms=%.4f\n",
                Strategy::backend::kName, replicas, flags.units, seconds, seconds > 0 ? samples / seconds : 0.0,
                steps > 0 ? 1e3 * seconds / steps : 0.0);
    std::printf("test_accuracy=%.4f test_loss=%.4f\n", result["accuracy"], result["loss"]);
  }
  return 0;
}

// The example trains every strategy wrapped in Profiled<...>, so that
// --profile can record its steps (with the profiler stopped, a profiled
// step costs one test per layer).
template <class Plain>
int train(const Flags& flags, Plain plain) {
  using namespace lockstep;
  using Strategy = Profiled<Plain>;
  Strategy strategy{plain};
  strategy.set_communication(CommunicationOptions{flags.timeout_seconds});  // --timeout
  strategy.set_deterministic(Deterministic{flags.units});                    // --deterministic, --units
  if (flags.row_order) {                                                     // --row-order
    require(flags.units == 0, "--row-order and --deterministic (or --units) are two deterministic schemes; give one");
    strategy.set_deterministic(Deterministic::in_row_order());
  }
  log_device_placement(flags.log_placement);
  if (flags.model == "cnn" || flags.model == "cnn_bn") {
    // Only where the backend has convolutions (the CUDA backend needs cuDNN for them).
    using Context = typename Trainer<Strategy, Adam>::executor_type::context_type;
    if constexpr (supports_conv2d_v<Context>)
      return flags.model == "cnn" ? train_model<fashion_mnist::Cnn>(flags, strategy)
                                  : train_model<fashion_mnist::CnnBn>(flags, strategy);
    else
      fail("--model ", flags.model, ": the ", Strategy::backend::kName,
           " backend of this build has no convolutions; use --backend host");
  }
  if (flags.model == "mlp_bn_dropout") return train_model<fashion_mnist::MlpBnDropout>(flags, strategy);
  return train_model<fashion_mnist::Mlp>(flags, strategy);
}

// Builds the strategy the flags name and trains with it.
int run(Flags flags, [[maybe_unused]] int argc, [[maybe_unused]] char** argv) {
  using namespace lockstep;
#if defined(LOCKSTEP_HAVE_CUDA)
  if (!backend_given(argc, argv) && gpu::visible_devices() > 0) flags.backend = "cuda";
  if (flags.backend == "cuda") {
    if (flags.strategy == "multiworker") {
#if defined(LOCKSTEP_HAVE_MPI)
      return train(flags, MultiWorkerMirroredPolicy<NcclAllReduce>{flags.replicas_given ? flags.replicas : 1});
#else
      fail("--strategy multiworker: this build has no MPI; install libopenmpi-dev and rebuild");
#endif
    }
    // Every visible GPU unless --replicas names how many.
    const int gpus = flags.replicas_given ? flags.replicas : 0;
    auto on = [&](auto policy) { return train(flags, policy); };
    if (flags.strategy == "central")  // the variables on the first GPU
      return on(gpus ? CudaCentralStoragePolicy{gpus} : CudaCentralStoragePolicy{});
    if (flags.collective == "hierarchical")
      return on(gpus ? MirroredPolicy<HierarchicalCopyAllReduce>{gpus} : MirroredPolicy<HierarchicalCopyAllReduce>{});
    if (flags.collective == "one_device")
      return on(gpus ? MirroredPolicy<ReductionToOneDevice<>>{gpus} : MirroredPolicy<ReductionToOneDevice<>>{});
    return on(gpus ? MirroredPolicy<NcclAllReduce>{gpus} : MirroredPolicy<NcclAllReduce>{});
  }
#else
  require(flags.backend == "host", "--backend cuda: this build has no CUDA backend; build the cuda preset "
                                   "(cmake --preset cuda) and run build/cuda/examples/fashion_mnist_cuda");
#endif
  if (flags.strategy == "central") return train(flags, CentralStoragePolicy{flags.replicas});
  if (flags.strategy == "multiworker") {
#if defined(LOCKSTEP_HAVE_MPI)
    return train(flags, MultiWorkerMirroredPolicy<MpiAllReduce>{flags.replicas});
#else
    fail("--strategy multiworker: this build has no MPI; install libopenmpi-dev and rebuild");
#endif
  }
  return train(flags, MirroredPolicy<HostAllReduce>{flags.replicas});
}

int main(int argc, char** argv) {
  Flags flags;
  try {
    flags = parse(argc, argv);
  } catch (const lockstep::Error& e) {  // a flag: the message, then how to write them
    std::cerr << e.what() << '\n' << kUsage;
    return 2;
  }
  if (flags.help) {
    std::cout << kUsage;
    return lockstep::finish_output("fashion_mnist", 0);
  }
  int status = 0;
  try {
    status = run(flags, argc, argv);
  } catch (const lockstep::Error& e) {  // data, memory, training: the message alone says what to change
    std::cerr << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {  // anything else, still as a message rather than an abort
    std::cerr << "fashion_mnist: " << e.what() << '\n';
    return 2;
  }
  return lockstep::finish_output("fashion_mnist", status);
}
