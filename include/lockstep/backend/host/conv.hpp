// The host's own 2-D convolution over NHWC samples: im2col + host::gemm
// (oneDNN's sgemm, a BLAS, or the blocked kernel: whatever the build has),
// in any value type (double for the gradient checks): host::Context's
// default convolution; ConvPath below selects oneDNN's primitives instead
// (backend/host/conv_onednn.hpp).
//   forward          y(rows, OH, OW, Cout) = Act(im2col(x) K + b)
//   backward         dK = im2col(x)^T dy, db = sum dy, dx = col2im(dy K^T)
// K is Keras' kernel (KH, KW, Cin, Cout), which read row-major is already the
// (KH * KW * Cin, Cout) matrix that im2col's rows multiply. The output pixels
// of the batch are taken in chunks whose im2col rows stay in the core's L2
// cache between the copy and the GEMM that reads them; the chunk buffer is
// the calling thread's, allocated once and reused by every later call.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>

#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep::host {

// Which convolution host::Context runs for float (double, in the gradient
// checks, always takes the built-in one):
//   kBuiltin  im2col + host::gemm (this file)
//   kOneDnn   oneDNN's convolution primitives (conv_onednn.hpp), in builds
//             with oneDNN
enum class ConvPath { kBuiltin, kOneDnn };

inline constexpr bool kHaveOneDnnConv =
#if defined(LOCKSTEP_HAVE_ONEDNN)
    true;
#else
    false;
#endif

// The built-in path: on the development machine (AVX2, oneDNN 2.6) the
// Keras convnet's four convolution passes took 33 ms a batch of 128 on one
// core, against 42 ms through the primitives, whose backward kernels are the
// slower part (docs/concepts.md, Convolutions, has the table).
inline constexpr ConvPath kDefaultConvPath = ConvPath::kBuiltin;

namespace detail {
inline std::atomic<ConvPath>& conv_path_setting() {
  static std::atomic<ConvPath> path{kDefaultConvPath};
  return path;
}
}  // namespace detail

inline ConvPath conv_path() { return detail::conv_path_setting().load(std::memory_order_relaxed); }
// Process-wide; set it before training, not while replicas run.
inline void set_conv_path(ConvPath path) {
  require(path == ConvPath::kBuiltin || kHaveOneDnnConv,
          "set_conv_path(kOneDnn): this build has no oneDNN (LOCKSTEP_HAVE_ONEDNN is not defined); expected "
          "ConvPath::kBuiltin, or a build that found oneDNN (libdnnl-dev)");
  detail::conv_path_setting().store(path, std::memory_order_relaxed);
}

