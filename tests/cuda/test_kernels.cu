// The CUDA compute backend against the host backend: every kernels:: functor
// launched by gpu::for_each_index / for_each_row equals the host loop over the
// same functor, gpu::Context's gemm, affine and column_sums equal
// host::Context's, and device checks fail with messages that say what exists.
//
// Tolerances are relative to a scale stated at each CHECK. They are not 0
// because nvcc contracts a * b + c into one FMA (one rounding instead of two)
// and CUDA's expf/tanhf/logf are within 2 ulp where glibc's are within 1.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/blas.cuh"
#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/context.cuh"
#include "lockstep/backend/cuda/device.cuh"
#include "lockstep/backend/cuda/launch.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/backend/host/context.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/layers/softmax.hpp"
#include "lockstep/losses/mean_squared_error.hpp"
#include "lockstep/losses/sparse_categorical_crossentropy.hpp"
#include "lockstep/optim/adam.hpp"
#include "lockstep/optim/sgd.hpp"

using namespace lockstep;

namespace {

// Uploads and waits: a pageable cudaMemcpy may return before its DMA lands,
// and the kernels under test run on non-blocking streams that do not wait for it.
template <class T>
gpu::DeviceBuffer<T> to_device(const std::vector<T>& v) {
  gpu::DeviceBuffer<T> d(v.size());
  if (!v.empty()) LOCKSTEP_CUDA_CHECK(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

// Waits for all streams, then downloads.
template <class T>
std::vector<T> to_host(const gpu::DeviceBuffer<T>& d) {
  LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> v(d.size());
  if (!v.empty()) LOCKSTEP_CUDA_CHECK(cudaMemcpy(v.data(), d.data(), v.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

std::vector<float> uniform(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// max_i |got_i - want_i| / max(|want_i|, floor_i): the worst error relative to
// the expected value, or to floor_i where the expected value is smaller (where
// it comes out of a cancellation, its own size says nothing of the error).
double worst_relative(const std::vector<float>& got, const std::vector<float>& want,
                      const std::vector<double>& floor) {
  REQUIRE(got.size() == want.size());
  REQUIRE(floor.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(std::abs(double(want[i])), floor[i]);
    const double error = std::abs(double(got[i]) - double(want[i])) / scale;
    if (!(error <= worst)) worst = error;  // NaN-safe: a NaN makes worst NaN and fails the CHECK
  }
  return worst;
}
double worst_relative(const std::vector<float>& got, const std::vector<float>& want, double floor) {
  return worst_relative(got, want, std::vector<double>(want.size(), floor));
}

// A tiny floor: a purely relative comparison (kept off 0 for exact zeros).
constexpr double kRelative = 1e-30;

constexpr std::size_t kElements = 100003;  // not a multiple of the block size
constexpr std::size_t kRows = 300;         // several blocks of rows

// ---- element-wise functors ------------------------------------------------

template <class Act>
void check_activation_forward() {
  CAPTURE(Act::kName);
  const auto x = uniform(kElements, -6.0f, 6.0f, 11);
  auto want = x;
  host::for_each_index(want.size(), kernels::ActivateInPlace<Act, float>{want.data()});
  auto d = to_device(x);
  gpu::Stream stream;
  gpu::for_each_index(stream, d.size(), kernels::ActivateInPlace<Act, float>{d.data()});
  // 1e-6 relative: a few ulp of expf / tanhf.
  CHECK(worst_relative(to_host(d), want, kRelative) <= 1e-6);
}

template <class Act>
void check_activation_backward() {
  CAPTURE(Act::kName);
  auto y = uniform(kElements, -6.0f, 6.0f, 12);
  host::for_each_index(y.size(), kernels::ActivateInPlace<Act, float>{y.data()});  // a valid output
  const auto dy = uniform(kElements, -1.0f, 1.0f, 13);
  std::vector<float> want(kElements);
  host::for_each_index(want.size(), kernels::ActivationBackward<Act, float>{y.data(), dy.data(), want.data()});
  const auto dy_d = to_device(dy), y_d = to_device(y);
  gpu::DeviceBuffer<float> dx_d(kElements);
  gpu::Stream stream;
  gpu::for_each_index(stream, kElements, kernels::ActivationBackward<Act, float>{y_d.data(), dy_d.data(), dx_d.data()});
  // 1e-6 relative to max(|dx|, |dy|): tanh's 1 - y*y cancels near |y| = 1,
  // where the device's FMA keeps bits the host's rounded y*y loses.
  std::vector<double> floor(kElements);
  for (std::size_t i = 0; i < kElements; ++i) floor[i] = std::max(1e-30, std::abs(double(dy[i])));
  CHECK(worst_relative(to_host(dx_d), want, floor) <= 1e-6);
}

// Writes its index: shows that the grid-stride loop reaches every element.
struct WriteIndex {
  std::uint32_t* out;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { out[i] = static_cast<std::uint32_t>(i); }
};

}  // namespace

TEST_CASE("ActivateInPlace on the device equals the host loop") {
  check_activation_forward<Relu>();
  check_activation_forward<Sigmoid>();
  check_activation_forward<Tanh>();
  check_activation_forward<Linear>();
}

TEST_CASE("ActivationBackward on the device equals the host loop") {
  check_activation_backward<Relu>();
  check_activation_backward<Sigmoid>();
  check_activation_backward<Tanh>();
}

TEST_CASE("for_each_index reaches every index beyond one full grid, and n = 0 launches nothing") {
  const std::size_t n = std::size_t(65535) * 256 + 12345;  // more than the 65535-block cap covers in one pass
  gpu::DeviceBuffer<std::uint32_t> out(n);
  gpu::Stream stream;
  gpu::for_each_index(stream, n, WriteIndex{out.data()});
  const auto got = to_host(out);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += got[i] != static_cast<std::uint32_t>(i);
  CHECK(wrong == 0);  // exact: integers

  gpu::for_each_index(stream, 0, WriteIndex{nullptr});
  gpu::for_each_row(stream, 0, WriteIndex{nullptr});
  stream.synchronize();
}

TEST_CASE("optimizer steps on the device equal the host loop") {
  const auto p0 = uniform(kElements, -1.0f, 1.0f, 21), g = uniform(kElements, -1.0f, 1.0f, 22);
  const auto m0 = uniform(kElements, -0.5f, 0.5f, 23), v0 = uniform(kElements, 0.0f, 0.5f, 24);
  gpu::Stream stream;
  // All: 1e-6 relative to max(|expected|, 1); parameters and slots are O(1),
  // and m = b1 m + (1 - b1) g cancels, so its own size is no scale.

  SUBCASE("AdamStep") {
    auto p = p0, m = m0, v = v0;
    const kernels::AdamStep host_step{p.data(), g.data(), m.data(), v.data(), {1e-3f, 0.9f, 0.999f, 1e-7f, 0.0f}};
    host::for_each_index(kElements, host_step);
    auto p_d = to_device(p0), m_d = to_device(m0), v_d = to_device(v0);
    const auto g_d = to_device(g);
    gpu::for_each_index(stream, kElements,
                         kernels::AdamStep{p_d.data(), g_d.data(), m_d.data(), v_d.data(),
                                           {1e-3f, 0.9f, 0.999f, 1e-7f, 0.0f}});
    CHECK(worst_relative(to_host(p_d), p, 1.0) <= 1e-6);
    CHECK(worst_relative(to_host(m_d), m, 1.0) <= 1e-6);
    CHECK(worst_relative(to_host(v_d), v, 1.0) <= 1e-6);
  }
  SUBCASE("SgdStep") {
    auto p = p0;
    host::for_each_index(kElements, kernels::SgdStep{p.data(), g.data(), nullptr, {0.01f, 0.0f, false}});
    auto p_d = to_device(p0);
    const auto g_d = to_device(g);
    gpu::for_each_index(stream, kElements, kernels::SgdStep{p_d.data(), g_d.data(), nullptr, {0.01f, 0.0f, false}});
    CHECK(worst_relative(to_host(p_d), p, 1.0) <= 1e-6);
  }
  SUBCASE("SgdMomentumStep") {
    for (bool nesterov : {false, true}) {
      CAPTURE(nesterov);
      auto p = p0, v = m0;
      host::for_each_index(kElements, kernels::SgdStep{p.data(), g.data(), v.data(), {0.01f, 0.9f, nesterov}});
      auto p_d = to_device(p0), v_d = to_device(m0);
      const auto g_d = to_device(g);
      gpu::for_each_index(stream, kElements,
                           kernels::SgdStep{p_d.data(), g_d.data(), v_d.data(), {0.01f, 0.9f, nesterov}});
      CHECK(worst_relative(to_host(p_d), p, 1.0) <= 1e-6);
      CHECK(worst_relative(to_host(v_d), v, 1.0) <= 1e-6);
    }
  }
}

// ---- row functors ---------------------------------------------------------

TEST_CASE("SoftmaxRow and SoftmaxBackwardRow on the device equal the host loop") {
  const int width = 37;
  const std::size_t n = kRows * width;
  const auto x = uniform(n, -8.0f, 8.0f, 31), dy = uniform(n, -1.0f, 1.0f, 32);
  std::vector<float> y(n), dx(n);
  host::for_each_row(kRows, kernels::SoftmaxRow<float>{x.data(), y.data(), width});
  host::for_each_row(kRows, kernels::SoftmaxBackwardRow<float>{y.data(), dy.data(), dx.data(), width});

  const auto x_d = to_device(x), dy_d = to_device(dy);
  gpu::DeviceBuffer<float> y_d(n), dx_d(n);
  gpu::Stream stream;
  gpu::for_each_row(stream, kRows, kernels::SoftmaxRow<float>{x_d.data(), y_d.data(), width});
  const auto y_got = to_host(y_d);
  // 1e-5 relative: expf's ulps and a 37-term sum.
  CHECK(worst_relative(y_got, y, kRelative) <= 1e-5);

  // Backward from the host's y, so only the backward kernel is compared.
  const auto y_host_d = to_device(y);
  gpu::for_each_row(stream, kRows, kernels::SoftmaxBackwardRow<float>{y_host_d.data(), dy_d.data(), dx_d.data(), width});
  // 1e-5 relative to y_j (|dy_j| + 1): dx = y (dy - <dy, y>) cancels inside
  // the bracket, whose terms are at most |dy_j| and |<dy, y>| <= max|dy| <= 1.
  std::vector<double> floor(n);
  for (std::size_t i = 0; i < n; ++i) floor[i] = std::max(1e-30, double(y[i]) * (std::abs(double(dy[i])) + 1.0));
  CHECK(worst_relative(to_host(dx_d), dx, floor) <= 1e-5);
}

TEST_CASE("SparseCrossentropyRow on the device equals the host loop, with and without the gradient") {
  const int classes = 10;
  const float scale = 1.0f / 3.0f;
  const auto logits = uniform(kRows * classes, -4.0f, 4.0f, 41);
  std::vector<std::int32_t> labels(kRows);
  std::mt19937 gen(42);
  for (auto& l : labels) l = static_cast<std::int32_t>(gen() % classes);
  std::vector<float> loss(kRows), grad(kRows * classes);
  host::for_each_row(kRows, kernels::SparseCrossentropyRow<float>{logits.data(), labels.data(), loss.data(),
                                                                  grad.data(), scale, classes});
  const auto logits_d = to_device(logits);
  const auto labels_d = to_device(labels);
  gpu::Stream stream;

  for (bool with_grad : {true, false}) {
    CAPTURE(with_grad);
    gpu::DeviceBuffer<float> loss_d(kRows), grad_d(kRows * classes);
    gpu::for_each_row(stream, kRows, kernels::SparseCrossentropyRow<float>{logits_d.data(), labels_d.data(),
                                                                            loss_d.data(),
                                                                            with_grad ? grad_d.data() : nullptr,
                                                                            scale, classes});
    // Loss: 1e-5 relative to max(|loss|, 1): lse - z[label] cancels when the
    // label is the largest logit, and lse is O(1) here.
    CHECK(worst_relative(to_host(loss_d), loss, 1.0) <= 1e-5);
    if (with_grad) {
      // Gradient: 1e-5 relative to max(|g|, scale): softmax - scale cancels at
      // the label when its probability is near 1.
      CHECK(worst_relative(to_host(grad_d), grad, double(scale)) <= 1e-5);
    } else {
      const auto untouched = to_host(grad_d);  // a null grad is never written
      CHECK(std::all_of(untouched.begin(), untouched.end(), [](float v) { return v == 0.0f; }));
    }
  }
}

TEST_CASE("SquaredErrorRow on the device equals the host loop, with and without the gradient") {
  const int width = 7;
  const float scale = 0.25f;
  const auto y = uniform(kRows * width, -2.0f, 2.0f, 51), target = uniform(kRows * width, -2.0f, 2.0f, 52);
  std::vector<float> loss(kRows), grad(kRows * width);
  host::for_each_row(kRows,
                     kernels::SquaredErrorRow<float>{y.data(), target.data(), loss.data(), grad.data(), scale, width});
  const auto y_d = to_device(y), target_d = to_device(target);
  gpu::Stream stream;
  for (bool with_grad : {true, false}) {
    CAPTURE(with_grad);
    gpu::DeviceBuffer<float> loss_d(kRows), grad_d(kRows * width);
    gpu::for_each_row(stream, kRows,
                       kernels::SquaredErrorRow<float>{y_d.data(), target_d.data(), loss_d.data(),
                                                       with_grad ? grad_d.data() : nullptr, scale, width});
    // 1e-5 relative: a sum of squares (no cancellation), FMA-contracted on the device.
    CHECK(worst_relative(to_host(loss_d), loss, kRelative) <= 1e-5);
    if (with_grad) CHECK(worst_relative(to_host(grad_d), grad, kRelative) <= 1e-5);
  }
}

// ---- Context: gemm, affine, column_sums, zero, copy -------------------------

namespace {

// Row-major offsets and sizes from the int shapes that the GEMM takes.
std::size_t at(int row, int ld, int col) {
  return static_cast<std::size_t>(row) * static_cast<std::size_t>(ld) + static_cast<std::size_t>(col);
}
std::size_t elems(int rows, int cols) { return at(rows, cols, 0); }

// The row-major matrix `rows` x `cols` with row stride ld, its padding filled
// with a sentinel so that writes outside the matrix show.
constexpr float kSentinel = 12345.0f;
std::vector<float> padded(int rows, int cols, int ld, unsigned seed) {
  auto v = uniform(elems(rows, ld), -1.0f, 1.0f, seed);
  for (int r = 0; r < rows; ++r)
    for (int c = cols; c < ld; ++c) v[at(r, ld, c)] = kSentinel;
  return v;
}

void check_gemm(gpu::Context& ctx, bool ta, bool tb, int m, int n, int k, float alpha, float beta, double tolerance) {
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(beta);
  // op(A) is m x k: A is stored m x k, or k x m when transposed; likewise B.
  // Every leading dimension is padded by 3, so strides are really used.
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int lda = a_cols + 3, ldb = b_cols + 3, ldc = n + 3;
  const auto a = padded(a_rows, a_cols, lda, 61), b = padded(b_rows, b_cols, ldb, 62);
  const auto c0 = padded(m, n, ldc, 63);
  auto want = c0;
  host::gemm<float>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, want.data(), ldc);

  const auto a_d = to_device(a), b_d = to_device(b);
  auto c_d = to_device(c0);
  ctx.gemm<float>(ta, tb, m, n, k, alpha, a_d.data(), lda, b_d.data(), ldb, beta, c_d.data(), ldc);
  ctx.synchronize();
  const auto got = to_host(c_d);

  // Scale of C(i, j): |alpha| sum_p |op(A)(i, p)| |op(B)(p, j)| + |beta C0(i, j)|,
  // the bound of a float GEMM's rounding error divided by k * eps.
  std::vector<double> floor(got.size(), 1.0);
  std::size_t padding_changed = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = std::abs(double(beta) * c0[at(i, ldc, j)]);
      for (int p = 0; p < k; ++p) {
        const float av = ta ? a[at(p, lda, i)] : a[at(i, lda, p)];
        const float bv = tb ? b[at(j, ldb, p)] : b[at(p, ldb, j)];
        s += std::abs(double(alpha) * av * bv);
      }
      floor[at(i, ldc, j)] = std::max(s, 1e-30);
    }
    for (int j = n; j < ldc; ++j) padding_changed += got[at(i, ldc, j)] != kSentinel;
  }
  CHECK(worst_relative(got, want, floor) <= tolerance);
  CHECK(padding_changed == 0);  // exact: C's padding is never written
}

// Scale of y(r, j) = Act(x w + b): sum_p |x(r, p) w(p, j)| + |b(j)|, at least 1.
// Linear and Relu are 1-Lipschitz and Sigmoid 1/4, so the bound carries over.
std::vector<double> affine_scale(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                                 int rows, int in, int out) {
  std::vector<double> s(elems(rows, out));
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      double sum = std::abs(double(b[static_cast<std::size_t>(j)]));
      for (int p = 0; p < in; ++p)
        sum += std::abs(double(x[at(r, in, p)]) * w[at(p, out, j)]);
      s[at(r, out, j)] = std::max(sum, 1.0);
    }
  return s;
}

// Where check_affine puts its device pointers: all at an aligned start; all
// one float past it (the bias too, so Linear and Relu take the unfused path:
// the fused epilogue needs a 16-byte aligned bias, see gpu::Blas::affine);
// or x, w and y one float past it but the bias aligned, so the fused
// cuBLASLt matmul runs with 4-byte aligned operands (its heuristic must pick
// an algorithm for that alignment).
enum class Placement { kAligned, kAllMisaligned, kOperandsMisaligned };

// Runs affine with the pointers placed as `placement` says.
template <class Act>
void check_affine(gpu::Context& ctx, int rows, int in, int out, Placement placement, double tolerance,
                  unsigned seed) {
  const bool misaligned = placement != Placement::kAligned;
  CAPTURE(Act::kName);
  CAPTURE(rows);
  CAPTURE(in);
  CAPTURE(out);
  CAPTURE(static_cast<int>(placement));
  const auto x = uniform(elems(rows, in), -1.0f, 1.0f, seed);
  const auto w = uniform(elems(in, out), -0.5f, 0.5f, seed + 1);
  const auto b = uniform(static_cast<std::size_t>(out), -0.5f, 0.5f, seed + 2);
  std::vector<float> want(elems(rows, out));
  host::Context host_ctx;
  host_ctx.affine<Act, float>(x.data(), w.data(), b.data(), want.data(), rows, in, out);

  const std::size_t shift = misaligned ? 1 : 0;
  const auto shifted = [&](const std::vector<float>& v) {
    std::vector<float> s(v.size() + shift, -7.0f);
    std::copy(v.begin(), v.end(), s.begin() + static_cast<std::ptrdiff_t>(shift));
    return s;
  };
  const std::size_t bias_shift = placement == Placement::kAllMisaligned ? 1 : 0;
  const auto x_d = to_device(shifted(x)), w_d = to_device(shifted(w));
  const auto b_d = to_device(bias_shift ? shifted(b) : b);  // a device allocation starts 256-byte aligned
  auto y_d = to_device(std::vector<float>(want.size() + shift, kSentinel));
  ctx.affine<Act, float>(x_d.data() + shift, w_d.data() + shift, b_d.data() + bias_shift, y_d.data() + shift, rows,
                         in, out);
  ctx.synchronize();
  auto got = to_host(y_d);
  if (misaligned) CHECK(got[0] == kSentinel);  // exact: nothing before y is written
  got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(shift));
  CHECK(worst_relative(got, want, affine_scale(x, w, b, rows, in, out)) <= tolerance);
}

template <class Act>
void check_affine_shapes(gpu::Context& ctx, double tolerance) {
  check_affine<Act>(ctx, 67, 45, 29, Placement::kAligned, tolerance, 71);
  check_affine<Act>(ctx, 67, 45, 29, Placement::kAligned, tolerance, 74);         // the cached plan, new data
  check_affine<Act>(ctx, 67, 45, 29, Placement::kAllMisaligned, tolerance, 77);   // same shape, unfused
  check_affine<Act>(ctx, 67, 45, 29, Placement::kOperandsMisaligned, tolerance, 78);  // fused, 4-byte operands
  check_affine<Act>(ctx, 256, 784, 128, Placement::kAligned, tolerance, 80);
  check_affine<Act>(ctx, 256, 784, 128, Placement::kOperandsMisaligned, tolerance, 81);
  check_affine<Act>(ctx, 5, 1, 3, Placement::kAligned, tolerance, 83);
  check_affine<Act>(ctx, 5, 1, 3, Placement::kOperandsMisaligned, tolerance, 84);
  check_affine<Act>(ctx, 4, 0, 6, Placement::kAligned, tolerance, 86);  // in = 0: y = Act(b)
}

}  // namespace

TEST_CASE("Context::gemm equals host::gemm for every transpose, odd shapes and padded strides") {
  gpu::Context ctx(0);
  REQUIRE_FALSE(ctx.blas().tf32());
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f, 0.3f}) {
        // 1e-4 relative to sum |alpha a b| + |beta c| (FP32 needs ~k * 6e-8).
        check_gemm(ctx, ta, tb, 37, 53, 29, 0.7f, beta, 1e-4);
        check_gemm(ctx, ta, tb, 1, 1, 1, 1.0f, beta, 1e-4);
        check_gemm(ctx, ta, tb, 64, 3, 300, -1.5f, beta, 1e-4);
      }
}

