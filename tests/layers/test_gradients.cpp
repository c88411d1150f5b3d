// Backward of every layer and loss against central finite differences, in
// double precision, through whole models so that the input gradients that
// flow between layers are checked too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "lockstep/lockstep.hpp"

namespace {
using namespace lockstep;
using testing::check_gradients;
}  // namespace

TEST_CASE("Dense - Relu - Tanh - Sigmoid layers with SparseCategoricalCrossentropy") {
  using Model = Sequential<Input<5>, Dense<4, Relu>, Dense<6, Tanh>, Sigmoid, Dense<4, Linear>, Relu, Dense<3>>;
  check_gradients<Model, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 2, 1, 2, 0, 1, 1}, 7);
}

TEST_CASE("Dense and Softmax layers with MeanSquaredError") {
  using Model = Sequential<Input<3>, Dense<5, Sigmoid>, Dense<4>, Softmax>;
  std::vector<float> targets(6 * 4);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = Philox4x32::uniform(3, 0, i);
  check_gradients<Model, MeanSquaredError>(targets, 6);
}

TEST_CASE("Dropout with a fixed mask (a fixed key) and both BatchNormalization variants in training mode") {
  // A training pass with a fixed key and first row: Dropout's mask is a
  // function of those, so the loss is smooth in the parameters around them.
  Pass pass{Mode::kTraining};
  pass.key = 12345;
  pass.first_row = 3;
  using Model = Sequential<Input<5>, Dense<6, Tanh>, Dropout<30>, Dense<4>, BatchNormalization<>, Relu, Dense<3>>;
  check_gradients<Model, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 2, 1, 2, 0, 1, 1}, 7, pass);
  using Sync = Sequential<Input<4>, Dense<5, Sigmoid>, SyncBatchNormalization, Dense<3>>;
  check_gradients<Sync, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 2, 1, 2, 0, 1}, 6, pass);
  // BatchNormalization first: no input gradient is asked of it.
  using First = Sequential<Input<3>, BatchNormalization<>, Dense<3>>;
  check_gradients<First, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 2, 1, 1, 0}, 5, pass);
}

TEST_CASE("an image-shaped input: BatchNormalization over the channel axis of (H, W, C), then Flatten and Dense") {
  Pass pass{Mode::kTraining};
  using Image = Sequential<Input<2, 3, 2>, BatchNormalization<>, Relu, Flatten, Dense<3>>;
  static_assert(Image::kInputs == 12 && Image::layer<0>::kChannels == 2 && Image::kParams == 4 + 12 * 3 + 3);
  static_assert(std::is_same_v<Image::layer<2>::out_shape, Shape<12>>);
  check_gradients<Image, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 2, 1, 1}, 4, pass);
  using SyncImage = Sequential<Input<3, 2, 2>, SyncBatchNormalization, Flatten, Dense<4, Tanh>, Dense<2>>;
  check_gradients<SyncImage, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 1, 1}, 3, pass);
}

TEST_CASE("compile-time shapes and the flat parameter layout") {
  using Model = Sequential<Input<784>, Dense<256, Relu>, Dense<10>>;
  static_assert(Model::kInputs == 784 && Model::kOutputs == 10);
  static_assert(Model::kParams == 784 * 256 + 256 + 256 * 10 + 10);
  static_assert(Model::kOffsets[1] == 784 * 256 + 256);
  static_assert(Model::layer<1>::kIn == 256);
  static_assert(Model::with_softmax::kParams == Model::kParams);
  static_assert(std::is_same_v<MirroredPolicy<NcclAllReduce>::backend, Cuda>);
  using NcclTrainer = Trainer<MirroredPolicy<NcclAllReduce>, Adam>;  // names a valid type in a host build
  static_assert(sizeof(NcclTrainer*) == sizeof(void*));
  CHECK(Model::kTrainFlopsPerSample == doctest::Approx(4.0 * 784 * 256 + 6.0 * 256 * 10));
}