namespace detail {

// The calling thread's scratch of at least n values of T: grown when a larger
// shape comes, never shrunk, so the steps of a fit allocate nothing.
template <class T>
T* thread_scratch(std::size_t n) {
  thread_local AlignedBuffer<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// How many output pixels one chunk holds: the chunk's im2col rows and its
// output rows together about 256 KB, so that they stay in a 1 MB L2 cache
// with the GEMM's packed panels between the copy, the GEMM and the epilogue
// (the sgemm of a whole batch of the Keras convnet's second layer ran at 57
// GFLOP/s on one core, in chunks of a few hundred pixels at 77). A GEMM
// given several threads (one replica on several cores) gets a chunk per
// thread, so that each call has enough rows to share.
inline std::size_t chunk_pixels(const Window2D& g) {
  constexpr std::size_t kChunkValues = std::size_t{64} * 1024;
  const std::size_t threads = static_cast<std::size_t>(std::max(1, gemm_threads_here()));
  return threads * std::max<std::size_t>(16, kChunkValues / (g.patch_size() + static_cast<std::size_t>(g.out_c)));
}

// A 1x1 window with stride 1 and no padding reads each input pixel as its
// patch: x itself is the im2col matrix.
inline bool pointwise(const Window2D& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 && !g.padded();
}

inline void check_window(const Window2D& g, const char* what, int rows) {
  require(window::consistent(g), what, ": inconsistent geometry: input ", g.in_h, "x", g.in_w, "x", g.in_c,
          ", window ", g.kernel_h, "x", g.kernel_w, ", strides ", g.stride_h, "x", g.stride_w, ", padding ", g.pad_top,
          ",", g.pad_left, ",", g.pad_bottom, ",", g.pad_right, " give no ", g.out_h, "x", g.out_w, "x", g.out_c,
          " output; expected the sizes of lockstep::window::make");
  require(rows >= 0, what, ": ", rows, " rows, expected >= 0");
}

// f(pixel index within the batch, sample, ih0, iw0) for output pixels [p0,
// p1) of a batch: pixel p is sample p / (OH OW), position p % (OH OW), whose
// window starts at input row ih0 and column iw0 (negative in the padding).
// The position is stepped, not divided out per pixel: three integer
// divisions per pixel cost more than a 3x3x1 patch's arithmetic.
template <class F>
void for_each_pixel(const Window2D& g, std::size_t p0, std::size_t p1, F&& f) {
  if (p0 >= p1) return;
  const std::size_t pixels = static_cast<std::size_t>(g.out_h) * static_cast<std::size_t>(g.out_w);
  std::size_t n = p0 / pixels;
  int oh = static_cast<int>((p0 % pixels) / static_cast<std::size_t>(g.out_w));
  int ow = static_cast<int>((p0 % pixels) % static_cast<std::size_t>(g.out_w));
  for (std::size_t p = p0; p < p1; ++p) {
    f(p, n, oh * g.stride_h - g.pad_top, ow * g.stride_w - g.pad_left);
    if (++ow == g.out_w) {
      ow = 0;
      if (++oh == g.out_h) {
        oh = 0;
        ++n;
      }
    }
  }
}

// Calls segment(patch index q within the chunk, row of the patch (kh), first
// kw, input values, count) for each run of input values patch q reads (its
// window starts at input row ih0 and column iw0 of `sample`), and gap(patch,
// kh, first kw, kw count) for each run of padding, in the patch's order.
template <class T, class Segment, class Gap>
void patch_runs(const Window2D& g, T* sample, std::size_t q, int ih0, int iw0, Segment& segment, Gap& gap) {
  const std::size_t cin = static_cast<std::size_t>(g.in_c), in_w = static_cast<std::size_t>(g.in_w);
  const int kw_lo = std::max(0, -iw0), kw_hi = std::min(g.kernel_w, g.in_w - iw0);  // kw inside the input
  for (int kh = 0; kh < g.kernel_h; ++kh) {
    const int ih = ih0 + kh;
    if (ih < 0 || ih >= g.in_h) {
      gap(q, kh, 0, g.kernel_w);
      continue;
    }
    if (kw_lo > 0) gap(q, kh, 0, kw_lo);
    if (kw_hi > kw_lo) {
      T* row = sample + (static_cast<std::size_t>(ih) * in_w + static_cast<std::size_t>(iw0 + kw_lo)) * cin;
      segment(q, kh, kw_lo, row, static_cast<std::size_t>(kw_hi - kw_lo) * cin);
    }
    if (kw_hi < g.kernel_w) gap(q, kh, std::max(kw_hi, 0), g.kernel_w - std::max(kw_hi, 0));
  }
}

// patch_runs for every output pixel of [p0, p1), in order.
template <class T, class Segment, class Gap>
void for_each_patch_run(const Window2D& g, T* x, std::size_t p0, std::size_t p1, Segment&& segment, Gap&& gap) {
  for_each_pixel(g, p0, p1, [&](std::size_t p, std::size_t n, int ih0, int iw0) {
    patch_runs(g, x + n * g.in_size(), p - p0, ih0, iw0, segment, gap);
  });
}

// dst[0..n) = src[0..n) for the runs of im2col. Short ones (three values for
// a 3x3 kernel on one channel) are fixed-size copies, inlined: a call of
// memmove per run cost a quarter of the first layer's forward. Long ones (96
// values for 3x3 on 32 channels) go to the C library's memcpy, which picks
// the widest vectors the CPU has where this build's baseline gives 16-byte
// ones (the Keras convnet: 2-5% a step, im2col 16% of it before).
template <class T>
void copy_run(T* dst, const T* src, std::size_t n) {
  if (n >= 32) {
    std::memcpy(dst, src, n * sizeof(T));
    return;
  }
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) std::memcpy(dst + i, src + i, 4 * sizeof(T));
  for (; i < n; ++i) std::memcpy(dst + i, src + i, sizeof(T));
}

// How many values past its end im2col may write in cols: callers allocate
// that much more.
template <class T>
inline constexpr std::size_t kIm2colSlack = 16 / sizeof(T);

// dst[0..n) = src[0..n) for a short run, in 16-byte copies that may write
// and read up to kIm2colSlack - 1 values past n: im2col calls it where those
// values exist, and writes the ones past n again afterwards.
template <class T>
void copy_run_over(T* dst, const T* src, std::size_t n) {
  constexpr std::size_t kStep = kIm2colSlack<T>;
  for (std::size_t i = 0; i < n; i += kStep) std::memcpy(dst + i, src + i, kStep * sizeof(T));
}

// cols (p1 - p0, KH * KW * Cin) = the patches of output pixels [p0, p1),
// written in increasing address order; cols has kIm2colSlack<T> values of
// room past its end. A window inside the input (all of them with Valid
// padding) is KH runs of KW * Cin values; where those runs are short (3
// values for the Keras convnet's first layer, 3x3 on one channel) each is
// one or two 16-byte copies, read from x and written over the start of what
// comes next in cols, which is written after it. The walk with its runs and
// gaps per value took 0.54 ms a call of that layer's 43,264 pixels (batch
// 64), as long as its GEMM and bias together.
template <class T>
void im2col(const Window2D& g, const T* x, std::size_t p0, std::size_t p1, T* cols) {
  const std::size_t patch = g.patch_size(), cin = static_cast<std::size_t>(g.in_c);
  const std::size_t row = static_cast<std::size_t>(g.kernel_w) * cin;
  const std::size_t in_row = static_cast<std::size_t>(g.in_w) * cin;
  auto at = [&](std::size_t q, int kh, int kw) {
    return cols + q * patch + static_cast<std::size_t>(kh) * row + static_cast<std::size_t>(kw) * cin;
  };
  auto segment = [&](std::size_t q, int kh, int kw, const T* src, std::size_t n) { copy_run(at(q, kh, kw), src, n); };
  auto gap = [&](std::size_t q, int kh, int kw, int count) {
    T* dst = at(q, kh, kw);
    std::fill(dst, dst + static_cast<std::size_t>(count) * cin, T(0));
  };
  if (row >= 32 || p0 >= p1) {  // long runs: memcpy's, whose own cost is per call
    for_each_patch_run(g, x, p0, p1, segment, gap);
    return;
  }
  // The end of the samples these pixels read: no copy reads past it.
  const std::size_t pixels = static_cast<std::size_t>(g.out_h) * static_cast<std::size_t>(g.out_w);
  const T* x_end = x + ((p1 - 1) / pixels + 1) * g.in_size();
  const std::size_t over = (row + kIm2colSlack<T> - 1) / kIm2colSlack<T> * kIm2colSlack<T>;
  for_each_pixel(g, p0, p1, [&](std::size_t p, std::size_t n, int ih0, int iw0) {
    const T* sample = x + n * g.in_size();
    const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + g.kernel_h <= g.in_h && iw0 + g.kernel_w <= g.in_w;
    const T* src = inside ? sample + (static_cast<std::size_t>(ih0) * in_row + static_cast<std::size_t>(iw0) * cin)
                          : nullptr;
    if (!inside || static_cast<std::size_t>(x_end - src) < static_cast<std::size_t>(g.kernel_h - 1) * in_row + over) {
      patch_runs(g, sample, p - p0, ih0, iw0, segment, gap);
      return;
    }
    T* dst = cols + (p - p0) * patch;
    for (int kh = 0; kh < g.kernel_h; ++kh, dst += row, src += in_row) copy_run_over(dst, src, row);
  });
}

// dx += the patches' gradients dcols (p1 - p0, KH * KW * Cin) of output pixels
// [p0, p1), each added where im2col read it (padding's are dropped).
template <class T>
void col2im_add(const Window2D& g, const T* dcols, std::size_t p0, std::size_t p1, T* dx) {
  const std::size_t patch = g.patch_size(), cin = static_cast<std::size_t>(g.in_c);
  const std::size_t row = static_cast<std::size_t>(g.kernel_w) * cin;
  for_each_patch_run(
      g, dx, p0, p1,
      [&](std::size_t q, int kh, int kw, T* dst, std::size_t n) {
        const T* src = dcols + q * patch + static_cast<std::size_t>(kh) * row + static_cast<std::size_t>(kw) * cin;
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
      },
      [](std::size_t, int, int, int) {});
}

// y(pixels, C) = Act(y + b) in place; b may be null (no bias).
template <class Act, class T>
void bias_activation(T* y, const T* bias, std::size_t pixels, std::size_t channels) {
  if (!bias && Act::kIdentity) return;
  for (std::size_t p = 0; p < pixels; ++p) {
    T* row = y + p * channels;
    if (bias) {
      LOCKSTEP_INDEPENDENT_ITERATIONS
      for (std::size_t c = 0; c < channels; ++c) row[c] = Act::forward(row[c] + bias[c]);
    } else {
      LOCKSTEP_INDEPENDENT_ITERATIONS
      for (std::size_t c = 0; c < channels; ++c) row[c] = Act::forward(row[c]);
    }
  }
}

// dy *= Act'(y) over n values: the gradient of the convolution's own output.
template <class Act, class T>
void activation_backward(const T* y, T* dy, std::size_t n) {
  if constexpr (!Act::kIdentity) {
    LOCKSTEP_INDEPENDENT_ITERATIONS
    for (std::size_t i = 0; i < n; ++i) dy[i] *= Act::derivative_from_output(y[i]);
  }
}

}  // namespace detail

