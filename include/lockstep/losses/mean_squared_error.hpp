// MeanSquaredError: per sample, the mean over outputs of (y - t)^2, as Keras.
#pragma once

#include <cstddef>

#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace kernels {
template <class T = float>
struct SquaredErrorRow {
  const T* y;
  const float* target;
  T* loss;
  T* grad;
  T scale;
  int width;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t row) const {
    const std::size_t o = row * static_cast<std::size_t>(width);
    const T* yr = y + o;
    const float* tr = target + o;
    const T inv_width = T(1) / static_cast<T>(width);
    T sum = 0;
    for (int j = 0; j < width; ++j) {
      const T d = yr[j] - static_cast<T>(tr[j]);
      sum += d * d;
      if (grad) grad[o + static_cast<std::size_t>(j)] = T(2) * d * inv_width * scale;
    }
    loss[row] = sum * inv_width;
  }
};
}  // namespace kernels

struct MeanSquaredError {
  using label_type = float;
  static constexpr const char* kName = "mean_squared_error";

  static void check_labels(const label_type*, std::size_t, std::size_t label_width, int outputs) {
    require(label_width == static_cast<std::size_t>(outputs), "MeanSquaredError: targets have width ", label_width,
            ", expected ", outputs, " (one per model output)");
  }

  // As a metric (Metrics<MeanSquaredError>): the per-row squared error.
  template <int Outputs>
  static kernels::SquaredErrorRow<float> row(const float* outputs, const float* targets, float* out) {
    return {outputs, targets, out, nullptr, 1.0f, Outputs};
  }

  template <int Outputs, class Ctx, class T>
  static void forward_backward(Ctx& ctx, const T* y, const label_type* targets, int rows, T scale, T* loss, T* grad) {
    ctx.for_each_row(static_cast<std::size_t>(rows), kernels::SquaredErrorRow<T>{y, targets, loss, grad, scale, Outputs});
  }
};

}  // namespace lockstep
