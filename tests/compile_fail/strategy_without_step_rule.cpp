// Must not compile: a strategy says how its step combines gradients with a StepRule.
#include <lockstep/lockstep.hpp>
struct MyPolicy {
  using collective = lockstep::HostAllReduce;
  using backend = lockstep::Host;
  static constexpr const char* kName = "MyPolicy";
  int replicas() const { return 2; }
};
lockstep::Trainer<MyPolicy, lockstep::Adam> trainer;
