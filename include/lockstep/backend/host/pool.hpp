// The host's 2-D max and average pooling over NHWC samples (MaxPooling2D,
// AveragePooling2D, GlobalAveragePooling2D). Pooling moves memory and does
// almost no arithmetic, so these are plain loops whose innermost runs over
// the contiguous channels of a pixel, which the compiler vectorises.
//   max       y = the largest value of the window; backward gives each
//             output's gradient to the first position (row-major in the
//             window) holding that value, from x and y alone: no argmax is
//             stored, as cuDNN's pooling backward takes (x, y, dy) too
//   average   y = the mean of the window's positions inside the input:
//             Same padding's positions are left out of the count, as
//             TensorFlow does
// Windows may overlap (strides smaller than the window): backward adds.
#pragma once

#include <algorithm>
#include <cstddef>

#include "lockstep/backend/host/conv.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/core/bits.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep::host {

namespace detail {
// The window of output (oh, ow) clipped to the input: rows [h0, h1), columns [w0, w1).
struct Clipped {
  int h0, h1, w0, w1;
  int count() const { return (h1 - h0) * (w1 - w0); }
};
inline Clipped clip_window(const Window2D& g, int oh, int ow) {
  const int h = oh * g.stride_h - g.pad_top, w = ow * g.stride_w - g.pad_left;
  return {std::max(h, 0), std::min(h + g.kernel_h, g.in_h), std::max(w, 0), std::min(w + g.kernel_w, g.in_w)};
}

// Zeroes the positions of dx that no window covers, for windows that do not
// overlap: they form a grid, so a position is covered when its row is in a
// window's rows and its column in a window's columns (Valid's last rows and
// columns, the gaps of strides larger than the window).
template <class T>
void zero_uncovered(const Window2D& g, T* dx, int rows) {
  auto covered = [](int i, int stride, int pad, int kernel, int outputs) {
    const int at = i + pad, o = at / stride;
    return o < outputs && at - o * stride < kernel;
  };
  const std::size_t c = static_cast<std::size_t>(g.in_c), in_w = static_cast<std::size_t>(g.in_w);
  for (int n = 0; n < rows; ++n)
    for (int ih = 0; ih < g.in_h; ++ih) {
      T* row = dx + static_cast<std::size_t>(n) * g.in_size() + static_cast<std::size_t>(ih) * in_w * c;
      if (!covered(ih, g.stride_h, g.pad_top, g.kernel_h, g.out_h)) {
        std::fill(row, row + in_w * c, T(0));
        continue;
      }
      for (int iw = 0; iw < g.in_w; ++iw)
        if (!covered(iw, g.stride_w, g.pad_left, g.kernel_w, g.out_w))
          std::fill(row + static_cast<std::size_t>(iw) * c, row + static_cast<std::size_t>(iw + 1) * c, T(0));
    }
}

// All ones where a and b have the same bits, else zero: the max pooling
// backward's test (builtin::pool2d_backward says why).
template <class T>
BitsOf<T> equal_mask(T a, T b) {
  return bits_of(a) == bits_of(b) ? ~BitsOf<T>(0) : BitsOf<T>(0);
}

// f(offset of the sample in x, offset of the output pixel in y, its clipped window) for every output pixel.
template <class F>
void for_each_window(const Window2D& g, int rows, F&& f) {
  for (int n = 0; n < rows; ++n)
    for (int oh = 0; oh < g.out_h; ++oh)
      for (int ow = 0; ow < g.out_w; ++ow) {
        const std::size_t in_at = static_cast<std::size_t>(n) * g.in_size();
        const std::size_t out_at = static_cast<std::size_t>(n) * g.out_size() +
                                   (static_cast<std::size_t>(oh) * static_cast<std::size_t>(g.out_w) +
                                    static_cast<std::size_t>(ow)) *
                                       static_cast<std::size_t>(g.out_c);
        f(in_at, out_at, clip_window(g, oh, ow));
      }
}
}  // namespace detail