TEST_CASE("Glorot-uniform initialisation: bounds - zero bias - seed only") {
  using Model = Sequential<Input<784>, Dense<256, Relu>, Dense<10>>;
  const Model a{3}, b{3}, c{4};
  CHECK(a.parameters() == b.parameters());
  CHECK(a.parameters() != c.parameters());
  const double limit = std::sqrt(6.0 / (784 + 256));
  double sum_sq = 0;
  for (std::size_t i = 0; i < 784 * 256; ++i) {
    CHECK(std::abs(a.parameters()[i]) <= limit);
    sum_sq += double(a.parameters()[i]) * a.parameters()[i];
  }
  CHECK(sum_sq / (784 * 256) == doctest::Approx(limit * limit / 3).epsilon(0.02));  // variance of U(-l, l)
  for (std::size_t i = 784 * 256; i < 784 * 256 + 256; ++i) CHECK(a.parameters()[i] == 0.0f);
}

TEST_CASE("a workspace smaller than the rows is an error - not an overrun") {
  using Model = Sequential<Input<2>, Dense<2>>;
  Model model{0};
  Model::Workspace ws(1);
  const float x[4] = {1, 2, 3, 4};
  host::Context ctx;
  CHECK_THROWS_WITH_AS(Model::forward(ctx, Pass{}, model.parameters().data(), model.state().data(), x, 2, ws),
                       doctest::Contains("2 rows, the workspace holds 1"), lockstep::Error);
}

TEST_CASE("BatchNormalization over more positions than one chunk of its per-channel sums") {
  // 3 samples of 10 x 10 x 2: 300 positions a channel, summed as a chunk of
  // kernels::kChunk (256) and one of 44 (batch_normalization.hpp).
  Pass pass{Mode::kTraining};
  using Big = Sequential<Input<10, 10, 2>, BatchNormalization<>, Flatten, Dense<3>>;
  using SyncBig = Sequential<Input<10, 10, 2>, SyncBatchNormalization, Flatten, Dense<2>>;
  static_assert(kernels::kChunk < 3 * 100 && 3 * 100 < 2 * kernels::kChunk);
  check_gradients<Big, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 2, 1}, 3, pass);
  check_gradients<SyncBig, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{1, 0, 1}, 3, pass);

  // Forward against the statistics summed directly: with gamma 1 and beta 0
  // each channel's output has mean 0 and variance var / (var + epsilon).
  using Norm = Sequential<Input<10, 10, 2>, BatchNormalization<>>;
  constexpr int kRows = 3;
  constexpr std::size_t kPositions = kRows * 100;
  std::vector<double> params(Norm::kParams), state(Norm::kState);
  std::vector<float> init(Norm::kParams), state_init(Norm::kState);
  Norm::initialize(init.data(), 1);
  Norm::initialize_state(state_init.data());
  params.assign(init.begin(), init.end());
  state.assign(state_init.begin(), state_init.end());
  std::vector<double> x(kRows * Norm::kInputs);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 3.0 * Philox4x32::uniform(7, 0, i) + (i % 2 ? 5.0 : -1.0);
  host::Context ctx;
  Norm::BasicWorkspace<double> ws(kRows);
  const double* y = Norm::forward(ctx, pass, params.data(), state.data(), x.data(), kRows, ws);
  for (std::size_t c = 0; c < 2; ++c) {
    double mx = 0, my = 0;
    for (std::size_t o = 0; o < kPositions; ++o) mx += x[o * 2 + c], my += y[o * 2 + c];
    mx /= kPositions, my /= kPositions;
    double vx = 0, vy = 0;
    for (std::size_t o = 0; o < kPositions; ++o) {
      vx += (x[o * 2 + c] - mx) * (x[o * 2 + c] - mx);
      vy += (y[o * 2 + c] - my) * (y[o * 2 + c] - my);
    }
    vx /= kPositions, vy /= kPositions;
    CAPTURE(c);
    CHECK(std::abs(my) < 1e-12);
    CHECK(std::abs(vy - vx / (vx + BatchNormDefaults::kEpsilon)) < 1e-12);
  }
}

