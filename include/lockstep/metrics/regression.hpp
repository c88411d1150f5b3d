// Regression metrics with Keras' names: MeanAbsoluteError, RootMeanSquaredError
// (MeanSquaredError, the loss, is a metric as well). Each gives a per-row
// value whose mean over samples is the metric; RootMeanSquaredError takes the
// square root of that mean at the end (finish), as Keras does over an epoch.
#pragma once

#include <cmath>
#include <cstddef>

#include "lockstep/core/config.hpp"
#include "lockstep/losses/mean_squared_error.hpp"

namespace lockstep {

namespace kernels {
// out[row] = the mean over outputs of |y - t|.
template <class T = float>
struct AbsoluteErrorRow {
  const T* y;
  const float* target;
  T* out;
  int width;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t row) const {
    const T* yr = y + row * static_cast<std::size_t>(width);
    const float* tr = target + row * static_cast<std::size_t>(width);
    T sum = 0;
    for (int j = 0; j < width; ++j) {
      const T d = yr[j] - static_cast<T>(tr[j]);
      sum += d < T(0) ? -d : d;
    }
    out[row] = sum / static_cast<T>(width);
  }
};
}  // namespace kernels

struct MeanAbsoluteError {
  using label_type = float;
  static constexpr const char* kName = "mean_absolute_error";
  template <int Outputs>
  static kernels::AbsoluteErrorRow<float> row(const float* outputs, const float* targets, float* out) {
    return {outputs, targets, out, Outputs};
  }
};

struct RootMeanSquaredError {
  using label_type = float;
  static constexpr const char* kName = "root_mean_squared_error";
  template <int Outputs>
  static auto row(const float* outputs, const float* targets, float* out) {
    return MeanSquaredError::row<Outputs>(outputs, targets, out);
  }
  static double finish(double mean) { return std::sqrt(mean); }
};

}  // namespace lockstep
