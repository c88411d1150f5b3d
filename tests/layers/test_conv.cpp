// Conv2D, the pooling layers and Reshape: shapes and padding against
// TensorFlow's rules, forward and backward against naive loops written here
// (the built-in im2col path in double and float, oneDNN's primitives where the
// build has them), and finite-difference gradients through whole models.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_check.hpp"
#include "lockstep/lockstep.hpp"

using namespace lockstep;
using testing::check_gradients;

namespace {

template <class T>
std::vector<T> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(2.0 * Philox4x32::uniform(seed, 0, i) - 1.0);
  return v;
}

// The input value at (n, ih, iw, c) or 0 in the padding, and its index (or -1).
long long input_index(const Window2D& g, int n, int ih, int iw, int c) {
  if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) return -1;
  return ((static_cast<long long>(n) * g.in_h + ih) * g.in_w + iw) * g.in_c + c;
}

// f(n, oh, ow, co, kh, kw, ci, input index or -1, output index, kernel index) for every term of the convolution.
template <class F>
void for_each_term(const Window2D& g, int rows, F&& f) {
  for (int n = 0; n < rows; ++n)
    for (int oh = 0; oh < g.out_h; ++oh)
      for (int ow = 0; ow < g.out_w; ++ow)
        for (int co = 0; co < g.out_c; ++co)
          for (int kh = 0; kh < g.kernel_h; ++kh)
            for (int kw = 0; kw < g.kernel_w; ++kw)
              for (int ci = 0; ci < g.in_c; ++ci) {
                const long long in = input_index(g, n, oh * g.stride_h - g.pad_top + kh,
                                                 ow * g.stride_w - g.pad_left + kw, ci);
                const long long out = ((static_cast<long long>(n) * g.out_h + oh) * g.out_w + ow) * g.out_c + co;
                const long long k = ((static_cast<long long>(kh) * g.kernel_w + kw) * g.in_c + ci) * g.out_c + co;
                f(in, out, k);
              }
}

// The direct convolution, in double: y = relu?(conv(x, kernel) + bias).
template <class T>
std::vector<double> naive_forward(const Window2D& g, const std::vector<T>& x, const std::vector<T>& kernel,
                                  const std::vector<T>& bias, int rows, bool relu) {
  std::vector<double> y(static_cast<std::size_t>(rows) * g.out_size(), 0.0);
  for_each_term(g, rows, [&](long long in, long long out, long long k) {
    if (in >= 0) y[static_cast<std::size_t>(out)] += double(x[static_cast<std::size_t>(in)]) * kernel[static_cast<std::size_t>(k)];
  });
  for (std::size_t i = 0; i < y.size(); ++i) {
    y[i] += bias[i % static_cast<std::size_t>(g.out_c)];
    if (relu) y[i] = std::max(y[i], 0.0);
  }
  return y;
}

struct NaiveGrads {
  std::vector<double> dx, dkernel, dbias;
};
template <class T>
NaiveGrads naive_backward(const Window2D& g, const std::vector<T>& x, const std::vector<T>& kernel,
                          const std::vector<T>& dy, int rows) {
  NaiveGrads r{std::vector<double>(x.size(), 0.0), std::vector<double>(g.kernel_size(), 0.0),
               std::vector<double>(static_cast<std::size_t>(g.out_c), 0.0)};
  for_each_term(g, rows, [&](long long in, long long out, long long k) {
    if (in < 0) return;
    const double d = dy[static_cast<std::size_t>(out)];
    r.dx[static_cast<std::size_t>(in)] += d * kernel[static_cast<std::size_t>(k)];
    r.dkernel[static_cast<std::size_t>(k)] += d * x[static_cast<std::size_t>(in)];
  });
  for (std::size_t i = 0; i < dy.size(); ++i) r.dbias[i % static_cast<std::size_t>(g.out_c)] += dy[i];
  return r;
}

// The largest difference, relative where b is larger than 1 (a kernel
// gradient of the largest geometry sums 7000 float products).
template <class A, class B>
double max_difference(const std::vector<A>& a, const std::vector<B>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e30;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / std::max(1.0, std::abs(double(b[i]))));
  return worst;
}

