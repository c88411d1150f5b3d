// Convolution and pooling on the GPU against the host: gpu::Context's
// conv2d_forward/backward (cuDNN) and pool2d_forward/backward (lockstep's
// kernels) equal host::Context's on the same values, for Valid and Same
// padding (TensorFlow's asymmetric Same among them), strides 1 and 2, with and
// without a bias, and a small convnet trained on the CUDA backend equals the
// same training on the host. The cuDNN cases are compiled where CMake found
// cuDNN (LOCKSTEP_HAVE_CUDNN); pooling is tested in every CUDA build.
//
// Tolerances: 1e-4 of max(|expected|, 1% of the largest |expected|). A
// convolution's value is a sum of KH KW Cin products whose order differs
// between cuDNN's algorithms and the host's GEMM; relative to the value
// itself, one that cancels to near 0 would say nothing of the error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lockstep/cuda.hpp"
#include "lockstep/backend/host/context.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {

// Uploads and waits: the contexts' non-blocking streams do not wait for a pageable copy.
gpu::DeviceBuffer<float> to_device(const std::vector<float>& v) {
  gpu::DeviceBuffer<float> d(std::max<std::size_t>(v.size(), 1));
  if (!v.empty()) LOCKSTEP_CUDA_CHECK(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

// Waits for all streams, then downloads the first n values.
std::vector<float> to_host(const gpu::DeviceBuffer<float>& d, std::size_t n) {
  LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> v(n);
  if (n) LOCKSTEP_CUDA_CHECK(cudaMemcpy(v.data(), d.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

std::vector<float> uniform(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Small integers 0..3: max pooling's windows then hold equal maxima often,
// which shows which position gets the gradient.
std::vector<float> with_ties(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, 3);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(gen));
  return v;
}

// max_i |got_i - want_i| / max(|want_i|, 1% of max |want|).
double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double largest = 0;
  for (float w : want) largest = std::max(largest, std::abs(static_cast<double>(w)));
  const double floor = std::max(1e-2 * largest, 1e-30);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(std::abs(static_cast<double>(want[i])), floor);
    const double error = std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])) / scale;
    if (!(error <= worst)) worst = error;  // a NaN makes worst NaN and fails the CHECK
  }
  return worst;
}

std::string describe(const Window2D& g) {
  return std::to_string(g.in_h) + "x" + std::to_string(g.in_w) + "x" + std::to_string(g.in_c) + " window " +
         std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + " strides " + std::to_string(g.stride_h) +
         "x" + std::to_string(g.stride_w) + " pads " + std::to_string(g.pad_top) + "," + std::to_string(g.pad_left) +
         "," + std::to_string(g.pad_bottom) + "," + std::to_string(g.pad_right) + " -> " + std::to_string(g.out_h) +
         "x" + std::to_string(g.out_w) + "x" + std::to_string(g.out_c);
}

constexpr int kRows = 3;

// ---- pooling ---------------------------------------------------------------

void check_pooling(PoolKind kind, const Window2D& g, bool ties) {
  CAPTURE(describe(g));
  const std::string kind_name = kind == PoolKind::kMax ? "max" : "average";
  CAPTURE(kind_name);
  REQUIRE(window::consistent(g));
  const std::size_t in = kRows * g.in_size(), out = kRows * g.out_size();
  const auto x = ties ? with_ties(in, 5) : uniform(in, -2.0f, 2.0f, 5);
  const auto dy = uniform(out, -1.0f, 1.0f, 6);
  host::Context host_ctx;
  std::vector<float> y(out), dx(in);
  host_ctx.pool2d_forward(kind, g, x.data(), y.data(), kRows);
  host_ctx.pool2d_backward(kind, g, x.data(), y.data(), dy.data(), dx.data(), kRows);

  gpu::Context ctx(0);
  const auto x_d = to_device(x), dy_d = to_device(dy);
  gpu::DeviceBuffer<float> y_d(out), dx_d(in);
  ctx.pool2d_forward(kind, g, x_d.data(), y_d.data(), kRows);
  ctx.pool2d_backward(kind, g, x_d.data(), y_d.data(), dy_d.data(), dx_d.data(), kRows);
  if (kind == PoolKind::kMax) {
    // No arithmetic but the gradients' sums, added in the host's order: the same bits.
    CHECK(to_host(y_d, out) == y);
    CHECK(to_host(dx_d, in) == dx);
  } else {
    // Sums of up to 9 signed terms, in another order than the host's: where
    // they cancel to near the 1% floor of worst_relative, float rounding
    // reaches ~1e-6 relative (1.06e-6 was seen on an H200).
    CHECK(worst_relative(to_host(y_d, out), y) <= 1e-5);
    CHECK(worst_relative(to_host(dx_d, in), dx) <= 1e-5);
  }
}