TEST_CASE("Context::gemm with TF32 stays within TF32's rounding") {
  gpu::Context ctx(0);
  ctx.set_tf32(true);
  CHECK(ctx.blas().tf32());
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      // 5e-2 relative to sum |alpha a b| + |beta c|: TF32 keeps a 10-bit
      // mantissa of each input (error <= 2^-10 each, ~2e-3 per product).
      check_gemm(ctx, ta, tb, 37, 53, 29, 0.7f, 0.3f, 5e-2);
}

TEST_CASE("Context::gemm with k = 0 scales C by beta, with m = 0 or n = 0 does nothing") {
  gpu::Context ctx(0);
  const std::vector<float> c0 = {1, 2, 3, 4, 5, 6};
  SUBCASE("beta = 0.5") {
    auto c = to_device(c0);
    ctx.gemm<float>(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 0.5f, c.data(), 3);
    CHECK(to_host(c) == std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3});  // exact: halving
  }
  SUBCASE("beta = 0 clears C without reading it") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto c = to_device(std::vector<float>(6, nan));
    ctx.gemm<float>(true, true, 2, 3, 0, 1.0f, nullptr, 2, nullptr, 0, 0.0f, c.data(), 3);
    CHECK(to_host(c) == std::vector<float>(6, 0.0f));
  }
  SUBCASE("m = 0 and n = 0") {
    auto c = to_device(c0);
    ctx.gemm<float>(false, false, 0, 3, 4, 1.0f, nullptr, 4, nullptr, 3, 0.0f, c.data(), 3);
    ctx.gemm<float>(false, false, 2, 0, 4, 1.0f, nullptr, 4, nullptr, 1, 0.0f, c.data(), 1);
    CHECK(to_host(c) == c0);
  }
}

