// The CUDA executor: GPU training equals host training, N GPU replicas equal
// one, a step replayed from a CUDA graph equals the same step enqueued
// directly, and bad device lists are errors that say what is visible.
#include <doctest/doctest.h>

#include "lockstep/cuda.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;

// 18 samples at batch 8: steps of 8, 8 and 2 samples (a short last batch,
// which runs outside the graph).
const Dataset& data() {
  static const Dataset d = testing::argmax_dataset(18, 6, 3, 1);
  return d;
}
FitOptions three_steps() {
  FitOptions options;
  options.batch_size = 8;
  options.epochs = 1;
  options.verbose = false;
  return options;
}

template <class Strategy, class Optimizer = Adam>
std::vector<float> train(Strategy strategy, bool graphs, FitOptions options = three_steps(), Optimizer opt = Adam{0.01}) {
  Model model{11};
  Trainer<Strategy, Optimizer> trainer{strategy, opt};
  if constexpr (std::is_same_v<typename Strategy::backend, Cuda>) trainer.executor().options().graphs = graphs;
  trainer.fit(model, data(), options);
  return model.parameters();
}

std::vector<float> host_reference(int replicas = 1) {
  return train(MirroredPolicy<HostAllReduce>{replicas}, false);
}
}  // namespace

TEST_CASE("one GPU replica equals one host replica after 3 steps (max abs difference <= 1e-4)") {
  const auto host = host_reference();
  CHECK(host != Model{11}.parameters());
  CHECK(testing::max_abs_difference(host, train(MirroredPolicy<NcclAllReduce>{1}, false)) <= 1e-4);
}

TEST_CASE("NCCL over every visible GPU equals one replica after 3 steps (max abs difference <= 1e-4)") {
  const int gpus = lockstep::gpu::visible_devices();
  CAPTURE(gpus);
  const auto one = train(MirroredPolicy<NcclAllReduce>{1}, false);
  CHECK(testing::max_abs_difference(one, train(MirroredPolicy<NcclAllReduce>{}, true)) <= 1e-4);
  CHECK(testing::max_abs_difference(one, host_reference(gpus)) <= 1e-4);
}

TEST_CASE("2 and 3 replicas on one GPU (copy-based collectives) equal one replica (<= 1e-4)") {
  const auto one = host_reference();
  for (int n : {2, 3}) {
    CAPTURE(n);
    const std::vector<int> devices(static_cast<std::size_t>(n), 0);
    CHECK(testing::max_abs_difference(one, train(MirroredPolicy<HierarchicalCopyAllReduce>{devices}, true)) <= 1e-4);
    CHECK(testing::max_abs_difference(one, train(MirroredPolicy<ReductionToOneDevice<>>{devices}, true)) <= 1e-4);
  }
}

TEST_CASE("NCCL reports the same loss as one replica when the last layer has no parameters") {
  // After a trailing activation the last Dense's gradient also ends at
  // kParams: the step's sums must still be all-reduced once, not twice.
  using Tail = Sequential<Input<6>, Dense<5, Relu>, Dense<3>, Relu>;
  const auto loss = [](MirroredPolicy<NcclAllReduce> strategy) {
    Tail model{11};
    Trainer<MirroredPolicy<NcclAllReduce>, Adam> trainer{strategy, Adam{0.01}};
    return trainer.fit(model, data(), three_steps())["loss"].back();
  };
  CHECK(loss(MirroredPolicy<NcclAllReduce>{}) == doctest::Approx(loss(MirroredPolicy<NcclAllReduce>{1})).epsilon(1e-4));
}

TEST_CASE("a second fit on the same model runs its first step eagerly, then replays again") {
  // The second fit repeats the first one's last shape; with momentum switched
  // on in between, its first step allocates Sgd's velocity, which a capture
  // could not do.
  Model model{11};
  Trainer<MirroredPolicy<NcclAllReduce>, Sgd> trainer{MirroredPolicy<NcclAllReduce>{1}, Sgd{0.1}};
  FitOptions options = three_steps();
  options.batch_size = 9;  // 18 samples: two equal steps, so the fit ends on the shape it captured
  trainer.fit(model, data(), options);
  trainer.optimizer().momentum = 0.9f;
  Model eager_model = model;
  Trainer<MirroredPolicy<NcclAllReduce>, Sgd> eager{MirroredPolicy<NcclAllReduce>{1}, trainer.optimizer()};
  eager.executor().options().graphs = false;
  trainer.fit(model, data(), options);
  eager.fit(eager_model, data(), options);
  CHECK(model.parameters() == eager_model.parameters());
}