// The geometries the forward and backward checks run: Valid and Same,
// strides 1 and 2, square and rectangular kernels, odd sizes (Same's extra
// padding at the bottom and right), a 1x1 kernel, a kernel as large as the
// input, and one whose 3 samples span two of the built-in path's chunks
// (3 x 62 x 38 output pixels, chunks of 65536 / (9 + 2) = 5957).
std::vector<Window2D> geometries() {
  return {window::make(6, 5, 3, 4, 3, 3, 1, 1, false), window::make(6, 5, 3, 4, 3, 3, 1, 1, true),
          window::make(7, 6, 2, 3, 3, 2, 2, 2, false), window::make(7, 6, 2, 3, 3, 2, 2, 2, true),
          window::make(5, 8, 3, 2, 2, 3, 2, 1, true),  window::make(4, 4, 3, 5, 1, 1, 1, 1, false),
          window::make(4, 4, 2, 3, 4, 4, 1, 1, false), window::make(9, 9, 1, 4, 5, 5, 2, 2, true),
          window::make(64, 40, 1, 2, 3, 3, 1, 1, false)};
}

// The conv2d calls of one implementation, for the comparisons.
struct Builtin {
  template <class Act, class T>
  static void forward(const Window2D& g, const T* x, const T* k, const T* b, T* y, int rows) {
    host::builtin::conv2d_forward<Act>(g, x, k, b, y, rows);
  }
  template <class T>
  static void backward(const Window2D& g, const T* x, const T* k, const T* dy, T* dx, T* dk, T* db, int rows) {
    std::vector<T> own(dy, dy + static_cast<std::size_t>(rows) * g.out_size());
    host::builtin::conv2d_backward<Linear>(g, x, static_cast<const T*>(nullptr), k, own.data(), dx, dk, db, rows);
  }
};
#if defined(LOCKSTEP_HAVE_ONEDNN)
struct OneDnn {
  template <class Act>
  static void forward(const Window2D& g, const float* x, const float* k, const float* b, float* y, int rows) {
    host::onednn::conv2d_forward<Act>(g, x, k, b, y, rows);
  }
  static void backward(const Window2D& g, const float* x, const float* k, const float* dy, float* dx, float* dk,
                       float* db, int rows) {
    host::onednn::conv2d_backward(g, x, k, dy, dx, dk, db, rows);
  }
};
#endif

