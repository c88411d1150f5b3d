// Synchronous semantics: N replicas on the same global batches give the same
// weights as one replica, including a last batch smaller than N.
#include <doctest/doctest.h>

#include "test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;

template <class Optimizer>
std::vector<float> train_three_steps(int replicas, const Optimizer& opt) {
  // 18 samples at batch 8: steps of 8, 8 and 2 samples; with 3 or 4 replicas
  // the last step leaves some replicas with no rows at all.
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  Model model{11};
  Trainer<MirroredPolicy<HostAllReduce>, Optimizer> trainer{MirroredPolicy<HostAllReduce>{replicas}, opt};
  const FitOptions options = testing::quiet_fit(8, 1);
  const History h = trainer.fit(model, data, options);
  REQUIRE(h["loss"].size() == 1);
  return model.parameters();
}
}  // namespace

TEST_CASE("1 - 2 - 3 and 4 replicas give the same weights after 3 steps (Adam)") {
  const auto one = train_three_steps(1, Adam{0.01});
  CHECK(one != Model{11}.parameters());  // training moved the weights
  for (int n = 2; n <= 4; ++n) {
    CAPTURE(n);
    CHECK(testing::max_abs_difference(one, train_three_steps(n, Adam{0.01})) <= 1e-5);
  }
}

TEST_CASE("1 and 3 replicas give the same weights after 3 steps (Sgd - nesterov)") {
  const Sgd opt(0.1, 0.9, true);
  CHECK(testing::max_abs_difference(train_three_steps(1, opt), train_three_steps(3, opt)) <= 1e-5);
}

TEST_CASE("OneDevicePolicy equals MirroredPolicy with one replica - bit for bit") {
  const Dataset data = testing::argmax_dataset(40, 6, 3, 2);
  const FitOptions options = testing::quiet_fit(16, 2);
  Model a{3}, b{3};
  Trainer<OneDevicePolicy, Adam> one;
  Trainer<MirroredPolicy<HostAllReduce>, Adam> mirrored{MirroredPolicy<HostAllReduce>{1}};
  one.fit(a, data, options);
  mirrored.fit(b, data, options);
  CHECK(a.parameters() == b.parameters());
}

TEST_CASE("CentralStoragePolicy equals MirroredPolicy on the same data") {
  const Dataset data = testing::argmax_dataset(50, 6, 3, 4);
  const FitOptions options = testing::quiet_fit(16, 2);  // a short last batch of 2
  for (int n : {1, 3}) {
    CAPTURE(n);
    Model central{5}, mirrored{5};
    Trainer<CentralStoragePolicy, Adam> a{CentralStoragePolicy{n}, Adam{0.01}};
    Trainer<MirroredPolicy<HostAllReduce>, Adam> b{MirroredPolicy<HostAllReduce>{n}, Adam{0.01}};
    const History ha = a.fit(central, data, options);
    const History hb = b.fit(mirrored, data, options);
    CHECK(central.parameters() != Model{5}.parameters());
    CHECK(testing::max_abs_difference(central.parameters(), mirrored.parameters()) <= 1e-5);
    CHECK(ha["loss"].back() == doctest::Approx(hb["loss"].back()).epsilon(1e-6));
  }
}

TEST_CASE("with two replicas, the sharded update that sums as it reads equals the central update - bit for bit") {
  // MirroredPolicy<HostAllReduce>{2} hands each replica's optimizer the two
  // gradient buffers (host::SumOfTwo); CentralStoragePolicy sums them into
  // one buffer first and updates in one piece. Both compute with one copy of
  // the variables, so every bit must agree.
  const Dataset data = testing::argmax_dataset(50, 6, 3, 4);
  const FitOptions options = testing::quiet_fit(16, 2);
  const auto compare = [&](const auto& opt) {
    using Opt = std::decay_t<decltype(opt)>;
    Model central{5}, sharded{5};
    Trainer<CentralStoragePolicy, Opt> a{CentralStoragePolicy{2}, opt};
    Trainer<MirroredPolicy<HostAllReduce>, Opt> b{MirroredPolicy<HostAllReduce>{2}, opt};
    a.fit(central, data, options);
    b.fit(sharded, data, options);
    CHECK(sharded.parameters() != Model{5}.parameters());
    CHECK(central.parameters() == sharded.parameters());
  };
  SUBCASE("Adam") { compare(Adam{0.01}); }
  SUBCASE("Sgd with Nesterov momentum") { compare(Sgd(0.1, 0.9, true)); }
  SUBCASE("plain Sgd") { compare(Sgd(0.1)); }
}

namespace {
// A user's optimizer whose ranged step takes only `const float*`: the sharded
// update must then have the collective sum into a buffer first.
struct PointerOnlySgd {
  float learning_rate = 0.1f;
  template <class Ctx>
  class State {
   public:
    State(const PointerOnlySgd&, std::size_t) {}
    void prepare(const PointerOnlySgd& opt) { learning_rate_ = opt.learning_rate; }
    void step(Ctx&, float* params, const float* grads, std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i) params[i] -= learning_rate_ * grads[i];
    }

   private:
    float learning_rate_ = 0;
  };
};
}  // namespace

TEST_CASE("an optimizer whose ranged step takes only pointers keeps the sharded update - bit for bit") {
  using Sharded = Trainer<MirroredPolicy<HostAllReduce>, PointerOnlySgd>::executor_type;
  static_assert(Sharded::kShardedUpdate && !Sharded::kSumAsItReads);
  const Dataset data = testing::argmax_dataset(50, 6, 3, 4);
  const FitOptions options = testing::quiet_fit(16, 2);
  Model central{5}, sharded{5};
  Trainer<CentralStoragePolicy, PointerOnlySgd> a{CentralStoragePolicy{2}, PointerOnlySgd{}};
  Trainer<MirroredPolicy<HostAllReduce>, PointerOnlySgd> b{MirroredPolicy<HostAllReduce>{2}, PointerOnlySgd{}};
  a.fit(central, data, options);
  b.fit(sharded, data, options);
  CHECK(sharded.parameters() != Model{5}.parameters());
  CHECK(central.parameters() == sharded.parameters());
}
