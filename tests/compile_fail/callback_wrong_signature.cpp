// Must not compile: a hook whose parameters match none of its signatures (Logs& for const Logs&).
#include <lockstep/lockstep.hpp>
struct Saver {
  void on_epoch_end(int, lockstep::Logs&) {}
};
void train(lockstep::Sequential<lockstep::Input<2>, lockstep::Dense<2>>& model, const lockstep::Dataset& data) {
  lockstep::Trainer<lockstep::OneDevicePolicy, lockstep::Adam> trainer;
  trainer.fit(model, data, lockstep::FitOptions{}, Saver{});
}
