// Trains the model of TensorFlow's MirroredStrategy guide (Dense 256 relu,
// Dense 10, Adam, sparse categorical cross-entropy) on Fashion-MNIST with
// MirroredPolicy<HostAllReduce>, and prints the test accuracy last.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <lockstep/lockstep.hpp>

namespace {

struct Flags {
  int replicas = 2;
  int epochs = 10;
  std::size_t batch_size = 128;
  std::string data = lockstep::kDebianFashionMnistDir;
  std::uint64_t seed = 0;
};

const char* kUsage =
    "usage: fashion_mnist [--replicas N] [--epochs E] [--batch-size B] [--data DIR] [--seed S]\n"
    "  --replicas N    host replicas (threads), default 2\n"
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
                                                   flag == "--batch-size" || flag == "--data" || flag == "--seed"),
                      "unknown flag '", flag, "'; expected one of --replicas --epochs --batch-size --data --seed");
    lockstep::require(i + 1 < argc, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--replicas") f.replicas = static_cast<int>(parse_integer(flag, value, 1));
    if (flag == "--epochs") f.epochs = static_cast<int>(parse_integer(flag, value, 0));
    if (flag == "--batch-size") f.batch_size = static_cast<std::size_t>(parse_integer(flag, value, 1));
    if (flag == "--data") f.data = value;
    if (flag == "--seed") f.seed = static_cast<std::uint64_t>(parse_integer(flag, value, 0));
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Flags flags = parse(argc, argv);
    // example-begin fashion_mnist
    using namespace lockstep;
    using Model = Sequential<Input<784>, Dense<256, Relu>, Dense<10>>;
    using Strategy = MirroredPolicy<HostAllReduce>;

    const Dataset train = load_fashion_mnist(flags.data, "train");
    const Dataset test = load_fashion_mnist(flags.data, "test");

    Model model{flags.seed};
    Trainer<Strategy, Adam> trainer{Strategy{flags.replicas}, Adam{1e-3}};
    FitOptions options;
    options.epochs = flags.epochs;
    options.batch_size = flags.batch_size;
    options.seed = flags.seed;
    trainer.fit(model, train, options);

    const Logs result = trainer.evaluate(model, test);
    // example-end fashion_mnist
    std::printf("test_accuracy=%.4f test_loss=%.4f\n", result["accuracy"], result["loss"]);
    return 0;
  } catch (const lockstep::Error& e) {
    std::cerr << e.what() << '\n' << kUsage;
    return 2;
  }
}
