// Must not compile: Accuracy needs class indices, MeanSquaredError gives float targets.
#include <lockstep/lockstep.hpp>
lockstep::Trainer<lockstep::OneDevicePolicy, lockstep::Adam, lockstep::MeanSquaredError> trainer;
