// Must not compile: a model ending in Softmax trained with the from-logits cross-entropy.
#include <lockstep/lockstep.hpp>
void train(lockstep::Sequential<lockstep::Input<2>, lockstep::Dense<3>, lockstep::Softmax>& model,
           const lockstep::Dataset& data) {
  lockstep::Trainer<lockstep::OneDevicePolicy, lockstep::Adam> trainer;
  trainer.fit(model, data, lockstep::FitOptions{});
}
