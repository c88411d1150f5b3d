// Must not compile: LearningRateScheduler would set a learning rate that the
// Scheduled optimizer inside ClipNorm overwrites from its schedule.
#include <lockstep/lockstep.hpp>
using namespace lockstep;
using Opt = ClipNorm<Scheduled<Adam, CosineDecay>>;
void train(Sequential<Input<4>, Dense<3>>& model, const Dataset& data) {
  Trainer<MirroredPolicy<HostAllReduce>, Opt> trainer{MirroredPolicy<HostAllReduce>{2},
                                                      Opt{Scheduled<Adam, CosineDecay>{Adam{}, CosineDecay{1e-3, 100}}, 1}};
  trainer.fit(model, data, FitOptions{}, LearningRateScheduler{[](int, double lr) { return lr; }});
}
