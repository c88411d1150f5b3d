// Metrics: each counts, for a block of rows, a sum whose mean over samples is
// the metric, so replicas and batches combine by addition.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep {

// Fraction of samples whose largest output is at the label (Keras'
// "accuracy" for sparse labels).
struct Accuracy {
  using label_type = std::int32_t;
  static constexpr const char* kName = "accuracy";
  template <int Classes>
  static double sum(const float* outputs, const std::int32_t* labels, int rows) {
    double correct = 0;
    for (int r = 0; r < rows; ++r) {
      const float* z = outputs + static_cast<std::size_t>(r) * Classes;
      int best = 0;
      for (int j = 1; j < Classes; ++j)
        if (z[j] > z[best]) best = j;
      correct += best == labels[r] ? 1.0 : 0.0;
    }
    return correct;
  }
};

// The metric list of a Trainer: Metrics<Accuracy>, or Metrics<> for none.
template <class... M>
struct Metrics {
  static constexpr std::size_t kCount = sizeof...(M);
};

}  // namespace lockstep