// Forward with and without bias and ReLU, and backward with and without dx
// and dbias, of implementation Impl in T, against the naive loops; then
// host::Context's backward with ReLU's derivative applied inside, against
// the naive backward of dy masked where the output is 0.
template <class Impl, class T>
void check_against_naive(double tolerance) {
  const int rows = 3;
  for (const Window2D& g : geometries()) {
    CAPTURE(g.in_h);
    CAPTURE(g.kernel_h);
    CAPTURE(g.stride_h);
    CAPTURE(g.pad_top + g.pad_bottom);
    const auto x = uniform<T>(static_cast<std::size_t>(rows) * g.in_size(), 1);
    const auto kernel = uniform<T>(g.kernel_size(), 2);
    const auto bias = uniform<T>(static_cast<std::size_t>(g.out_c), 3);
    const std::vector<T> no_bias(static_cast<std::size_t>(g.out_c), T(0));
    std::vector<T> y(static_cast<std::size_t>(rows) * g.out_size(), T(-7));
    Impl::template forward<Linear>(g, x.data(), kernel.data(), bias.data(), y.data(), rows);
    CHECK(max_difference(y, naive_forward(g, x, kernel, bias, rows, false)) < tolerance);
    Impl::template forward<Relu>(g, x.data(), kernel.data(), bias.data(), y.data(), rows);
    CHECK(max_difference(y, naive_forward(g, x, kernel, bias, rows, true)) < tolerance);
    Impl::template forward<Linear>(g, x.data(), kernel.data(), static_cast<const T*>(nullptr), y.data(), rows);
    CHECK(max_difference(y, naive_forward(g, x, kernel, no_bias, rows, false)) < tolerance);

    const auto dy = uniform<T>(y.size(), 4);
    const NaiveGrads want = naive_backward(g, x, kernel, dy, rows);
    std::vector<T> dx(x.size(), T(5)), dk(g.kernel_size(), T(5)), db(bias.size(), T(5));  // overwritten, not added to
    Impl::backward(g, x.data(), kernel.data(), dy.data(), dx.data(), dk.data(), db.data(), rows);
    CHECK(max_difference(dx, want.dx) < tolerance);
    CHECK(max_difference(dk, want.dkernel) < tolerance);
    CHECK(max_difference(db, want.dbias) < tolerance);
    std::fill(dk.begin(), dk.end(), T(5));
    Impl::backward(g, x.data(), kernel.data(), dy.data(), static_cast<T*>(nullptr), dk.data(),
                   static_cast<T*>(nullptr), rows);
    CHECK(max_difference(dk, want.dkernel) < tolerance);

    Impl::template forward<Relu>(g, x.data(), kernel.data(), bias.data(), y.data(), rows);
    std::vector<T> masked(dy.size());
    for (std::size_t i = 0; i < dy.size(); ++i) masked[i] = y[i] > T(0) ? dy[i] : T(0);
    const NaiveGrads relu = naive_backward(g, x, kernel, masked, rows);
    host::Context ctx;
    for (bool with_dx : {true, false}) {  // without dx: a first layer, whose input needs no gradient
      auto d = dy;
      std::fill(dk.begin(), dk.end(), T(5));
      ctx.conv2d_activation_backward<Relu>(g, x.data(), y.data(), kernel.data(), d.data(),
                                           with_dx ? dx.data() : static_cast<T*>(nullptr), dk.data(), db.data(), rows);
      if (with_dx) CHECK(max_difference(dx, relu.dx) < tolerance);
      CHECK(max_difference(dk, relu.dkernel) < tolerance);
      CHECK(max_difference(db, relu.dbias) < tolerance);
    }
  }
}

}  // namespace

TEST_CASE("Window2D: TensorFlow's output sizes and Same padding (the odd pad at the bottom and right)") {
  static_assert(window::make(28, 28, 1, 32, 3, 3, 1, 1, false).out_h == 26);
  static_assert(window::make(26, 26, 32, 32, 2, 2, 2, 2, false).out_h == 13);
  static_assert(window::make(11, 11, 64, 64, 2, 2, 2, 2, false).out_w == 5);  // floor: the last row is dropped
  constexpr Window2D same = window::make(6, 5, 1, 1, 3, 3, 2, 2, true);  // ceil(6/2) = 3, ceil(5/2) = 3
  static_assert(same.out_h == 3 && same.out_w == 3);
  static_assert(same.pad_top == 0 && same.pad_bottom == 1);  // total (3-1)*2 + 3 - 6 = 1
  static_assert(same.pad_left == 1 && same.pad_right == 1);  // total (3-1)*2 + 3 - 5 = 2
  constexpr Window2D wide = window::make(4, 4, 1, 1, 1, 1, 3, 3, true);  // stride larger than the kernel: no padding
  static_assert(wide.out_h == 2 && wide.pad_top == 0 && wide.pad_bottom == 0);
  static_assert(window::consistent(same) && window::consistent(wide));
  Window2D broken = same;
  broken.out_h = 4;
  CHECK_FALSE(window::consistent(broken));
}

TEST_CASE("the built-in convolution equals a naive direct convolution - forward and backward - double and float") {
  check_against_naive<Builtin, double>(1e-12);
  check_against_naive<Builtin, float>(2e-5);
}