namespace builtin {

// y(rows, OH, OW, C) from x(rows, H, W, C).
template <class T>
void pool2d_forward(PoolKind kind, const Window2D& g, const T* x, T* y, int rows) {
  detail::check_window(g, "pool2d_forward", rows);
  require(g.in_c == g.out_c, "pool2d_forward: ", g.in_c, " input channels and ", g.out_c,
          " output channels; expected the same count (pooling keeps the channels)");
  const std::size_t c = static_cast<std::size_t>(g.in_c), in_w = static_cast<std::size_t>(g.in_w);
  detail::for_each_window(g, rows, [&](std::size_t in_at, std::size_t out_at, detail::Clipped w) {
    T* out = y + out_at;
    bool first = true;
    for (int ih = w.h0; ih < w.h1; ++ih)
      for (int iw = w.w0; iw < w.w1; ++iw) {
        const T* v = x + in_at + (static_cast<std::size_t>(ih) * in_w + static_cast<std::size_t>(iw)) * c;
        if (first) {
          std::copy(v, v + c, out);
          first = false;
        } else if (kind == PoolKind::kMax) {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t j = 0; j < c; ++j) out[j] = v[j] > out[j] ? v[j] : out[j];
        } else {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t j = 0; j < c; ++j) out[j] += v[j];
        }
      }
    if (kind == PoolKind::kAverage) {
      const T scale = T(1) / static_cast<T>(w.count());
      LOCKSTEP_INDEPENDENT_ITERATIONS
      for (std::size_t j = 0; j < c; ++j) out[j] *= scale;
    }
  });
}

// dx(rows, H, W, C) from dy(rows, OH, OW, C), after forward gave y from x.
// Where windows do not overlap (strides at least the window, the Keras
// default) each input position gets its value once: written, not added, and
// only the positions no window covers are zeroed first. The max test
// compares bits, not floats, and selects with masks: GCC will not vectorise
// a loop with a float compare in it under -ftrapping-math (its default), so
// that loop ran one float at a time and took 26% of the CNN's step on an
// AVX2 machine (2 replicas, batch 128). Bits find the same first position:
// forward's maximum is a copy of a window value, and every value before it
// differs from it (it was larger), so only a NaN maximum, which floats never
// find equal, now gives its gradient to where it came from.
template <class T>
void pool2d_backward(PoolKind kind, const Window2D& g, const T* x, const T* y, const T* dy, T* dx, int rows) {
  detail::check_window(g, "pool2d_backward", rows);
  require(g.in_c == g.out_c, "pool2d_backward: ", g.in_c, " input channels and ", g.out_c,
          " output channels; expected the same count (pooling keeps the channels)");
  const std::size_t c = static_cast<std::size_t>(g.in_c), in_w = static_cast<std::size_t>(g.in_w);
  const bool overlap = g.stride_h < g.kernel_h || g.stride_w < g.kernel_w;
  if (overlap)
    std::fill(dx, dx + static_cast<std::size_t>(rows) * g.in_size(), T(0));
  else
    detail::zero_uncovered(g, dx, rows);
  // Max: all ones for each channel whose gradient is still to be given in this window.
  using Bits = BitsOf<T>;
  Bits* pending = kind == PoolKind::kMax ? detail::thread_scratch<Bits>(c) : nullptr;
  detail::for_each_window(g, rows, [&](std::size_t in_at, std::size_t out_at, detail::Clipped w) {
    const T* grad = dy + out_at;
    const T* top = y + out_at;
    const T scale = kind == PoolKind::kAverage ? T(1) / static_cast<T>(w.count()) : T(1);
    if (pending) std::fill(pending, pending + c, ~Bits(0));
    for (int ih = w.h0; ih < w.h1; ++ih)
      for (int iw = w.w0; iw < w.w1; ++iw) {
        const std::size_t at = in_at + (static_cast<std::size_t>(ih) * in_w + static_cast<std::size_t>(iw)) * c;
        T* d = dx + at;
        const T* v = x + at;
        if (pending && overlap) {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t j = 0; j < c; ++j) {
            const Bits hit = detail::equal_mask(v[j], top[j]) & pending[j];
            const T sum = d[j] + grad[j];
            d[j] = from_bits<T>((bits_of(sum) & hit) | (bits_of(d[j]) & ~hit));
            pending[j] &= ~hit;
          }
        } else if (pending) {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t j = 0; j < c; ++j) {
            const Bits hit = detail::equal_mask(v[j], top[j]) & pending[j];
            d[j] = from_bits<T>(bits_of(grad[j]) & hit);
            pending[j] &= ~hit;
          }
        } else if (overlap) {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t j = 0; j < c; ++j) d[j] += grad[j] * scale;
        } else {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t j = 0; j < c; ++j) d[j] = grad[j] * scale;
        }
      }
  });
}

}  // namespace builtin

}  // namespace lockstep::host
