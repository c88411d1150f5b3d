// Softmax over each row: a parameter-free layer for predictions. Training uses
// SparseCategoricalCrossentropy on logits instead (stable and fused), so a
// model ending in Dense<10> is trained and Model::with_softmax predicts.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lockstep/core/config.hpp"
#include "lockstep/layers/layer.hpp"

namespace lockstep {

namespace kernels {
// One row of softmax: y = exp(x - max) / sum.
template <class T = float>
struct SoftmaxRow {
  const T* x;
  T* y;
  int width;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t row) const {
    const T* xr = x + row * static_cast<std::size_t>(width);
    T* yr = y + row * static_cast<std::size_t>(width);
    T m = xr[0];
    for (int j = 1; j < width; ++j) m = xr[j] > m ? xr[j] : m;
    T sum = 0;
    for (int j = 0; j < width; ++j) sum += (yr[j] = std::exp(xr[j] - m));
    const T inv = T(1) / sum;
    for (int j = 0; j < width; ++j) yr[j] *= inv;
  }
};
// dx = y * (dy - <dy, y>) for one row.
template <class T = float>
struct SoftmaxBackwardRow {
  const T* y;
  const T* dy;
  T* dx;
  int width;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t row) const {
    const std::size_t o = row * static_cast<std::size_t>(width);
    const T* yr = y + o;
    const T* dyr = dy + o;
    T* dxr = dx + o;
    T dot = 0;
    for (int j = 0; j < width; ++j) dot += dyr[j] * yr[j];
    for (int j = 0; j < width; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
  }
};
}  // namespace kernels

struct Softmax {
  template <class In>
  struct Bind : detail::ShapePreserving<In> {
    static constexpr const char* kName = "softmax";
    static constexpr bool kIsSoftmax = true;  // a from-logits loss after it would apply softmax twice
    static_assert(In::kRank == 1, "Softmax normalises a flat vector per sample: put Flatten before it.");
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T>, const T* x, T* y, int rows) {
      ctx.for_each_row(static_cast<std::size_t>(rows), kernels::SoftmaxRow<T>{x, y, In::kSize});
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P&, Slots<T>, const T*, const T* y, T* dy, T* dx, T*, int rows) {
      if (!dx) return;
      ctx.for_each_row(static_cast<std::size_t>(rows), kernels::SoftmaxBackwardRow<T>{y, dy, dx, In::kSize});
    }
  };
};

}  // namespace lockstep
