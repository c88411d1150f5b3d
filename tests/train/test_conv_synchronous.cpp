// Synchronous semantics with convolutions: a small convnet with synchronised
// BatchNormalization between its convolutions, max pooling and dropout,
// trained by 1, 2 and 3 replicas on the same global batches, ends with the
// same weights and moving statistics (a last batch smaller than the replicas
// included), on the host's default convolution path and, where the build has
// oneDNN, on its primitives too.
#include <doctest/doctest.h>

#include "test_helpers.hpp"

using namespace lockstep;

namespace {
// The convolutions before BatchNormalization have no bias, as is usual in
// Keras: a bias there gets a gradient that is zero but for rounding, which
// Adam would scale up to full steps of noise in either direction.
using ConvNet = Sequential<Input<8, 8, 2>, Conv2D<4, 3, 3, Strides<1, 1>, Same, Linear, false>, SyncBatchNormalization,
                           Relu, MaxPooling2D<2>, Conv2D<6, 3, 3, Strides<2, 2>, Valid, Linear, false>,
                           SyncBatchNormalization, Relu, Conv2D<5, 1, 1, Strides<1, 1>, Valid, Tanh>, Flatten,
                           Dropout<25>, Dense<3>>;

struct Trained {
  std::vector<float> params, state;
};

Trained train(int replicas) {
  // 22 samples at batch 8: steps of 8, 8 and 6; with 3 replicas slices of 3, 3 and 2.
  const Dataset data = testing::argmax_dataset(22, ConvNet::kInputs, 3, 5);
  ConvNet model{7};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{replicas}, Adam{0.01}};
  FitOptions options = testing::quiet_fit(8, 2);
  options.seed = 3;
  trainer.fit(model, data, options);
  return {model.parameters(), model.state()};
}

void check_replica_counts() {
  const Trained one = train(1);
  CHECK(one.params != ConvNet{7}.parameters());  // training moved the weights
  CHECK(one.state != ConvNet{7}.state());        // and the moving statistics
  for (int n : {2, 3}) {
    CAPTURE(n);
    const Trained many = train(n);
    CHECK(testing::max_abs_difference(one.params, many.params) <= 1e-5);
    CHECK(testing::max_abs_difference(one.state, many.state) <= 1e-5);
  }
}
}  // namespace

TEST_CASE("a convnet with SyncBatchNormalization between convolutions: 1 - 2 and 3 replicas give the same weights") {
  check_replica_counts();
}

#if defined(LOCKSTEP_HAVE_ONEDNN)
TEST_CASE("the same on oneDNN's convolution primitives") {
  const host::ConvPath before = host::conv_path();
  host::set_conv_path(host::ConvPath::kOneDnn);
  check_replica_counts();
  host::set_conv_path(before);
}
#endif
