// Metrics: each counts, for a block of rows, a sum whose mean over samples is
// the metric, so replicas and batches combine by addition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lockstep/core/config.hpp"

namespace lockstep {

namespace kernels {
// 1 if row's largest output is at its label, else 0 (first maximum wins).
template <class T = float>
struct AccuracyRow {
  const T* outputs;
  const std::int32_t* labels;
  T* out;
  int classes;
  LOCKSTEP_HOST_DEVICE static bool correct(const T* z, int classes, std::int32_t label) {
    int best = 0;
    for (int j = 1; j < classes; ++j)
      if (z[j] > z[best]) best = j;
    return best == label;
  }
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t row) const {
    out[row] = correct(outputs + row * static_cast<std::size_t>(classes), classes, labels[row]) ? T(1) : T(0);
  }
};
}  // namespace kernels

// Fraction of samples whose largest output is at the label (Keras'
// "accuracy" for sparse labels). A metric gives a per-row functor (`row`),
// run by the backend's context, whose values the step adds up.
struct Accuracy {
  using label_type = std::int32_t;
  static constexpr const char* kName = "accuracy";
  template <int Classes>
  static kernels::AccuracyRow<float> row(const float* outputs, const std::int32_t* labels, float* out) {
    return {outputs, labels, out, Classes};
  }
};

// The metric list of a Trainer: Metrics<Accuracy>, or Metrics<> for none.
template <class... M>
struct Metrics {
  static constexpr std::size_t kCount = sizeof...(M);
};

namespace detail {
template <class M, class = void>
struct has_finish : std::false_type {};
template <class M>
struct has_finish<M, std::void_t<decltype(M::finish(0.0))>> : std::true_type {};
// A metric's value from the mean of its rows: the mean itself, or what the
// metric's finish makes of it (RootMeanSquaredError's square root).
template <class M>
double finish_metric(double mean) {
  if constexpr (has_finish<M>::value)
    return M::finish(mean);
  else
    return mean;
}
}  // namespace detail

}  // namespace lockstep