TEST_CASE("Context::affine equals host::Context::affine (FP32)") {
  gpu::Context ctx(0);
  // 1e-4 relative to sum |x w| + |b| (FP32 needs ~in * 6e-8).
  check_affine_shapes<Linear>(ctx, 1e-4);
  check_affine_shapes<Relu>(ctx, 1e-4);
  check_affine_shapes<Sigmoid>(ctx, 1e-4);
  check_affine_shapes<Tanh>(ctx, 1e-4);
}

TEST_CASE("Context::affine with TF32 stays within TF32's rounding") {
  gpu::Context ctx(0);
  ctx.set_tf32(true);
  // 5e-2 relative to sum |x w| + |b|: TF32 keeps a 10-bit mantissa of x and w.
  check_affine_shapes<Linear>(ctx, 5e-2);
  check_affine_shapes<Relu>(ctx, 5e-2);
  check_affine_shapes<Sigmoid>(ctx, 5e-2);
}

TEST_CASE("Context::affine with rows = 0 writes nothing") {
  gpu::Context ctx(0);
  const auto w = to_device(std::vector<float>(12, 1.0f)), b = to_device(std::vector<float>(3, 1.0f));
  auto y = to_device(std::vector<float>(3, kSentinel));
  ctx.affine<Relu, float>(nullptr, w.data(), b.data(), y.data(), 0, 4, 3);
  ctx.affine<Sigmoid, float>(nullptr, w.data(), b.data(), y.data(), 0, 4, 3);
  ctx.synchronize();
  CHECK(to_host(y) == std::vector<float>(3, kSentinel));
}