// im2col's rows are the patches, value for value, for every chunk of pixels
// [p0, p1); it writes nothing past kIm2colSlack values after the last row
// (its short-run copies write over what comes next).
template <class T>
void check_im2col() {
  const int rows = 3;
  std::vector<Window2D> all = geometries();
  all.push_back(window::make(5, 6, 16, 2, 3, 3, 1, 1, true));  // runs of 48 and 32 values: memcpy's
  all.push_back(window::make(5, 6, 16, 2, 2, 2, 1, 1, false));
  for (const Window2D& g : all) {
    CAPTURE(g.in_h);
    CAPTURE(g.in_c);
    CAPTURE(g.kernel_h);
    const auto x = uniform<T>(static_cast<std::size_t>(rows) * g.in_size(), 1);
    const std::size_t pixels = static_cast<std::size_t>(rows) * static_cast<std::size_t>(g.out_h * g.out_w);
    const std::size_t patch = g.patch_size(), slack = host::detail::kIm2colSlack<T>;
    for (std::size_t p0 : {std::size_t{0}, pixels / 3, pixels - 1})
      for (std::size_t p1 : {pixels / 2 + 1, pixels}) {
        if (p1 <= p0) continue;
        std::vector<T> cols((p1 - p0) * patch + slack + 8, T(7));
        host::detail::im2col(g, x.data(), p0, p1, cols.data());
        std::vector<T> want((p1 - p0) * patch);
        for (std::size_t p = p0; p < p1; ++p) {
          const int n = static_cast<int>(p / static_cast<std::size_t>(g.out_h * g.out_w));
          const int oh = static_cast<int>(p / static_cast<std::size_t>(g.out_w)) % g.out_h;
          const int ow = static_cast<int>(p % static_cast<std::size_t>(g.out_w));
          std::size_t j = (p - p0) * patch;
          for (int kh = 0; kh < g.kernel_h; ++kh)
            for (int kw = 0; kw < g.kernel_w; ++kw)
              for (int c = 0; c < g.in_c; ++c, ++j) {
                const long long in = input_index(g, n, oh * g.stride_h - g.pad_top + kh,
                                                 ow * g.stride_w - g.pad_left + kw, c);
                want[j] = in < 0 ? T(0) : x[static_cast<std::size_t>(in)];
              }
        }
        CHECK(std::equal(want.begin(), want.end(), cols.begin()));
        CHECK(std::all_of(cols.begin() + static_cast<std::ptrdiff_t>(want.size() + slack), cols.end(),
                          [](T v) { return v == T(7); }));
      }
  }
}

TEST_CASE("im2col gives every patch's values - padded and inside windows - short and long runs - any chunk") {
  check_im2col<float>();
  check_im2col<double>();
}

#if defined(LOCKSTEP_HAVE_ONEDNN)
TEST_CASE("oneDNN's convolution primitives equal the naive convolution and the built-in path") {
  const host::ConvPath before = host::conv_path();
  host::set_conv_path(host::ConvPath::kOneDnn);  // host::Context's fused backward on oneDNN too
  // 1e-4, not the built-in path's 2e-5: oneDNN picks its kernel (and so its
  // summation order) by instruction set, and on an AVX-512 EPYC the kernel
  // gradient of the largest geometry (7068 float products per value) was off
  // by 3.2e-5 relative; a wrong index or tap still gives differences near 1.
  check_against_naive<OneDnn, float>(1e-4);
  host::set_conv_path(before);
  // The two paths agree on a layer of the Keras convnet's shape, batch 5 (and then 4: a second cached shape).
  constexpr Window2D g = window::make(13, 13, 32, 64, 3, 3, 1, 1, false);
  for (int rows : {5, 4, 5}) {
    const auto x = uniform<float>(5 * g.in_size(), 6);
    const auto kernel = uniform<float>(g.kernel_size(), 7);
    const auto bias = uniform<float>(64, 8);
    const auto dy = uniform<float>(5 * g.out_size(), 9);
    std::vector<float> y1(dy.size()), y2(dy.size()), dx1(x.size()), dx2(x.size()), dk1(kernel.size()),
        dk2(kernel.size()), db1(64), db2(64);
    Builtin::forward<Relu>(g, x.data(), kernel.data(), bias.data(), y1.data(), rows);
    OneDnn::forward<Relu>(g, x.data(), kernel.data(), bias.data(), y2.data(), rows);
    CHECK(max_difference(y1, y2) < 1e-4);
    Builtin::backward(g, x.data(), kernel.data(), dy.data(), dx1.data(), dk1.data(), db1.data(), rows);
    OneDnn::backward(g, x.data(), kernel.data(), dy.data(), dx2.data(), dk2.data(), db2.data(), rows);
    CHECK(max_difference(dx1, dx2) < 1e-4);
    CHECK(max_difference(dk1, dk2) < 1e-3);  // sums of 5 * 121 products
    CHECK(max_difference(db1, db2) < 1e-3);
  }
}

