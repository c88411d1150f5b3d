// The CUDA backend's 2-D max and average pooling over NHWC samples
// (MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D): gpu::Context's
// pool2d_forward/backward, with the semantics of the host's
// (backend/host/pool.hpp), so that both backends give the same numbers.
//
// Our own kernels rather than cuDNN's pooling, because
//   - TensorFlow's Same padding puts the odd padding at the bottom and right,
//     which cuDNN's pooling descriptor (one symmetric padding) cannot say;
//   - max pooling's backward gives each output's gradient to the *first*
//     position of its window holding the maximum, as the host does; cuDNN
//     does not document which of several equal maxima it picks;
//   - backward gathers (one thread per input value, adding the windows that
//     cover it in a fixed order) instead of scattering with atomics, so its
//     result is the same bits on every run;
//   - pooling then works in builds without cuDNN.
// Pooling moves memory and does little arithmetic: one thread per output
// (forward) or input (backward) value, neighbouring threads on neighbouring
// channels of a pixel, so that their loads coalesce.
#pragma once

#include <cstddef>

#include "lockstep/backend/cuda/launch.cuh"
#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep::kernels {

// Input rows [h0, h1) and columns [w0, w1) of output (oh, ow)'s window,
// clipped to the input: Same padding's positions are left out. Window2D's
// consistency (pads smaller than the window) keeps every window non-empty.
struct PoolWindow {
  int h0, h1, w0, w1;
  LOCKSTEP_HOST_DEVICE static PoolWindow of(const Window2D& g, int oh, int ow) {
    const int h = oh * g.stride_h - g.pad_top, w = ow * g.stride_w - g.pad_left;
    return {h > 0 ? h : 0, h + g.kernel_h < g.in_h ? h + g.kernel_h : g.in_h, w > 0 ? w : 0,
            w + g.kernel_w < g.in_w ? w + g.kernel_w : g.in_w};
  }
  LOCKSTEP_HOST_DEVICE int count() const { return (h1 - h0) * (w1 - w0); }
};

// y(rows, OH, OW, C) from x(rows, H, W, C); index i is one output value.
// Max starts from the window's first value and keeps v > best, the host's
// comparison; average sums in the window's row-major order, then scales by
// 1 / count, as the host does.
template <class T>
struct PoolForward {
  Window2D g;
  const T* x;
  T* y;
  bool take_max;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t c = i % static_cast<std::size_t>(g.out_c);
    std::size_t t = i / static_cast<std::size_t>(g.out_c);
    const int ow = static_cast<int>(t % static_cast<std::size_t>(g.out_w));
    t /= static_cast<std::size_t>(g.out_w);
    const int oh = static_cast<int>(t % static_cast<std::size_t>(g.out_h));
    const std::size_t n = t / static_cast<std::size_t>(g.out_h);
    const PoolWindow w = PoolWindow::of(g, oh, ow);
    const std::size_t channels = static_cast<std::size_t>(g.in_c), width = static_cast<std::size_t>(g.in_w);
    const T* sample = x + n * static_cast<std::size_t>(g.in_h) * width * channels + c;
    T acc = sample[(static_cast<std::size_t>(w.h0) * width + static_cast<std::size_t>(w.w0)) * channels];
    bool first = true;
    for (int ih = w.h0; ih < w.h1; ++ih)
      for (int iw = w.w0; iw < w.w1; ++iw) {
        if (first) {
          first = false;
          continue;
        }
        const T v = sample[(static_cast<std::size_t>(ih) * width + static_cast<std::size_t>(iw)) * channels];
        if (take_max)
          acc = v > acc ? v : acc;
        else
          acc += v;
      }
    if (!take_max) acc *= T(1) / static_cast<T>(w.count());
    y[i] = acc;
  }
};

