// Must not compile: FitOptions (class labels) given to a regression trainer.
#include <lockstep/lockstep.hpp>
void train(lockstep::Sequential<lockstep::Input<2>, lockstep::Dense<1>>& model, const lockstep::RegressionDataset& data) {
  lockstep::Trainer<lockstep::OneDevicePolicy, lockstep::Adam, lockstep::MeanSquaredError, lockstep::Metrics<>> trainer;
  trainer.fit(model, data, lockstep::FitOptions{});
}