void check_pooling_kinds(const Window2D& g) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
    check_pooling(kind, g, false);
    check_pooling(kind, g, true);
  }
}

}  // namespace

TEST_CASE("pool2d on the GPU equals the host's: Valid and Same (asymmetric), strides 1 and 2, overlapping windows") {
  // make(in_h, in_w, in_c, out_c, kernel_h, kernel_w, stride_h, stride_w, same)
  check_pooling_kinds(window::make(7, 6, 3, 3, 2, 2, 2, 2, false));  // Keras' MaxPooling2D(2) on an odd height
  check_pooling_kinds(window::make(6, 7, 3, 3, 3, 3, 2, 2, true));   // Same: 0 on top, 1 below; 1 left and right
  check_pooling_kinds(window::make(5, 5, 2, 2, 3, 3, 1, 1, true));   // overlapping windows, padding on every side
  check_pooling_kinds(window::make(6, 6, 4, 4, 2, 2, 1, 1, true));   // Same with a 2x2 window: only bottom, right
  check_pooling_kinds(window::make(7, 5, 2, 2, 3, 2, 2, 1, false));  // overlapping in height only
  check_pooling_kinds(window::make(4, 6, 5, 5, 4, 6, 1, 1, false));  // GlobalAveragePooling2D's window
}

TEST_CASE("pool2d with rows = 0 writes nothing, and a bad geometry is an Error that says what it expected") {
  gpu::Context ctx(0);
  const Window2D g = window::make(4, 4, 2, 2, 2, 2, 2, 2, false);
  gpu::DeviceBuffer<float> x(g.in_size()), y(g.out_size());
  ctx.pool2d_forward(PoolKind::kMax, g, x.data(), y.data(), 0);
  ctx.synchronize();
  Window2D bad = g;
  bad.out_h = 3;
  CHECK_THROWS_WITH_AS(ctx.pool2d_forward(PoolKind::kMax, bad, x.data(), y.data(), 1),
                       doctest::Contains("inconsistent geometry"), Error);
  Window2D channels = g;
  channels.out_c = 3;
  CHECK_THROWS_WITH_AS(ctx.pool2d_backward(PoolKind::kAverage, channels, x.data(), y.data(), y.data(), x.data(), 1),
                       doctest::Contains("expected the same count"), Error);
  CHECK_THROWS_WITH_AS(ctx.pool2d_forward(PoolKind::kMax, g, x.data(), y.data(), -1),
                       doctest::Contains("expected >= 0"), Error);
}

#if defined(LOCKSTEP_HAVE_CUDNN)