TEST_CASE("host::Context runs the path set_conv_path names") {
  using Model = Sequential<Input<8, 8, 2>, Conv2D<4, 3, 3, Strides<1, 1>, Same, Relu>, Flatten, Dense<3>>;
  const Model model{1};
  const auto x = uniform<float>(4 * Model::kInputs, 2);
  host::Context ctx;
  Model::Workspace ws(4);
  const host::ConvPath before = host::conv_path();
  std::vector<std::vector<float>> outputs;
  for (host::ConvPath path : {host::ConvPath::kBuiltin, host::ConvPath::kOneDnn}) {
    host::set_conv_path(path);
    const float* y = Model::forward(ctx, Pass{}, model.parameters().data(), static_cast<float*>(nullptr), x.data(), 4, ws);
    outputs.emplace_back(y, y + 4 * Model::kOutputs);
  }
  host::set_conv_path(before);
  CHECK(max_difference(outputs[0], outputs[1]) < 1e-5);
}
#else
TEST_CASE("set_conv_path(kOneDnn) in a build without oneDNN is an Error") {
  CHECK_THROWS_WITH_AS(host::set_conv_path(host::ConvPath::kOneDnn), doctest::Contains("this build has no oneDNN"),
                       lockstep::Error);
}
#endif

TEST_CASE("a convolution or pooling call with an inconsistent geometry is an Error naming it") {
  Window2D g = window::make(6, 6, 1, 2, 3, 3, 1, 1, false);
  g.out_h = 5;  // Valid gives 4
  std::vector<float> x(36), k(18), y(2 * 5 * 4), dk(18);
  host::Context ctx;
  CHECK_THROWS_WITH_AS(ctx.conv2d_forward<Linear>(g, x.data(), k.data(), static_cast<const float*>(nullptr),
                                                  y.data(), 1),
                       doctest::Contains("conv2d_forward: inconsistent geometry: input 6x6x1"), lockstep::Error);
  CHECK_THROWS_WITH_AS(ctx.conv2d_backward(g, x.data(), k.data(), y.data(), x.data(), dk.data(),
                                           static_cast<float*>(nullptr), 1),
                       doctest::Contains("give no 5x4x2 output"), lockstep::Error);
  Window2D pool = window::make(6, 6, 2, 3, 2, 2, 2, 2, false);  // pooling keeps the channels: 2 in, 3 out
  CHECK_THROWS_WITH_AS(ctx.pool2d_forward(PoolKind::kMax, pool, x.data(), y.data(), 1),
                       doctest::Contains("expected the same count"), lockstep::Error);
}

TEST_CASE("pooling equals naive loops - AveragePooling2D with Same leaves the padding out of the count") {
  // One 3x3 sample, one channel, 2x2 windows with stride 2 and Same padding:
  // windows {0,1,3,4}, {2,5}, {6,7}, {8}. TensorFlow divides by the positions inside.
  constexpr Window2D g = window::make(3, 3, 1, 1, 2, 2, 2, 2, true);
  static_assert(g.out_h == 2 && g.pad_bottom == 1 && g.pad_right == 1 && g.pad_top == 0);
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<double> y(4), dx(9);
  host::Context ctx;
  ctx.pool2d_forward(PoolKind::kAverage, g, x.data(), y.data(), 1);
  CHECK(y == std::vector<double>{3.0, 4.5, 7.5, 9.0});
  ctx.pool2d_forward(PoolKind::kMax, g, x.data(), y.data(), 1);
  CHECK(y == std::vector<double>{5, 6, 8, 9});
  const std::vector<double> dy{1, 2, 3, 4};
  ctx.pool2d_backward(PoolKind::kMax, g, x.data(), y.data(), dy.data(), dx.data(), 1);
  CHECK(dx == std::vector<double>{0, 0, 0, 0, 1, 2, 0, 3, 4});
  ctx.pool2d_forward(PoolKind::kAverage, g, x.data(), y.data(), 1);
  ctx.pool2d_backward(PoolKind::kAverage, g, x.data(), y.data(), dy.data(), dx.data(), 1);
  CHECK(dx == std::vector<double>{0.25, 0.25, 1, 0.25, 0.25, 1, 1.5, 1.5, 4});
  // Ties: the gradient goes to the first position of the window holding the maximum, once.
  const std::vector<double> flat{0, 0, 0, 0};
  constexpr Window2D one = window::make(2, 2, 1, 1, 2, 2, 2, 2, false);
  std::vector<double> top(1), d(4);
  ctx.pool2d_forward(PoolKind::kMax, one, flat.data(), top.data(), 1);
  const double g1 = 1;
  ctx.pool2d_backward(PoolKind::kMax, one, flat.data(), top.data(), &g1, d.data(), 1);
  CHECK(d == std::vector<double>{1, 0, 0, 0});
}

