// Window2D: the geometry of a 2-D convolution or pooling over NHWC samples
// (channels last, as Keras' default), the one plain struct that layers hand
// to a backend's context (conv2d_*, pool2d_*): no library's types, so the
// host's im2col and oneDNN paths and CUDA's cuDNN read the same values.
// The output size and padding follow TensorFlow's rules, computed here once.
#pragma once

#include <cstddef>

namespace lockstep {

// Which reduction a pooling window takes.
enum class PoolKind { kMax, kAverage };

struct Window2D {
  int in_h = 0, in_w = 0, in_c = 0;     // one input sample (H, W, C)
  int out_h = 0, out_w = 0, out_c = 0;  // one output sample; out_c == in_c for pooling
  int kernel_h = 0, kernel_w = 0;       // the window (Conv2D's kernel, a pool's size)
  int stride_h = 1, stride_w = 1;
  // Implicit zeros (or, for pooling, positions left out) around the input.
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;

  constexpr std::size_t in_size() const {
    return static_cast<std::size_t>(in_h) * static_cast<std::size_t>(in_w) * static_cast<std::size_t>(in_c);
  }
  constexpr std::size_t out_size() const {
    return static_cast<std::size_t>(out_h) * static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_c);
  }
  // Values of one im2col row: a (kernel_h, kernel_w, in_c) patch.
  constexpr std::size_t patch_size() const {
    return static_cast<std::size_t>(kernel_h) * static_cast<std::size_t>(kernel_w) * static_cast<std::size_t>(in_c);
  }
  // A convolution kernel (kernel_h, kernel_w, in_c, out_c), Keras' layout.
  constexpr std::size_t kernel_size() const { return patch_size() * static_cast<std::size_t>(out_c); }
  constexpr bool padded() const { return pad_top || pad_left || pad_bottom || pad_right; }
};

namespace window {
// Output length of one axis: Valid keeps the windows that fit, Same gives
// ceil(in / stride) (TensorFlow's rule).
constexpr int output_length(int in, int kernel, int stride, bool same) {
  return same ? (in + stride - 1) / stride : (in >= kernel ? (in - kernel) / stride + 1 : 0);
}
// Same padding of one axis, TensorFlow's rule: pad_total = max((out - 1) *
// stride + kernel - in, 0), the odd one at the end (bottom, right).
constexpr int same_pad_total(int in, int kernel, int stride) {
  const int total = (output_length(in, kernel, stride, true) - 1) * stride + kernel - in;
  return total > 0 ? total : 0;
}

// The geometry of a window of (kernel_h, kernel_w) moved by the strides over
// an (in_h, in_w, in_c) sample, giving out_c channels.
constexpr Window2D make(int in_h, int in_w, int in_c, int out_c, int kernel_h, int kernel_w, int stride_h,
                        int stride_w, bool same) {
  Window2D g{};
  g.in_h = in_h;
  g.in_w = in_w;
  g.in_c = in_c;
  g.out_c = out_c;
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.out_h = output_length(in_h, kernel_h, stride_h, same);
  g.out_w = output_length(in_w, kernel_w, stride_w, same);
  if (same) {
    const int th = same_pad_total(in_h, kernel_h, stride_h), tw = same_pad_total(in_w, kernel_w, stride_w);
    g.pad_top = th / 2;
    g.pad_bottom = th - th / 2;
    g.pad_left = tw / 2;
    g.pad_right = tw - tw / 2;
  }
  return g;
}

// Whether g describes a real window: positive sizes, and an output size that
// the input, padding, window and strides give (floor division, as
// TensorFlow, oneDNN and cuDNN count it).
constexpr bool consistent(const Window2D& g) {
  const bool positive = g.in_h > 0 && g.in_w > 0 && g.in_c > 0 && g.out_h > 0 && g.out_w > 0 && g.out_c > 0 &&
                        g.kernel_h > 0 && g.kernel_w > 0 && g.stride_h > 0 && g.stride_w > 0;
  const bool pads = g.pad_top >= 0 && g.pad_left >= 0 && g.pad_bottom >= 0 && g.pad_right >= 0 &&
                    g.pad_top < g.kernel_h && g.pad_bottom < g.kernel_h && g.pad_left < g.kernel_w &&
                    g.pad_right < g.kernel_w;
  return positive && pads && g.in_h + g.pad_top + g.pad_bottom >= g.kernel_h &&
         g.in_w + g.pad_left + g.pad_right >= g.kernel_w &&
         g.out_h == (g.in_h + g.pad_top + g.pad_bottom - g.kernel_h) / g.stride_h + 1 &&
         g.out_w == (g.in_w + g.pad_left + g.pad_right - g.kernel_w) / g.stride_w + 1;
}
}  // namespace window

}  // namespace lockstep