namespace {

// ---- convolution -------------------------------------------------------------

struct ConvCase {
  Window2D g;
  bool bias;
};

// The host's forward and backward against the GPU's on the same values.
template <class Act>
void check_conv(gpu::Context& ctx, const ConvCase& c, bool with_dx) {
  const Window2D& g = c.g;
  CAPTURE(describe(g));
  CAPTURE(c.bias);
  CAPTURE(Act::kName);
  CAPTURE(with_dx);
  REQUIRE(window::consistent(g));
  const std::size_t in = kRows * g.in_size(), out = kRows * g.out_size(), kernel = g.kernel_size();
  const std::size_t cout = static_cast<std::size_t>(g.out_c);
  const auto x = uniform(in, -1.0f, 1.0f, 21), k = uniform(kernel, -0.5f, 0.5f, 22);
  const auto b = uniform(cout, -0.5f, 0.5f, 23), dy = uniform(out, -1.0f, 1.0f, 24);
  const float* bias = c.bias ? b.data() : nullptr;

  host::Context host_ctx;
  std::vector<float> y(out), dx(in), dk(kernel), db(cout), dy_host = dy;
  float* const host_dx = with_dx ? dx.data() : nullptr;
  float* const host_db = c.bias ? db.data() : nullptr;
  host_ctx.conv2d_forward<Act>(g, x.data(), k.data(), bias, y.data(), kRows);

  const auto x_d = to_device(x), k_d = to_device(k), b_d = to_device(b);
  auto dy_d = to_device(dy);
  gpu::DeviceBuffer<float> y_d(out), dx_d(in), dk_d(kernel), db_d(cout);
  float* const gpu_dx = with_dx ? dx_d.data() : nullptr;
  float* const gpu_db = c.bias ? db_d.data() : nullptr;
  ctx.conv2d_forward<Act>(g, x_d.data(), k_d.data(), c.bias ? b_d.data() : nullptr, y_d.data(), kRows);
  if constexpr (Act::kIdentity) {  // the required member: dy is the gradient of conv + bias, read only
    host_ctx.conv2d_backward(g, x.data(), k.data(), dy.data(), host_dx, dk.data(), host_db, kRows);
    ctx.conv2d_backward(g, x_d.data(), k_d.data(), static_cast<const float*>(dy_d.data()), gpu_dx, dk_d.data(),
                        gpu_db, kRows);
  } else {  // the optional one Conv2D prefers: Act's derivative applied to dy in place
    host_ctx.conv2d_activation_backward<Act>(g, x.data(), y.data(), k.data(), dy_host.data(), host_dx, dk.data(),
                                             host_db, kRows);
    ctx.conv2d_activation_backward<Act>(g, x_d.data(), y_d.data(), k_d.data(), dy_d.data(), gpu_dx, dk_d.data(),
                                        gpu_db, kRows);
  }
  CHECK(worst_relative(to_host(y_d, out), y) <= 1e-4);
  CHECK(worst_relative(to_host(dy_d, out), dy_host) <= 1e-4);  // unchanged under Linear
  CHECK(worst_relative(to_host(dk_d, kernel), dk) <= 1e-4);
  if (c.bias) CHECK(worst_relative(to_host(db_d, cout), db) <= 1e-4);
  if (with_dx) CHECK(worst_relative(to_host(dx_d, in), dx) <= 1e-4);
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  for (bool bias : {true, false}) {
    cases.push_back({window::make(7, 6, 3, 4, 3, 3, 1, 1, false), bias});  // Valid, stride 1
    cases.push_back({window::make(7, 6, 3, 4, 3, 3, 2, 2, false), bias});  // Valid, stride 2
    cases.push_back({window::make(7, 6, 3, 4, 3, 3, 1, 1, true), bias});   // Same, symmetric (cuDNN's own padding)
    cases.push_back({window::make(6, 7, 3, 4, 3, 3, 2, 2, true), bias});   // Same, 0 top / 1 bottom, 1 left / 1 right
    cases.push_back({window::make(6, 6, 2, 5, 2, 2, 1, 1, true), bias});   // Same, 2x2: bottom and right only
    cases.push_back({window::make(8, 5, 4, 3, 4, 3, 2, 1, true), bias});   // Same, non-square, strides 2 and 1
    cases.push_back({window::make(5, 5, 6, 7, 1, 1, 1, 1, false), bias});  // 1x1
  }
  return cases;
}

}  // namespace

TEST_CASE("conv2d on the GPU (cuDNN) equals the host's: Valid and Same (asymmetric), strides 1 and 2, bias on/off") {
  gpu::Context ctx(0);
  for (const ConvCase& c : conv_cases()) {
    check_conv<Linear>(ctx, c, true);
    check_conv<Relu>(ctx, c, true);
    check_conv<Tanh>(ctx, c, false);  // the first layer: no input gradient
  }
  // Each shape was planned once, whatever the activation or the passes asked.
  CHECK(ctx.convolutions().plans() == conv_cases().size() / 2);
}

TEST_CASE("conv2d with heuristic and deterministic algorithm choice equals the host's") {
  gpu::Context ctx(0);
  ctx.conv_options().search = gpu::ConvSearch::kHeuristic;
  ctx.conv_options().deterministic = true;
  for (const ConvCase& c : conv_cases()) check_conv<Relu>(ctx, c, true);
}