TEST_CASE("pooling forward and backward equal naive loops - overlapping - gapped and Valid-cropped windows") {
  host::Context ctx;
  const int rows = 2;
  // (5x7, 3 channels): 2x2 stride 2 Valid (the last row and column uncovered),
  // 2x2 stride 3 (gaps between windows), 3x3 stride 2 Same (overlapping), 3x2 stride 1 Same.
  for (const Window2D& g : {window::make(5, 7, 3, 3, 2, 2, 2, 2, false), window::make(5, 7, 3, 3, 2, 2, 3, 3, false),
                            window::make(5, 7, 3, 3, 3, 3, 2, 2, true), window::make(5, 7, 3, 3, 3, 2, 1, 1, true)}) {
    for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
      CAPTURE(g.stride_h);
      CAPTURE(g.kernel_h);
      const auto x = uniform<double>(static_cast<std::size_t>(rows) * g.in_size(), 21);
      const auto dy = uniform<double>(static_cast<std::size_t>(rows) * g.out_size(), 22);
      std::vector<double> want_y(dy.size()), want_dx(x.size(), 0.0);
      for (int n = 0; n < rows; ++n)
        for (int oh = 0; oh < g.out_h; ++oh)
          for (int ow = 0; ow < g.out_w; ++ow)
            for (int c = 0; c < g.in_c; ++c) {
              const auto o = static_cast<std::size_t>(((static_cast<long long>(n) * g.out_h + oh) * g.out_w + ow) * g.out_c + c);
              double best = -1e300, sum = 0;
              long long arg = -1;
              int count = 0;
              for (int kh = 0; kh < g.kernel_h; ++kh)
                for (int kw = 0; kw < g.kernel_w; ++kw) {
                  const long long i = input_index(g, n, oh * g.stride_h - g.pad_top + kh,
                                                  ow * g.stride_w - g.pad_left + kw, c);
                  if (i < 0) continue;
                  const double v = x[static_cast<std::size_t>(i)];
                  if (v > best) best = v, arg = i;
                  sum += v;
                  ++count;
                }
              want_y[o] = kind == PoolKind::kMax ? best : sum / count;
              if (kind == PoolKind::kMax) {
                want_dx[static_cast<std::size_t>(arg)] += dy[o];
                continue;
              }
              for (int kh = 0; kh < g.kernel_h; ++kh)
                for (int kw = 0; kw < g.kernel_w; ++kw) {
                  const long long i = input_index(g, n, oh * g.stride_h - g.pad_top + kh,
                                                  ow * g.stride_w - g.pad_left + kw, c);
                  if (i >= 0) want_dx[static_cast<std::size_t>(i)] += dy[o] / count;
                }
            }
      std::vector<double> y(dy.size()), dx(x.size(), 9.0);  // stale values must not survive
      ctx.pool2d_forward(kind, g, x.data(), y.data(), rows);
      CHECK(max_difference(y, want_y) < 1e-12);
      ctx.pool2d_backward(kind, g, x.data(), y.data(), dy.data(), dx.data(), rows);
      CHECK(max_difference(dx, want_dx) < 1e-12);
    }
  }
}