// The host runs some functors through host_loop (backend/host/launch.hpp), a
// vectorisable loop; a GPU calls f(i) for each index. Both must give the
// same bits, so that a host run and the kernels' own arithmetic agree.
namespace {
template <class F>
std::vector<float> per_index(std::size_t n, F f, std::vector<float>& out) {
  std::fill(out.begin(), out.end(), -7.0f);
  for (std::size_t i = 0; i < n; ++i) f(i);
  return out;
}
template <class F>
std::vector<float> host_loop(std::size_t n, F f, std::vector<float>& out) {
  std::fill(out.begin(), out.end(), -7.0f);
  static_assert(host::has_host_loop<F>::value);
  host::for_each_index(n, f);
  return out;
}
}  // namespace

TEST_CASE("Dropout's host loop gives the bits of its per-index kernel - any first row - any length") {
  // First values that start mid-quad and on one; lengths around the loop's blocks of 16 values.
  for (const std::uint64_t base : {std::uint64_t{0}, std::uint64_t{2}, std::uint64_t{1600}, std::uint64_t{4294967291}}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                                std::size_t{50}, std::size_t{3200}}) {
      CAPTURE(base);
      CAPTURE(n);
      std::vector<float> x(n), out(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = 4.0f * Philox4x32::uniform(12, 0, i) - 2.0f;
      kernels::DropoutMask<float> mask{};
      mask.src = x.data();
      mask.dst = out.data();
      mask.stream = rng_stream::kDropout + 3;
      mask.base = base;
      mask.s = 0x0123456789abcdefull;
      mask.n = n;
      mask.threshold = 0x40000000u;  // rate 0.25
      mask.scale = 4.0f / 3.0f;
      const std::size_t calls = kernels::DropoutMask<float>::calls(base, n);
      const std::vector<float> want = per_index(calls, mask, out), got = host_loop(calls, mask, out);
      CHECK(want == got);
      if (n >= 50) CHECK(std::count(got.begin(), got.end(), 0.0f) > 0);  // the test drops values
    }
  }
}