TEST_CASE("affine and gemm replay from a CUDA graph once their shapes are planned") {
  gpu::Context ctx(0);
  const int rows = 32, in = 20, out = 10;
  const auto x = uniform(rows * in, -1.0f, 1.0f, 91), w = uniform(in * out, -0.5f, 0.5f, 92);
  const auto b = uniform(out, -0.5f, 0.5f, 93);
  std::vector<float> want(rows * out), want_t(in * out, 0.0f);
  host::Context host_ctx;
  host_ctx.affine<Relu, float>(x.data(), w.data(), b.data(), want.data(), rows, in, out);
  // dw = x^T y: Dense's weight gradient shape.
  host_ctx.gemm<float>(true, false, in, out, rows, 1.0f, x.data(), in, want.data(), out, 0.0f, want_t.data(), out);

  const auto x_d = to_device(x), w_d = to_device(w), b_d = to_device(b);
  gpu::DeviceBuffer<float> y_d(want.size()), dw_d(want_t.size());
  const auto step = [&] {
    ctx.affine<Relu, float>(x_d.data(), w_d.data(), b_d.data(), y_d.data(), rows, in, out);
    ctx.gemm<float>(true, false, in, out, rows, 1.0f, x_d.data(), in, y_d.data(), out, 0.0f, dw_d.data(), out);
  };
  step();  // plans the shapes (the cuBLASLt heuristic runs here, outside the capture)
  ctx.synchronize();
  ctx.zero(y_d.data(), y_d.size());
  ctx.zero(dw_d.data(), dw_d.size());
  gpu::Graph graph;
  graph.capture(ctx.stream(), step);
  REQUIRE(graph.ready());
  graph.launch(ctx.stream());
  ctx.synchronize();
  // 1e-4 relative to max(|expected|, 1), values O(1)-O(10).
  CHECK(worst_relative(to_host(y_d), want, 1.0) <= 1e-4);
  CHECK(worst_relative(to_host(dw_d), want_t, 1.0) <= 1e-4);
}

