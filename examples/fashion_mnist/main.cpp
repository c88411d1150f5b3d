// Trains the model of TensorFlow's MirroredStrategy guide (Dense 256 relu,
// Dense 10, Adam, sparse categorical cross-entropy) on Fashion-MNIST with
// MirroredPolicy<HostAllReduce>, and prints the test accuracy last.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <lockstep/lockstep.hpp>
#if defined(LOCKSTEP_HAVE_MPI)
#include <lockstep/mpi.hpp>
#endif

namespace {

struct Flags {
  int replicas = 2;
  int epochs = 10;
  std::size_t batch_size = 128;
  std::string data = lockstep::kDebianFashionMnistDir;
  std::uint64_t seed = 0;
  std::string strategy = "mirrored";
};

const char* kUsage =
    "usage: fashion_mnist [--strategy mirrored|central|multiworker] [--replicas N] [--epochs E]\n"
    "                     [--batch-size B] [--data DIR] [--seed S]\n"
    "  --strategy S    mirrored (default), central (CentralStoragePolicy) or multiworker\n"
    "                  (MultiWorkerMirroredPolicy<MpiAllReduce>: start with mpirun -np P)\n"
    "  --replicas N    host replicas (threads) per process, default 2\n"
    "  --epochs E      default 10\n"
    "  --batch-size B  global batch, split over the replicas, default 128\n"
    "  --data DIR      Fashion-MNIST IDX files (.gz or plain), default /usr/share/datasets/fashion-mnist\n"
    "  --seed S        seed of the initial weights and of the shuffle, default 0\n";

long long parse_integer(const std::string& flag, const std::string& text, long long min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  lockstep::require(!text.empty() && *end == '\0' && v >= min, flag, ": '", text, "' is not an integer >= ", min);
  return v;
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    lockstep::require(flag.rfind("--", 0) == 0 && (flag == "--replicas" || flag == "--epochs" ||
                                                   flag == "--batch-size" || flag == "--data" || flag == "--seed" ||
                                                   flag == "--strategy"),
                      "unknown flag '", flag,
                      "'; expected one of --strategy --replicas --epochs --batch-size --data --seed");
    lockstep::require(i + 1 < argc, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--replicas") f.replicas = static_cast<int>(parse_integer(flag, value, 1));
    if (flag == "--epochs") f.epochs = static_cast<int>(parse_integer(flag, value, 0));
    if (flag == "--batch-size") f.batch_size = static_cast<std::size_t>(parse_integer(flag, value, 1));
    if (flag == "--data") f.data = value;
    if (flag == "--seed") f.seed = static_cast<std::uint64_t>(parse_integer(flag, value, 0));
    if (flag == "--strategy") {
      lockstep::require(value == "mirrored" || value == "central" || value == "multiworker", "--strategy: '", value,
                        "', expected mirrored, central or multiworker");
      f.strategy = value;
    }
  }
  return f;
}

}  // namespace

// Trains and evaluates with one strategy; every strategy runs the same code.
template <class Strategy>
int train(const Flags& flags, Strategy strategy) {
  // example-begin fashion_mnist
  using namespace lockstep;
  using Model = Sequential<Input<784>, Dense<256, Relu>, Dense<10>>;

  const Dataset train = load_fashion_mnist(flags.data, "train");
  const Dataset test = load_fashion_mnist(flags.data, "test");

  Model model{flags.seed};
  Trainer<Strategy, Adam> trainer{strategy, Adam{1e-3}};
  FitOptions options;
  options.epochs = flags.epochs;
  options.batch_size = flags.batch_size;
  options.seed = flags.seed;
  trainer.fit(model, train, options);

  const Logs result = trainer.evaluate(model, test);
  // example-end fashion_mnist
  if (trainer.process_rank() == 0)
    std::printf("test_accuracy=%.4f test_loss=%.4f\n", result["accuracy"], result["loss"]);
  return 0;
}

int main(int argc, char** argv) {
  try {
    const Flags flags = parse(argc, argv);
    using namespace lockstep;
    if (flags.strategy == "central") return train(flags, CentralStoragePolicy{flags.replicas});
    if (flags.strategy == "multiworker") {
#if defined(LOCKSTEP_HAVE_MPI)
      return train(flags, MultiWorkerMirroredPolicy<MpiAllReduce>{flags.replicas});
#else
      fail("--strategy multiworker: this build has no MPI; install libopenmpi-dev and rebuild");
#endif
    }
    return train(flags, MirroredPolicy<HostAllReduce>{flags.replicas});
  } catch (const lockstep::Error& e) {
    std::cerr << e.what() << '\n' << kUsage;
    return 2;
  }
}