TEST_CASE("BatchNormalization's host loops give the bits of its per-index kernels") {
  // Channel counts around the host loop's block of 64; positions around a chunk of 256.
  const std::size_t kChannels[] = {1, 3, 32, 64, 65, 130}, kOuter[] = {1, 255, 256, 257, 600};
  for (const std::size_t channels : kChannels) {
    for (const std::size_t outer : kOuter) {
      CAPTURE(channels);
      CAPTURE(outer);
      const std::size_t n = outer * channels;
      std::vector<float> x(n), dy(n), mean(channels), inv_std(channels), gamma(channels), beta(channels);
      std::vector<float> sums(2 * channels), count{static_cast<float>(outer)};
      for (std::size_t i = 0; i < n; ++i) {
        x[i] = 4.0f * Philox4x32::uniform(11, 0, i) - 1.5f;
        dy[i] = Philox4x32::uniform(11, 1, i) - 0.5f;
      }
      for (std::size_t c = 0; c < channels; ++c) {
        mean[c] = Philox4x32::uniform(11, 2, c);
        inv_std[c] = 0.5f + Philox4x32::uniform(11, 3, c);
        gamma[c] = 0.5f + Philox4x32::uniform(11, 4, c);
        beta[c] = Philox4x32::uniform(11, 5, c) - 0.5f;
        sums[c] = Philox4x32::uniform(11, 6, c);
        sums[channels + c] = Philox4x32::uniform(11, 7, c);
      }
      std::vector<float> out(n);
      const kernels::Normalize<float> normalize{x.data(), out.data(), mean.data(), inv_std.data(),
                                                gamma.data(), beta.data(), channels};
      CHECK(per_index(n, normalize, out) == host_loop(n, normalize, out));
      const kernels::NormalizeBackward<float> backward{x.data(),     dy.data(),   out.data(),   mean.data(),
                                                       inv_std.data(), gamma.data(), sums.data(), count.data(),
                                                       channels};
      CHECK(per_index(n, backward, out) == host_loop(n, backward, out));

      const std::size_t chunks = kernels::chunk_count(outer);
      std::vector<float> partial(2 * chunks * channels);
      const kernels::ChunkSums<float, kernels::Values<float>> values{{x.data()}, partial.data(), outer, channels};
      CHECK(per_index(chunks * channels, values, partial) == host_loop(chunks * channels, values, partial));
      const kernels::ChunkSums<float, kernels::SquaredDeviations<float>> squares{
          {x.data(), mean.data()}, partial.data(), outer, channels};
      CHECK(per_index(chunks * channels, squares, partial) == host_loop(chunks * channels, squares, partial));
      const kernels::ChunkSums<float, kernels::GradientTerms<float>> terms{
          {x.data(), dy.data(), mean.data(), inv_std.data()}, partial.data(), outer, channels};
      CHECK(per_index(chunks * channels, terms, partial) == host_loop(chunks * channels, terms, partial));

      // With a Relu fused (Sequential::fuses_next): the same per index and
      // host loop, and the bits of the Relu layer's own kernels run before
      // (forward) or after (backward) the plain ones.
      const kernels::Normalize<float, Relu> normalize_relu{x.data(),     out.data(),  mean.data(), inv_std.data(),
                                                           gamma.data(), beta.data(), channels};
      const std::vector<float> fused = host_loop(n, normalize_relu, out);
      CHECK(per_index(n, normalize_relu, out) == fused);
      std::vector<float> plain = host_loop(n, normalize, out), relu(n);
      host::for_each_index(n, kernels::Activate<Relu, float>{plain.data(), relu.data()});
      CHECK(relu == fused);
      if (n >= 50) {  // the Relu cuts some values, not all
        const auto zeros = std::count(fused.begin(), fused.end(), 0.0f);
        CHECK(zeros > 0);
        CHECK(zeros < static_cast<std::ptrdiff_t>(n));
      }
      std::vector<float> relu_dy(n);  // dy through the Relu layer's backward
      host::for_each_index(n, kernels::ActivationBackward<Relu, float>{fused.data(), dy.data(), relu_dy.data()});

      const kernels::NormalizeBackward<float, Relu> backward_relu{
          x.data(), dy.data(), out.data(), mean.data(), inv_std.data(), gamma.data(), sums.data(), count.data(),
          channels, beta.data()};
      const std::vector<float> fused_dx = host_loop(n, backward_relu, out);
      CHECK(per_index(n, backward_relu, out) == fused_dx);
      const kernels::NormalizeBackward<float> backward_plain{
          x.data(), relu_dy.data(), out.data(), mean.data(), inv_std.data(), gamma.data(), sums.data(), count.data(),
          channels};
      CHECK(host_loop(n, backward_plain, out) == fused_dx);

      const kernels::ChunkSums<float, kernels::GradientTerms<float, Relu>> terms_relu{
          {x.data(), dy.data(), mean.data(), inv_std.data(), gamma.data(), beta.data()}, partial.data(), outer,
          channels};
      const std::vector<float> fused_terms = host_loop(chunks * channels, terms_relu, partial);
      CHECK(per_index(chunks * channels, terms_relu, partial) == fused_terms);
      const kernels::ChunkSums<float, kernels::GradientTerms<float>> terms_plain{
          {x.data(), relu_dy.data(), mean.data(), inv_std.data()}, partial.data(), outer, channels};
      CHECK(host_loop(chunks * channels, terms_plain, partial) == fused_terms);
    }
  }
}