TEST_CASE("Context::column_sums equals host::Context::column_sums, and is 0 for no rows") {
  gpu::Context ctx(0);
  const int rows = 123, cols = 77;
  const auto m = uniform(static_cast<std::size_t>(rows) * cols, -1.0f, 1.0f, 101);
  std::vector<float> want(cols);
  host::Context().column_sums<float>(m.data(), rows, cols, want.data());
  const auto m_d = to_device(m);
  auto out_d = to_device(std::vector<float>(cols, kSentinel));
  ctx.column_sums<float>(m_d.data(), rows, cols, out_d.data());
  // 1e-6 relative to max(|sum|, 1): both add the rows in the same order, so
  // they should agree exactly; the tolerance only allows a different compiler.
  CHECK(worst_relative(to_host(out_d), want, 1.0) <= 1e-6);

  ctx.column_sums<float>(m_d.data(), 0, cols, out_d.data());
  CHECK(to_host(out_d) == std::vector<float>(cols, 0.0f));
}

TEST_CASE("Context::sum_to equals the host's double sum (<= 1e-6 relative) and is the same bits on every run") {
  gpu::Context ctx(0);
  host::Context host_ctx;
  // Sizes below, at and around the block of 256 threads, and a long slice.
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(255), std::size_t(256), std::size_t(257),
                        std::size_t(1000), std::size_t(100003)}) {
    CAPTURE(n);
    for (bool mixed_signs : {false, true}) {
      CAPTURE(mixed_signs);
      const auto v = uniform(n, mixed_signs ? -1.0f : 0.0f, 1.0f, 121 + static_cast<unsigned>(n));
      float want = 0;
      host_ctx.sum_to<float>(v.data(), n, &want);
      double magnitude = 0;
      for (float x : v) magnitude += std::abs(double(x));
      const auto v_d = to_device(v);
      auto out_d = to_device(std::vector<float>(3, kSentinel));
      for (std::size_t run = 0; run < 3; ++run) ctx.sum_to<float>(v_d.data(), n, out_d.data() + run);
      const auto got = to_host(out_d);
      // 1e-6 relative to the sum, or to sum |v| where the signs cancel: both
      // add in double and round once, so they differ by at most an ulp.
      CHECK(worst_relative({got[0]}, {want}, std::max(magnitude, 1e-30)) <= 1e-6);
      CHECK(std::memcmp(&got[0], &got[1], sizeof(float)) == 0);  // exact: a fixed order of additions
      CHECK(std::memcmp(&got[0], &got[2], sizeof(float)) == 0);
      if (n == 0) CHECK(got[0] == 0.0f);
    }
  }
}