TEST_CASE("the Keras MNIST convnet: compile-time shapes - Keras' names and shapes - initialiser - saved weights") {
  using Model = Sequential<Input<28, 28, 1>, Conv2D<32, 3, 3, Strides<1, 1>, Valid, Relu>, MaxPooling2D<2>,
                           Conv2D<64, 3, 3, Strides<1, 1>, Valid, Relu>, MaxPooling2D<2>, Flatten, Dropout<50>,
                           Dense<10>>;
  static_assert(std::is_same_v<Model::layer<0>::out_shape, Shape<26, 26, 32>>);
  static_assert(std::is_same_v<Model::layer<1>::out_shape, Shape<13, 13, 32>>);
  static_assert(std::is_same_v<Model::layer<2>::out_shape, Shape<11, 11, 64>>);
  static_assert(std::is_same_v<Model::layer<3>::out_shape, Shape<5, 5, 64>>);
  static_assert(std::is_same_v<Model::layer<4>::out_shape, Shape<1600>>);
  static_assert(Model::kParams == 34826);  // Keras' summary of the example: 320 + 18496 + 16010
  CHECK(Model::kTrainFlopsPerSample ==
        doctest::Approx(4.0 * 26 * 26 * 9 * 32 + 6.0 * 11 * 11 * 288 * 64 + 6.0 * 1600 * 10));
  const std::vector<VariableInfo> vars = Model::variables();
  REQUIRE(vars.size() == 6);
  CHECK(vars[0].name == "conv2d/kernel");
  CHECK(vars[0].shape == std::vector<std::int64_t>{3, 3, 1, 32});
  CHECK(vars[1].name == "conv2d/bias");
  CHECK(vars[1].offset == 288);
  CHECK(vars[2].name == "conv2d_1/kernel");
  CHECK(vars[2].shape == std::vector<std::int64_t>{3, 3, 32, 64});
  CHECK(vars[4].name == "dense/kernel");
  CHECK(Model::layer_names()[1] == "max_pooling2d");
  CHECK(Model::layer_names()[3] == "max_pooling2d_1");
  std::ostringstream table;
  summary(Model{0}, table);  // as Keras prints the example's model
  CHECK(table.str().find(" conv2d (Conv2D)             (None, 26, 26, 32)        320\n") != std::string::npos);
  CHECK(table.str().find(" max_pooling2d (MaxPooling2D (None, 13, 13, 32)        0\n") != std::string::npos);
  CHECK(table.str().find("Total params: 34826 ") != std::string::npos);

  const Model model{4};
  const double limit = std::sqrt(6.0 / (9 * 32 + 9 * 64));  // Glorot: fan_in 3*3*32, fan_out 3*3*64
  double sum_sq = 0;
  for (std::size_t i = 0; i < 18432; ++i) {
    const float w = model.parameters()[vars[2].offset + i];
    CHECK(std::abs(w) <= limit);
    sum_sq += double(w) * w;
  }
  CHECK(sum_sq / 18432 == doctest::Approx(limit * limit / 3).epsilon(0.05));
  for (std::size_t i = 0; i < 64; ++i) CHECK(model.parameters()[vars[3].offset + i] == 0.0f);

  using SameModel = Sequential<Input<7, 5, 3>, Conv2D<4, 3, 3, Strides<2, 2>, lockstep::Same>, AveragePooling2D<3, 3, Strides<1, 1>, lockstep::Same>,
                          GlobalAveragePooling2D, Reshape<2, -1>, Reshape<4>>;
  static_assert(std::is_same_v<SameModel::layer<0>::out_shape, Shape<4, 3, 4>>);
  static_assert(std::is_same_v<SameModel::layer<1>::out_shape, Shape<4, 3, 4>>);
  static_assert(std::is_same_v<SameModel::layer<2>::out_shape, Shape<4>>);
  static_assert(std::is_same_v<SameModel::layer<3>::out_shape, Shape<2, 2>>);
  using NoBias = Sequential<Input<5, 5, 2>, Conv2D<3, 2, 2, Strides<1, 1>, Valid, Linear, false>>;
  static_assert(NoBias::kParams == 2 * 2 * 2 * 3);
  CHECK(NoBias::variables().size() == 1);

  // Saved weights carry the kernels' four axes and load back.
  const std::string path = (std::filesystem::temp_directory_path() / "lockstep_test_conv.safetensors").string();
  save_weights(model, path);
  Model loaded{9};
  load_weights(loaded, path);
  std::filesystem::remove(path);
  CHECK(loaded.parameters() == model.parameters());
}

