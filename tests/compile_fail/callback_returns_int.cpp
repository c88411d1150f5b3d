// Must not compile: a hook that returns something other than void (or bool for on_epoch_end).
#include <lockstep/lockstep.hpp>
struct Counter {
  int on_batch_end(std::size_t, const lockstep::Logs&) { return 1; }
};
void train(lockstep::Sequential<lockstep::Input<2>, lockstep::Dense<2>>& model, const lockstep::Dataset& data) {
  lockstep::Trainer<lockstep::OneDevicePolicy, lockstep::Adam> trainer;
  trainer.fit(model, data, lockstep::FitOptions{}, Counter{});
}