TEST_CASE("Context::zero and Context::copy work on the context's stream") {
  gpu::Context ctx(0);
  const auto src = uniform(1000, -1.0f, 1.0f, 111);
  const auto src_d = to_device(src);
  gpu::DeviceBuffer<float> dst_d(1000);
  ctx.copy(dst_d.data(), src_d.data(), src.size());
  CHECK(to_host(dst_d) == src);  // exact: a copy
  ctx.zero(dst_d.data(), 500);
  auto want = src;
  std::fill(want.begin(), want.begin() + 500, 0.0f);
  CHECK(to_host(dst_d) == want);
  ctx.copy(dst_d.data(), src_d.data(), 0);
  ctx.zero(dst_d.data(), 0);
  ctx.synchronize();
}

// ---- devices ---------------------------------------------------------------

TEST_CASE("visible_devices and all_visible_devices agree with the runtime") {
  int count = 0;
  LOCKSTEP_CUDA_CHECK(cudaGetDeviceCount(&count));
  CHECK(gpu::visible_devices() == count);
  const auto all = gpu::all_visible_devices();
  REQUIRE(all.size() == static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) CHECK(all[static_cast<std::size_t>(i)] == i);
  const auto info = gpu::device_info(0);
  CHECK(info.index == 0);
  CHECK_FALSE(info.name.empty());
  CHECK(info.memory_bytes > 0);
  CHECK(info.compute_capability() == std::to_string(info.major) + "." + std::to_string(info.minor));
}