TEST_CASE("a step replayed from a CUDA graph equals the step enqueued directly - bit for bit") {
  FitOptions options = three_steps();
  options.epochs = 3;  // 9 steps: 6 of them full batches, most replayed from the graph
  const auto eager = train(MirroredPolicy<NcclAllReduce>{1}, false, options);
  const auto graph = train(MirroredPolicy<NcclAllReduce>{1}, true, options);
  CHECK(eager == graph);
  const Sgd sgd(0.1, 0.9, true);
  CHECK(train(MirroredPolicy<NcclAllReduce>{1}, false, options, sgd) ==
        train(MirroredPolicy<NcclAllReduce>{1}, true, options, sgd));
}

TEST_CASE("evaluate and predict on the GPU equal the host's") {
  Model model{4};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> host{MirroredPolicy<HostAllReduce>{1}};
  Trainer<MirroredPolicy<NcclAllReduce>, Adam> gpu{MirroredPolicy<NcclAllReduce>{1}};
  const Logs h = host.evaluate(model, data(), 5), g = gpu.evaluate(model, data(), 5);
  CHECK(g.value(0) == doctest::Approx(h.value(0)).epsilon(1e-5));
  CHECK(g.value(1) == doctest::Approx(h.value(1)).epsilon(1e-6));
  CHECK(testing::max_abs_difference(host.predict(model, data(), 7), gpu.predict(model, data(), 7)) <= 1e-5);
}

TEST_CASE("a device that does not exist is an error naming how many are visible") {
  const int gpus = lockstep::gpu::visible_devices();
  using T = Trainer<MirroredPolicy<NcclAllReduce>, Adam>;
  CHECK_THROWS_WITH_AS(T{MirroredPolicy<NcclAllReduce>{std::vector<int>{gpus}}}, doctest::Contains("does not exist"),
                       Error);
}

TEST_CASE("CudaCentralStoragePolicy equals MirroredPolicy on the same data (<= 1e-4)") {
  for (int n : {1, 3}) {
    CAPTURE(n);
    const std::vector<int> devices(static_cast<std::size_t>(n), 0);  // replicas may share the central GPU
    const auto central = train(CudaCentralStoragePolicy{devices}, true);
    CHECK(central != Model{11}.parameters());
    CHECK(testing::max_abs_difference(host_reference(n), central) <= 1e-4);
  }
}

TEST_CASE("MeanSquaredError regression on the GPU equals the host (<= 1e-4), with no metrics") {
  const RegressionDataset data = testing::half_difference_dataset(96);
  using Linear1 = Sequential<Input<2>, Dense<4, Tanh>, Dense<1>>;
  BasicFitOptions<float> options;
  options.epochs = 2;
  options.batch_size = 40;  // a short last batch of 16
  options.verbose = false;
  Linear1 on_host{3}, on_gpu{3};
  Trainer<MirroredPolicy<HostAllReduce>, Adam, MeanSquaredError, Metrics<>> host{MirroredPolicy<HostAllReduce>{1}};
  Trainer<MirroredPolicy<NcclAllReduce>, Adam, MeanSquaredError, Metrics<>> gpu{MirroredPolicy<NcclAllReduce>{1}};
  const History h = host.fit(on_host, data, options), g = gpu.fit(on_gpu, data, options);
  CHECK(testing::max_abs_difference(on_host.parameters(), on_gpu.parameters()) <= 1e-4);
  CHECK(g["loss"].back() == doctest::Approx(h["loss"].back()).epsilon(1e-4));
}