TEST_CASE("conv2d with rows = 0 zeroes the gradients of the parameters and touches nothing else") {
  gpu::Context ctx(0);
  const Window2D g = window::make(5, 5, 2, 3, 3, 3, 1, 1, true);
  const auto ones = std::vector<float>(g.kernel_size(), 1.0f);
  auto dk = to_device(ones), db = to_device(std::vector<float>(3, 1.0f));
  gpu::DeviceBuffer<float> x(1), y(1);
  ctx.conv2d_forward<Relu>(g, x.data(), dk.data(), db.data(), y.data(), 0);
  ctx.conv2d_activation_backward<Relu>(g, x.data(), y.data(), x.data(), y.data(), static_cast<float*>(nullptr),
                                       dk.data(), db.data(), 0);
  CHECK(to_host(dk, g.kernel_size()) == std::vector<float>(g.kernel_size(), 0.0f));
  CHECK(to_host(db, 3) == std::vector<float>(3, 0.0f));
  dk = to_device(ones);
  db = to_device(std::vector<float>(3, 1.0f));
  ctx.conv2d_backward(g, x.data(), x.data(), static_cast<const float*>(y.data()), static_cast<float*>(nullptr),
                      dk.data(), db.data(), 0);
  CHECK(to_host(dk, g.kernel_size()) == std::vector<float>(g.kernel_size(), 0.0f));
  CHECK(to_host(db, 3) == std::vector<float>(3, 0.0f));
  CHECK(ctx.convolutions().plans() == 0);  // nothing planned, no cuDNN handle made
}

TEST_CASE("conv2d: a bad geometry or row count is an Error naming it") {
  gpu::Context ctx(0);
  Window2D g = window::make(5, 5, 2, 3, 3, 3, 1, 1, false);
  gpu::DeviceBuffer<float> buffer(256);
  float* p = buffer.data();
  g.out_w = 4;
  CHECK_THROWS_WITH_AS(ctx.conv2d_forward<Linear>(g, p, p, p, p, 1),
                       doctest::Contains("cuda conv2d_forward: inconsistent geometry"), Error);
  g.out_w = 3;
  CHECK_THROWS_WITH_AS(ctx.conv2d_backward(g, p, p, p, p, p, p, -2), doctest::Contains("-2 rows, expected >= 0"),
                       Error);
  CHECK_THROWS_WITH_AS(ctx.conv2d_activation_backward<Relu>(g, p, p, p, p, p, p, p, -2),
                       doctest::Contains("-2 rows, expected >= 0"), Error);
  const Window2D huge = window::make(4096, 4096, 64, 8, 3, 3, 1, 1, true);
  CHECK_THROWS_WITH_AS(ctx.conv2d_forward<Linear>(huge, p, p, p, p, 4), doctest::Contains("cuDNN's limit"), Error);
}

TEST_CASE("conv2d replays from a CUDA graph once its shape is planned, and a first use inside a capture is an Error") {
  gpu::Context ctx(0);
  ctx.conv_options().deterministic = true;  // so that the replay must give the eager step's bits
  const Window2D g = window::make(6, 7, 3, 4, 3, 3, 2, 2, true);  // asymmetric: the padded copies are captured too
  const std::size_t in = kRows * g.in_size(), out = kRows * g.out_size(), kernel = g.kernel_size();
  const auto x = uniform(in, -1.0f, 1.0f, 31), k = uniform(kernel, -0.5f, 0.5f, 32);
  const auto b = uniform(4, -0.5f, 0.5f, 33), dy = uniform(out, -1.0f, 1.0f, 34);
  const auto x_d = to_device(x), k_d = to_device(k), b_d = to_device(b);
  auto dy_d = to_device(dy);
  gpu::DeviceBuffer<float> y_d(out), dx_d(in), dk_d(kernel), db_d(4);
  const auto step = [&] {
    ctx.conv2d_forward<Relu>(g, x_d.data(), k_d.data(), b_d.data(), y_d.data(), kRows);
    ctx.conv2d_activation_backward<Relu>(g, x_d.data(), y_d.data(), k_d.data(), dy_d.data(), dx_d.data(),
                                         dk_d.data(), db_d.data(), kRows);
  };
  step();  // plans the shape outside the capture
  const auto y = to_host(y_d, out), dx = to_host(dx_d, in), dk = to_host(dk_d, kernel), db = to_host(db_d, 4);
  const std::size_t workspace = ctx.convolutions().workspace_bytes();
  for (auto* d : {&y_d, &dx_d, &dk_d, &db_d}) ctx.zero(d->data(), d->size());
  gpu::Graph graph;
  graph.capture(ctx.stream(), step);
  REQUIRE(graph.ready());
  ctx.from_host(dy_d.data(), dy.data(), out);  // backward overwrote it
  graph.launch(ctx.stream());
  ctx.synchronize();
  CHECK(to_host(y_d, out) == y);
  CHECK(to_host(dx_d, in) == dx);
  CHECK(to_host(dk_d, kernel) == dk);
  CHECK(to_host(db_d, 4) == db);
  CHECK(ctx.convolutions().workspace_bytes() == workspace);  // the capture allocated nothing

  gpu::Context fresh(0);
  gpu::Graph broken;
  CHECK_THROWS_WITH_AS(broken.capture(fresh.stream(),
                                      [&] {
                                        fresh.conv2d_forward<Relu>(g, x_d.data(), k_d.data(), b_d.data(), y_d.data(),
                                                                   kRows);
                                      }),
                       doctest::Contains("run eagerly first"), Error);
  // The stream is usable again, and an eager call plans the shape (its
  // algorithm may differ from ctx's: equal within rounding).
  fresh.conv2d_forward<Relu>(g, x_d.data(), k_d.data(), b_d.data(), y_d.data(), kRows);
  CHECK(worst_relative(to_host(y_d, out), y) <= 1e-5);
  CHECK(fresh.convolutions().plans() == 1);
}

