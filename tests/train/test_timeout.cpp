// Collective timeouts on host replicas: a replica that stalls makes fit throw
// an Error within the timeout, naming the collective, the step and the
// replica that did not arrive; the trainer then trains normally. The
// strategies hold the option and check it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "train/test_helpers.hpp"

namespace {
std::atomic<bool> stall_now{false};

// Relu that sleeps 2.5 s on every replica but replica 0 (whose slice starts
// at row 0) while stall_now is set: a stand-in for a hung replica.
struct StallingRelu {
  template <class In>
  struct Bind : lockstep::ActivationLayer<lockstep::Relu>::Bind<In> {
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P& pass, lockstep::Slots<T> s, const T* x, T* y, int rows) {
      if (stall_now.load() && pass.first_row > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      lockstep::ActivationLayer<lockstep::Relu>::Bind<In>::forward(ctx, pass, s, x, y, rows);
    }
  };
};

struct StallAtStep {
  std::size_t step;
  void on_batch_end(std::size_t at, const lockstep::Logs&) {
    if (at + 1 == step) stall_now = true;
  }
};

// What a fit whose replicas stall from step `step` on ended with: the Error's
// message (empty if none) and how long it took.
struct Stalled {
  std::string message;
  double seconds = 0;
};
template <class Trainer, class Model>
Stalled fit_stalling_at(Trainer& trainer, Model& model, const lockstep::Dataset& data, std::size_t step) {
  stall_now = false;
  const auto start = std::chrono::steady_clock::now();
  Stalled out;
  try {
    trainer.fit(model, data, lockstep::testing::quiet_fit(32, 1), StallAtStep{step});
  } catch (const lockstep::Error& e) {
    out.message = e.what();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stall_now = false;
  MESSAGE("fit threw after ", out.seconds, " s: ", out.message);
  return out;
}
}  // namespace

TEST_CASE("a stalled replica makes fit throw within the timeout naming it and the trainer trains on afterwards") {
  using namespace lockstep;
  using Strategy = MirroredPolicy<HostAllReduce>;
  const Dataset data = testing::argmax_dataset(512, 8, 3, 1);
  Sequential<Input<8>, Dense<16>, StallingRelu, Dense<3>> model{0};
  Strategy strategy{2, CommunicationOptions{1.0}};
  CHECK(strategy.communication().timeout_seconds == 1.0);
  Trainer<Strategy, Adam> trainer{strategy, Adam{1e-2}};
  const auto [message, seconds] = fit_stalling_at(trainer, model, data, 3);
  CHECK(message.find("HostAllReduce") != std::string::npos);
  CHECK(message.find("in step 3 of this fit") != std::string::npos);
  CHECK(message.find("replica 1 (of 2) did not arrive") != std::string::npos);
  CHECK(message.find(" bytes") != std::string::npos);
  CHECK(seconds < 6.0);

  // The collective was made anew: the same trainer trains normally.
  const History history = trainer.fit(model, data, testing::quiet_fit(32, 3));
  CHECK(history.epochs == 3);
  CHECK(history["loss"].back() < history["loss"].front());
  CHECK(std::isfinite(trainer.evaluate(model, data)["loss"]));
}

TEST_CASE("central storage times out the same way") {
  using namespace lockstep;
  const Dataset data = testing::argmax_dataset(256, 8, 3, 1);
  Sequential<Input<8>, Dense<16>, StallingRelu, Dense<3>> model{0};
  CentralStoragePolicy strategy{2};
  strategy.set_communication(CommunicationOptions{0.5});
  Trainer<CentralStoragePolicy, Sgd> trainer{strategy, Sgd{0.1}};
  const std::string message = fit_stalling_at(trainer, model, data, 1).message;
  CHECK(message.find("reduce_to_root") != std::string::npos);
  CHECK(message.find("replica 1 (of 2) did not arrive") != std::string::npos);
  CHECK(trainer.fit(model, data, testing::quiet_fit(32, 1)).epochs == 1);
}

TEST_CASE("the deterministic row order times out the same way, naming the replica, and trains on afterwards") {
  // Replica 0 meets the others at the loss sums, after forward: replica 1,
  // stalled in forward, does not come.
  using namespace lockstep;
  using Strategy = MirroredPolicy<HostAllReduce>;
  const Dataset data = testing::argmax_dataset(256, 8, 3, 1);
  Sequential<Input<8>, Dense<16>, StallingRelu, Dense<3>> model{0};
  Strategy strategy{2, CommunicationOptions{0.5}};
  strategy.set_deterministic(Deterministic::in_row_order());
  Trainer<Strategy, Sgd> trainer{strategy, Sgd{0.1}};
  const auto [message, seconds] = fit_stalling_at(trainer, model, data, 2);
  CHECK(message.find("deterministic row-order mode: a replica waited for the others' rows") != std::string::npos);
  CHECK(message.find("replica 1 (of 2) did not arrive") != std::string::npos);
  CHECK(seconds < 5.0);
  // The table was made anew with the collective.
  const History history = trainer.fit(model, data, testing::quiet_fit(32, 2));
  CHECK(history.epochs == 2);
  CHECK(std::isfinite(history["loss"].back()));
}

TEST_CASE("CommunicationOptions::timeout_seconds must be positive and finite") {
  using namespace lockstep;
  CHECK(MirroredPolicy<HostAllReduce>{2}.communication().timeout_seconds == 300.0);
  CHECK(OneDevicePolicy{}.communication().timeout_seconds == 300.0);
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CHECK_THROWS_WITH_AS(MirroredPolicy<HostAllReduce>(2, CommunicationOptions{bad}),
                         doctest::Contains("CommunicationOptions::timeout_seconds"), Error);
    CentralStoragePolicy central{2};
    CHECK_THROWS_AS(central.set_communication(CommunicationOptions{bad}), Error);
  }
}
