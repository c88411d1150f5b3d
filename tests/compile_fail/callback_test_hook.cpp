// Must not compile: a Keras hook lockstep never calls.
#include <lockstep/lockstep.hpp>
struct Tester {
  void on_test_batch_end(std::size_t, const lockstep::Logs&) {}
};
void train(lockstep::Sequential<lockstep::Input<2>, lockstep::Dense<2>>& model, const lockstep::Dataset& data) {
  lockstep::Trainer<lockstep::OneDevicePolicy, lockstep::Adam> trainer;
  trainer.fit(model, data, lockstep::FitOptions{}, Tester{});
}