namespace builtin {

// y(rows, OH, OW, Cout) = Act(conv(x(rows, H, W, Cin), kernel) + bias); bias may be null.
template <class Act, class T>
void conv2d_forward(const Window2D& g, const T* x, const T* kernel, const T* bias, T* y, int rows) {
  detail::check_window(g, "conv2d_forward", rows);
  const std::size_t pixels = static_cast<std::size_t>(rows) * static_cast<std::size_t>(g.out_h) *
                             static_cast<std::size_t>(g.out_w);
  const std::size_t patch = g.patch_size(), cout = static_cast<std::size_t>(g.out_c);
  if (pixels == 0) return;
  const int n = g.out_c, k = static_cast<int>(patch);
  if (detail::pointwise(g)) {  // (pixels, Cin) x (Cin, Cout)
    host::gemm<T>(false, false, static_cast<int>(pixels), n, k, T(1), x, k, kernel, n, T(0), y, n);
    detail::bias_activation<Act>(y, bias, pixels, cout);
    return;
  }
  const std::size_t chunk = std::min(pixels, detail::chunk_pixels(g));
  T* cols = detail::thread_scratch<T>(chunk * patch + detail::kIm2colSlack<T>);
  for (std::size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const std::size_t p1 = std::min(pixels, p0 + chunk);
    detail::im2col(g, x, p0, p1, cols);
    T* out = y + p0 * cout;
    // (chunk, KH KW Cin) x (KH KW Cin, Cout)
    host::gemm<T>(false, false, static_cast<int>(p1 - p0), n, k, T(1), cols, k, kernel, n, T(0), out, n);
    detail::bias_activation<Act>(out, bias, p1 - p0, cout);
  }
}

// After forward gave y = Act(conv(x) + bias), given dy = dLoss/dy, writes
// dkernel (KH, KW, Cin, Cout), dbias (Cout) unless null, and dx (rows, H, W,
// Cin) unless null. Act's derivative is applied to dy in place, chunk by
// chunk while the chunk is in cache (a Linear Act leaves dy unwritten and y
// unread: y may then be null).
template <class Act, class T>
void conv2d_backward(const Window2D& g, const T* x, const T* y, const T* kernel, T* dy, T* dx, T* dkernel, T* dbias,
                     int rows) {
  detail::check_window(g, "conv2d_backward", rows);
  const std::size_t pixels = static_cast<std::size_t>(rows) * static_cast<std::size_t>(g.out_h) *
                             static_cast<std::size_t>(g.out_w);
  const std::size_t patch = g.patch_size(), cout = static_cast<std::size_t>(g.out_c);
  if (dbias) std::fill(dbias, dbias + cout, T(0));
  if (dx) std::fill(dx, dx + static_cast<std::size_t>(rows) * g.in_size(), T(0));
  if (pixels == 0) {
    std::fill(dkernel, dkernel + g.kernel_size(), T(0));
    return;
  }
  const std::size_t chunk = std::min(pixels, detail::chunk_pixels(g));
  // dy <- dy Act'(y) and dbias += its column sums, for pixels [p0, p1), in
  // one pass where both are wanted (the first layer's two passes over its
  // 32 channels took as long as its dkernel GEMM).
  auto own_gradient = [&](std::size_t p0, std::size_t p1) {
    T* d = dy + p0 * cout;
    if (!dbias) {
      if constexpr (!Act::kIdentity) detail::activation_backward<Act>(y + p0 * cout, d, (p1 - p0) * cout);
      return;
    }
    const T* out = y ? y + p0 * cout : nullptr;
    for (std::size_t p = p0; p < p1; ++p, d += cout) {
      if constexpr (!Act::kIdentity) {
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t c = 0; c < cout; ++c) {
          d[c] *= Act::derivative_from_output(out[c]);
          dbias[c] += d[c];
        }
        out += cout;
      } else {
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t c = 0; c < cout; ++c) dbias[c] += d[c];
      }
    }
  };
  const int n = g.out_c, k = static_cast<int>(patch);
  if (detail::pointwise(g)) {
    for (std::size_t p0 = 0; p0 < pixels; p0 += chunk) own_gradient(p0, std::min(pixels, p0 + chunk));
    const int m = static_cast<int>(pixels);
    host::gemm<T>(true, false, k, n, m, T(1), x, k, dy, n, T(0), dkernel, n);  // (Cin, pixels) x (pixels, Cout)
    if (dx) host::gemm<T>(false, true, m, k, n, T(1), dy, n, kernel, n, T(0), dx, k);  // (pixels, Cout) x (Cout, Cin)
    return;
  }
  T* cols = detail::thread_scratch<T>(chunk * patch + detail::kIm2colSlack<T>);
  for (std::size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const std::size_t p1 = std::min(pixels, p0 + chunk);
    const int m = static_cast<int>(p1 - p0);
    T* dyc = dy + p0 * cout;
    own_gradient(p0, p1);
    detail::im2col(g, x, p0, p1, cols);
    // dK (KH KW Cin, Cout) += (KH KW Cin, chunk) x (chunk, Cout)
    host::gemm<T>(true, false, k, n, m, T(1), cols, k, dyc, n, p0 == 0 ? T(0) : T(1), dkernel, n);
    if (!dx) continue;
    // The chunk's patch gradients (chunk, Cout) x (Cout, KH KW Cin), in the same buffer.
    host::gemm<T>(false, true, m, k, n, T(1), dyc, n, kernel, n, T(0), cols, k);
    detail::col2im_add(g, cols, p0, p1, dx);
  }
}

}  // namespace builtin

}  // namespace lockstep::host