TEST_CASE("finite-difference gradients: Conv2D with Valid and Same padding - strides 1 and 2 - with and without bias") {
  Pass pass{Mode::kTraining};
  const std::vector<std::int32_t> labels{0, 2, 1};
  // A convolution after another, so the first one's gradient checks the second's dx.
  using Valid1 = Sequential<Input<6, 5, 2>, Conv2D<3, 3, 2, Strides<1, 1>, Valid, Tanh>,
                            Conv2D<2, 2, 2, Strides<1, 1>, Valid, Sigmoid, false>, Flatten, Dense<3>>;
  check_gradients<Valid1, SparseCategoricalCrossentropy>(labels, 3, pass);
  using Same2 = Sequential<Input<7, 6, 2>, Conv2D<3, 3, 3, Strides<2, 2>, Same, Tanh>,
                           Conv2D<2, 3, 2, Strides<2, 1>, Same, Relu>, Flatten, Dense<3>>;
  check_gradients<Same2, SparseCategoricalCrossentropy>(labels, 3, pass);
  using Mixed = Sequential<Input<5, 5, 1>, Conv2D<2, 2, 2, Strides<2, 2>, Valid, Tanh>,
                           Conv2D<3, 1, 1, Strides<1, 1>, Valid, Tanh>, Conv2D<2, 2, 2, Strides<1, 1>, Same>, Flatten,
                           Dense<3>>;
  check_gradients<Mixed, SparseCategoricalCrossentropy>(labels, 3, pass);
}

TEST_CASE("finite-difference gradients: MaxPooling2D - AveragePooling2D - GlobalAveragePooling2D - Reshape") {
  Pass pass{Mode::kTraining};
  const std::vector<std::int32_t> labels{1, 0, 2};
  using Max = Sequential<Input<7, 6, 2>, Conv2D<3, 2, 2, Strides<1, 1>, Valid, Tanh>, MaxPooling2D<2>,
                         Conv2D<2, 2, 2, Strides<1, 1>, Same, Tanh>, MaxPooling2D<3, 3, Strides<2, 2>, Same>,
                         Flatten, Dense<3>>;
  check_gradients<Max, SparseCategoricalCrossentropy>(labels, 3, pass);
  using Average = Sequential<Input<7, 6, 2>, Conv2D<3, 2, 2, Strides<1, 1>, Valid, Tanh>, AveragePooling2D<2>,
                             Conv2D<2, 2, 2, Strides<1, 1>, Same, Tanh>,
                             AveragePooling2D<2, 2, Strides<1, 1>, Same>, Flatten, Dense<3>>;
  check_gradients<Average, SparseCategoricalCrossentropy>(labels, 3, pass);
  using Global = Sequential<Input<30>, Reshape<5, -1, 2>, Conv2D<4, 2, 2, Strides<1, 1>, Valid, Tanh>,
                            GlobalAveragePooling2D, Dense<3>>;
  check_gradients<Global, SparseCategoricalCrossentropy>(labels, 3, pass);
}

TEST_CASE("BatchNormalization between convolutions normalises per channel of (H W C) - finite differences") {
  Pass pass{Mode::kTraining};
  using Model = Sequential<Input<6, 6, 1>, Conv2D<3, 3, 3>, SyncBatchNormalization, Relu, MaxPooling2D<2>,
                           Conv2D<2, 2, 2>, BatchNormalization<>, Flatten, Dense<3>>;
  static_assert(Model::layer<1>::kChannels == 3 && Model::layer<5>::kChannels == 2);
  check_gradients<Model, SparseCategoricalCrossentropy>(std::vector<std::int32_t>{0, 1, 2, 1}, 4, pass);
}