namespace {
// One float pass of Model on 5 rows from `seed`, with the parameters of
// Init{seed} (an initialiser draws from the layer's index, which the layer
// between changes): the output, and in training the gradients and the state.
template <class Model, class Init>
std::vector<std::vector<float>> train_pass(std::uint64_t seed, Mode mode = Mode::kTraining) {
  static_assert(Model::kParams == Init::kParams && Model::kState == Init::kState);
  constexpr int kRows = 5;
  Init model{seed};
  std::vector<float> params = model.parameters(), state = model.state();
  // Moved off their initial values, so that gamma and beta are not 1 and 0.
  for (std::size_t i = 0; i < params.size(); ++i) params[i] += 0.25f * Philox4x32::uniform(seed, 1, i);
  std::vector<float> x(kRows * Model::kInputs), grads(Model::kParams);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * Philox4x32::uniform(seed, 2, i) - 0.7f;
  host::Context ctx;
  typename Model::Workspace ws(kRows);
  const Pass pass{mode};
  const float* y = Model::forward(ctx, pass, params.data(), state.data(), x.data(), kRows, ws);
  std::vector<float> out(y, y + kRows * Model::kOutputs);
  if (mode != Mode::kTraining) return {out, state};
  for (std::size_t i = 0; i < out.size(); ++i) ws.output_grad()[i] = Philox4x32::uniform(seed, 3, i) - 0.5f;
  Model::backward(ctx, pass, params.data(), state.data(), x.data(), kRows, ws, grads.data());
  return {out, grads, state};
}
}  // namespace

TEST_CASE("BatchNormalization then Relu run fused - the bits of the two layers run apart - training and inference") {
  // Reshape to the same shape copies its input: a layer between the two that stops the fusion.
  using Fused = Sequential<Input<6, 6, 1>, Conv2D<4, 3, 3, Strides<1, 1>, Valid, Linear, false>,
                           BatchNormalization<>, Relu, Flatten, Dense<3>>;
  using Apart = Sequential<Input<6, 6, 1>, Conv2D<4, 3, 3, Strides<1, 1>, Valid, Linear, false>,
                           BatchNormalization<>, Reshape<4, 4, 4>, Relu, Flatten, Dense<3>>;
  static_assert(Fused::fuses_next<1>() && Fused::fused_into_previous<2>() && !Fused::fuses_next<0>());
  static_assert(!Apart::fuses_next<1>() && !Apart::fuses_next<2>());
  static_assert(Fused::kStoredWidths[1] == 0 && Fused::kStoredWidths[2] == 64);
  const std::vector<std::string> names{"conv2d", "batch_normalization", "activation", "flatten", "dense"};
  CHECK(Fused::layer_names() == names);
  for (const std::uint64_t seed : {std::uint64_t{1}, std::uint64_t{2}}) {
    CAPTURE(seed);
    CHECK(train_pass<Fused, Fused>(seed) == train_pass<Apart, Fused>(seed));
    CHECK(train_pass<Fused, Fused>(seed, Mode::kInference) == train_pass<Apart, Fused>(seed, Mode::kInference));
  }
  // Synchronised; and first, where no input gradient is asked of it.
  using SyncFused = Sequential<Input<3, 3, 2>, SyncBatchNormalization, Relu, Flatten, Dense<2>>;
  using SyncApart = Sequential<Input<3, 3, 2>, SyncBatchNormalization, Reshape<3, 3, 2>, Relu, Flatten, Dense<2>>;
  static_assert(SyncFused::fuses_next<0>());
  CHECK(train_pass<SyncFused, SyncFused>(3) == train_pass<SyncApart, SyncFused>(3));
  // Only Relu is fused: Sigmoid after BatchNormalization runs as its own layer.
  static_assert(!Sequential<Input<4>, BatchNormalization<>, Sigmoid, Dense<2>>::fuses_next<0>());
}