// dx(rows, H, W, C) from dy(rows, OH, OW, C); index i is one input value,
// which adds the gradients of the windows covering it, in output order (the
// order in which the host adds them). Max: a window gives its gradient only
// to the first position, row-major in the clipped window, whose value equals
// the window's output.
template <class T>
struct PoolBackward {
  Window2D g;
  const T* x;
  const T* y;
  const T* dy;
  T* dx;
  bool take_max;
  // The outputs whose windows cover input position `at` of an axis:
  // [first, last], empty when first > last.
  LOCKSTEP_HOST_DEVICE static void covering(int at, int pad, int kernel, int stride, int outputs, int& first,
                                            int& last) {
    const int lo = at + pad - kernel + 1;  // the earliest window start that still covers `at`
    first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
    last = (at + pad) / stride;
    if (last > outputs - 1) last = outputs - 1;
  }
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t channels = static_cast<std::size_t>(g.in_c), width = static_cast<std::size_t>(g.in_w);
    const std::size_t c = i % channels;
    std::size_t t = i / channels;
    const int iw = static_cast<int>(t % width);
    t /= width;
    const int ih = static_cast<int>(t % static_cast<std::size_t>(g.in_h));
    const std::size_t n = t / static_cast<std::size_t>(g.in_h);
    int oh0 = 0, oh1 = 0, ow0 = 0, ow1 = 0;
    covering(ih, g.pad_top, g.kernel_h, g.stride_h, g.out_h, oh0, oh1);
    covering(iw, g.pad_left, g.kernel_w, g.stride_w, g.out_w, ow0, ow1);
    const T* sample = x + n * static_cast<std::size_t>(g.in_h) * width * channels + c;
    const std::size_t out_at = n * static_cast<std::size_t>(g.out_h) * static_cast<std::size_t>(g.out_w) * channels + c;
    const T value = x[i];
    T acc = T(0);
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const std::size_t o =
            out_at + (static_cast<std::size_t>(oh) * static_cast<std::size_t>(g.out_w) + static_cast<std::size_t>(ow)) *
                         channels;
        const PoolWindow w = PoolWindow::of(g, oh, ow);
        if (!take_max) {
          acc += dy[o] * (T(1) / static_cast<T>(w.count()));
          continue;
        }
        const T top = y[o];
        if (!(value == top)) continue;
        // Is an earlier position of this window holding the maximum too?
        bool earlier = false;
        for (int h = w.h0; h <= ih && !earlier; ++h)
          for (int v = w.w0; v < w.w1; ++v) {
            if (h == ih && v == iw) break;
            if (sample[(static_cast<std::size_t>(h) * width + static_cast<std::size_t>(v)) * channels] == top) {
              earlier = true;
              break;
            }
          }
        if (!earlier) acc += dy[o];
      }
    dx[i] = acc;
  }
};

}  // namespace lockstep::kernels

namespace lockstep::gpu {

namespace detail {
inline void check_pool(const Window2D& g, const char* what, int rows) {
  require(window::consistent(g), what, ": inconsistent geometry: input ", g.in_h, "x", g.in_w, "x", g.in_c,
          ", window ", g.kernel_h, "x", g.kernel_w, ", strides ", g.stride_h, "x", g.stride_w, ", padding ", g.pad_top,
          ",", g.pad_left, ",", g.pad_bottom, ",", g.pad_right, " give no ", g.out_h, "x", g.out_w, "x", g.out_c,
          " output; expected the sizes of lockstep::window::make");
  require(g.in_c == g.out_c, what, ": ", g.in_c, " input channels and ", g.out_c,
          " output channels; expected the same count (pooling keeps the channels)");
  require(rows >= 0, what, ": ", rows, " rows, expected >= 0");
}
}  // namespace detail

// y(rows, OH, OW, C) = the max or mean of each window of x(rows, H, W, C), on `stream`.
template <class T>
void pool2d_forward(cudaStream_t stream, PoolKind kind, const Window2D& g, const T* x, T* y, int rows) {
  detail::check_pool(g, "cuda pool2d_forward", rows);
  for_each_index(stream, static_cast<std::size_t>(rows) * g.out_size(),
                 kernels::PoolForward<T>{g, x, y, kind == PoolKind::kMax});
}

// dx(rows, H, W, C) from dy, after pool2d_forward gave y from x; every value
// of dx is written (no zeroing first).
template <class T>
void pool2d_backward(cudaStream_t stream, PoolKind kind, const Window2D& g, const T* x, const T* y, const T* dy, T* dx,
                     int rows) {
  detail::check_pool(g, "cuda pool2d_backward", rows);
  for_each_index(stream, static_cast<std::size_t>(rows) * g.in_size(),
                 kernels::PoolBackward<T>{g, x, y, dy, dx, kind == PoolKind::kMax});
}

}  // namespace lockstep::gpu