TEST_CASE("check_devices names a device that does not exist, a duplicate and an empty list") {
  const int count = gpu::visible_devices();
  const std::string visible = std::to_string(count) + (count == 1 ? " CUDA device is visible" : " CUDA devices are visible");
  CHECK_THROWS_WITH_AS(gpu::check_devices({count}), doctest::Contains("does not exist"), Error);
  CHECK_THROWS_WITH_AS(gpu::check_devices({count}), doctest::Contains(visible.c_str()), Error);
  const std::string which = "device " + std::to_string(count) + " does not exist";
  CHECK_THROWS_WITH_AS(gpu::check_devices({0, count}), doctest::Contains(which.c_str()), Error);
  CHECK_THROWS_WITH_AS(gpu::check_devices({-1}), doctest::Contains("device -1 does not exist"), Error);
  CHECK_THROWS_WITH_AS(gpu::check_devices({0, 0}), doctest::Contains("device 0 is listed more than once"), Error);
  // The copy-based collectives let replicas share a GPU.
  CHECK(gpu::check_devices({0, 0}, gpu::Heterogeneous::kError, nullptr, true).size() == 2);
  CHECK_THROWS_WITH_AS(gpu::check_devices({}), doctest::Contains("the device list is empty"), Error);
  CHECK_THROWS_WITH_AS(gpu::Context{count}, doctest::Contains(which.c_str()), Error);
  CHECK_THROWS_WITH_AS(gpu::device_info(count), doctest::Contains(which.c_str()), Error);
}

