// Trains a tiny model through the installed headers: the package is usable.
#include <lockstep/lockstep.hpp>

int main() {
  using namespace lockstep;
  std::vector<float> x = {0, 0, 0, 1, 1, 0, 1, 1};
  std::vector<std::int32_t> y = {0, 0, 1, 1};  // the first feature
  const Dataset data(x, 2, y);
  Sequential<Input<2>, Dense<8, Relu>, Dense<2>> model{0};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}, Adam{0.05}};
  FitOptions options;
  options.epochs = 300;
  options.batch_size = 4;
  options.verbose = false;
  trainer.fit(model, data, options);
  return trainer.evaluate(model, data)["accuracy"] == 1.0 ? 0 : 1;
}
