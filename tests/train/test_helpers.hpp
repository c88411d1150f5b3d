// Small synthetic data sets for the trainer tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/lockstep.hpp"

namespace lockstep::testing {

// `samples` points of `features` uniform values whose class is the index of
// the largest of the first `classes` features: learnable, deterministic.
inline Dataset argmax_dataset(std::size_t samples, std::size_t features, int classes, std::uint64_t seed) {
  std::vector<float> x(samples * features);
  std::vector<std::int32_t> y(samples);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = Philox4x32::uniform(seed, rng_stream::kData, i);
  for (std::size_t s = 0; s < samples; ++s) {
    int best = 0;
    for (int j = 1; j < classes; ++j)
      if (x[s * features + static_cast<std::size_t>(j)] > x[s * features + static_cast<std::size_t>(best)]) best = j;
    y[s] = best;
  }
  return Dataset(std::move(x), features, std::move(y));
}

// `samples` points (x0, x1) of uniform values with target y = 0.5 (x0 - x1):
// a regression a linear model learns exactly.
inline RegressionDataset half_difference_dataset(std::size_t samples) {
  std::vector<float> x(samples * 2), y(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    x[2 * i] = Philox4x32::uniform(1, 0, i);
    x[2 * i + 1] = Philox4x32::uniform(2, 0, i);
    y[i] = 0.5f * (x[2 * i] - x[2 * i + 1]);
  }
  return RegressionDataset(std::move(x), 2, std::move(y));
}

// Fit options for a test: no progress bar.
inline FitOptions quiet_fit(std::size_t batch_size, int epochs) {
  FitOptions options;
  options.batch_size = batch_size;
  options.epochs = epochs;
  options.verbose = false;
  return options;
}

inline double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e30;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

// `values` without [first, last): a parameter left out of a comparison, such
// as the bias right before BatchNormalization, whose float gradient is
// rounding noise that Adam scales up (tests/train/test_contracts.cpp).
inline std::vector<float> without(std::vector<float> values, std::size_t first, std::size_t last) {
  values.erase(values.begin() + static_cast<std::ptrdiff_t>(first), values.begin() + static_cast<std::ptrdiff_t>(last));
  return values;
}

}  // namespace lockstep::testing