TEST_CASE("check_devices returns the devices and describe_placement names each replica's GPU") {
  std::ostringstream log;
  // kAllow: a machine with mixed GPUs passes too, with a warning in `log`.
  const auto infos = gpu::check_devices(gpu::all_visible_devices(), gpu::Heterogeneous::kAllow, &log);
  REQUIRE(infos.size() == static_cast<std::size_t>(gpu::visible_devices()));
  const std::string placement = gpu::describe_placement(infos);
  const std::string first = "replica 0 -> /GPU:0 " + infos[0].name + " (compute " + infos[0].compute_capability() + ", ";
  CHECK(placement.find(first) == 0);
  CHECK(placement.find(" GiB)\n") != std::string::npos);
  CHECK(std::count(placement.begin(), placement.end(), '\n') == static_cast<long>(infos.size()));
}

TEST_CASE("devices of different compute capabilities are an Error, or a warning with Heterogeneous::kAllow") {
  // Made-up devices: the check needs no second GPU.
  const std::vector<gpu::DeviceInfo> mixed = {{0, "NVIDIA H200", 9, 0, std::size_t(150) << 30},
                                               {1, "NVIDIA A100-SXM4-80GB", 8, 0, std::size_t(80) << 30}};
  CHECK_THROWS_WITH_AS(gpu::detail::check_same_capability(mixed, gpu::Heterogeneous::kError, nullptr),
                       doctest::Contains("GPU 0 (NVIDIA H200, compute 9.0), GPU 1 (NVIDIA A100-SXM4-80GB, compute 8.0)"),
                       Error);
  CHECK_THROWS_WITH_AS(gpu::detail::check_same_capability(mixed, gpu::Heterogeneous::kError, nullptr),
                       doctest::Contains("Heterogeneous::kAllow"), Error);
  std::ostringstream log;
  gpu::detail::check_same_capability(mixed, gpu::Heterogeneous::kAllow, &log);
  CHECK(log.str().find("warning") != std::string::npos);
  CHECK(log.str().find("compute 8.0") != std::string::npos);
  std::ostringstream quiet;
  gpu::detail::check_same_capability({mixed[0], mixed[0]}, gpu::Heterogeneous::kError, &quiet);
  CHECK(quiet.str().empty());
  CHECK(gpu::describe_placement(mixed) ==
        "replica 0 -> /GPU:0 NVIDIA H200 (compute 9.0, 150.0 GiB)\n"
        "replica 1 -> /GPU:1 NVIDIA A100-SXM4-80GB (compute 8.0, 80.0 GiB)\n");
}