// ---- training ----------------------------------------------------------------

namespace {

// Keras-style blocks: convolutions (one asymmetric Same at stride 2) with
// synchronised BatchNormalization, max and global average pooling, dropout.
using ConvNet = Sequential<Input<8, 8, 2>, Conv2D<4, 3, 3, Strides<1, 1>, Same, Linear, false>, SyncBatchNormalization,
                           Relu, MaxPooling2D<2>, Conv2D<6, 3, 3, Strides<2, 2>, Same, Relu>, AveragePooling2D<2, 2,
                           Strides<1, 1>, Same>, Conv2D<5, 1, 1>, GlobalAveragePooling2D, Dropout<25>, Dense<3>>;

const Dataset& conv_data() {
  static const Dataset d = testing::argmax_dataset(16, ConvNet::kInputs, 3, 9);
  return d;
}

// 16 samples at batch 8, 2 epochs: 4 steps of one shape, the first eager,
// the second captured, the rest replayed when graphs are on.
template <class Strategy>
std::vector<float> train_convnet(Strategy strategy, bool graphs = true) {
  ConvNet model{13};
  Trainer<Strategy, Adam> trainer{strategy, Adam{0.01}};
  if constexpr (std::is_same_v<typename Strategy::backend, Cuda>) trainer.executor().options().graphs = graphs;
  FitOptions options = testing::quiet_fit(8, 2);
  options.seed = 4;
  trainer.fit(model, conv_data(), options);
  return model.parameters();
}

}  // namespace

TEST_CASE("a convnet trained on one GPU equals the host after 4 steps (max abs difference <= 1e-4)") {
  const auto host = train_convnet(MirroredPolicy<HostAllReduce>{1});
  CHECK(host != ConvNet{13}.parameters());  // training moved the weights
  CHECK(testing::max_abs_difference(host, train_convnet(MirroredPolicy<NcclAllReduce>{1}, false)) <= 1e-4);
  CHECK(testing::max_abs_difference(host, train_convnet(MirroredPolicy<NcclAllReduce>{1}, true)) <= 1e-4);
}

TEST_CASE("a convnet on every visible GPU equals the host with as many replicas (<= 1e-4)") {
  const int gpus = gpu::visible_devices();
  CAPTURE(gpus);
  CHECK(testing::max_abs_difference(train_convnet(MirroredPolicy<HostAllReduce>{gpus}),
                                    train_convnet(MirroredPolicy<NcclAllReduce>{})) <= 1e-4);
}

TEST_CASE("evaluate and predict of a convnet on the GPU equal the host's") {
  ConvNet model{21};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> host{MirroredPolicy<HostAllReduce>{1}};
  Trainer<MirroredPolicy<NcclAllReduce>, Adam> gpu{MirroredPolicy<NcclAllReduce>{1}};
  const Logs h = host.evaluate(model, conv_data(), 5), g = gpu.evaluate(model, conv_data(), 5);
  CHECK(g.value(0) == doctest::Approx(h.value(0)).epsilon(1e-5));
  CHECK(g.value(1) == doctest::Approx(h.value(1)).epsilon(1e-6));
  const std::vector<float> hp = host.predict(model, conv_data(), 5), gp = gpu.predict(model, conv_data(), 5);
  CHECK(testing::max_abs_difference(hp, gp) <= 1e-4);
}

#endif  // LOCKSTEP_HAVE_CUDNN
