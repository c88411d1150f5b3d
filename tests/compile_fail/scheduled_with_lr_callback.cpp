// Must not compile: ReduceLROnPlateau would set a learning rate that the
// Scheduled optimizer overwrites from its schedule at the next step.
#include <lockstep/lockstep.hpp>
using namespace lockstep;
using Opt = Scheduled<Adam, CosineDecay>;
void train(Sequential<Input<4>, Dense<3>>& model, const Dataset& data) {
  Trainer<MirroredPolicy<HostAllReduce>, Opt> trainer{MirroredPolicy<HostAllReduce>{2},
                                                      Opt{Adam{}, CosineDecay{1e-3, 100}}};
  trainer.fit(model, data, FitOptions{}, ReduceLROnPlateau{});
}