TEST_CASE("predict with a softmax layer and activation layers on the GPU equals the host's (<= 1e-5)") {
  using Deep = Sequential<Input<6>, Dense<8>, Sigmoid, Dense<5, Tanh>, Relu, Dense<3>>;
  using WithSoftmax = Deep::with_softmax;
  const Deep model{2};
  const WithSoftmax probabilities{model.parameters()};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> host{MirroredPolicy<HostAllReduce>{1}};
  Trainer<MirroredPolicy<NcclAllReduce>, Adam> gpu{MirroredPolicy<NcclAllReduce>{1}};
  CHECK(testing::max_abs_difference(host.predict(probabilities, data(), 7), gpu.predict(probabilities, data(), 7)) <=
        1e-5);
  // Training through the activation layers' backward, too.
  Deep a{2}, b{2};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> train_host{MirroredPolicy<HostAllReduce>{1}, Adam{0.01}};
  Trainer<MirroredPolicy<NcclAllReduce>, Adam> train_gpu{MirroredPolicy<NcclAllReduce>{1}, Adam{0.01}};
  train_host.fit(a, data(), three_steps());
  train_gpu.fit(b, data(), three_steps());
  CHECK(testing::max_abs_difference(a.parameters(), b.parameters()) <= 1e-4);
}

namespace {
// Changes the learning rate at the start of epoch 1 through the fit's view.
struct LowerLearningRate {
  template <class View>
  void on_epoch_begin(int epoch, const TrainInfo&, View& view) {
    if (epoch == 1) view.optimizer().learning_rate = 0.001f;
  }
};
}  // namespace

TEST_CASE("a learning rate changed by a callback is used by the next replayed step (graphs on equal graphs off)") {
  FitOptions options = three_steps();
  options.epochs = 3;
  options.shuffle = false;
  const auto run = [&](bool graphs) {
    Model model{11};
    Trainer<MirroredPolicy<NcclAllReduce>, Adam> trainer{MirroredPolicy<NcclAllReduce>{1}, Adam{0.01}};
    trainer.executor().options().graphs = graphs;
    trainer.fit(model, data(), options, LowerLearningRate{});
    return model.parameters();
  };
  const auto host = [&] {
    Model model{11};
    Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{1}, Adam{0.01}};
    trainer.fit(model, data(), options, LowerLearningRate{});
    return model.parameters();
  }();
  CHECK(run(true) == run(false));
  CHECK(testing::max_abs_difference(host, run(true)) <= 1e-4);
}

TEST_CASE("BatchNormalization (both variants) and Dropout on the GPU train as on the host (<= 1e-4)") {
  using Norm = Sequential<Input<6>, Dense<8>, BatchNormalization<>, Relu, Dropout<25>, Dense<3>>;
  using SyncNorm = Sequential<Input<6>, Dense<8>, SyncBatchNormalization, Relu, Dropout<25>, Dense<3>>;
  const auto compare = [](auto model_type, auto gpu_strategy, int host_replicas) {
    using M = decltype(model_type);
    using S = decltype(gpu_strategy);
    FitOptions options = three_steps();
    options.epochs = 2;
    M on_host{5}, on_gpu{5};
    Trainer<MirroredPolicy<HostAllReduce>, Adam> host{MirroredPolicy<HostAllReduce>{host_replicas}, Adam{0.01}};
    Trainer<S, Adam> gpu{gpu_strategy, Adam{0.01}};
    host.fit(on_host, data(), options);
    gpu.fit(on_gpu, data(), options);
    CHECK(on_gpu.parameters() != M{5}.parameters());
    CHECK(testing::max_abs_difference(on_host.parameters(), on_gpu.parameters()) <= 1e-4);
    CHECK(testing::max_abs_difference(on_host.state(), on_gpu.state()) <= 1e-4);
  };
  compare(Norm{}, MirroredPolicy<NcclAllReduce>{1}, 1);
  compare(SyncNorm{}, MirroredPolicy<NcclAllReduce>{1}, 1);
  // Several replicas sharing one GPU (copy collectives): the synchronised
  // statistics are the global batch's, as on one host replica.
  compare(SyncNorm{}, MirroredPolicy<HierarchicalCopyAllReduce>{std::vector<int>{0, 0}}, 1);
  compare(Norm{}, MirroredPolicy<ReductionToOneDevice<>>{std::vector<int>{0, 0, 0}}, 3);
}
