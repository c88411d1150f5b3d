// SparseCategoricalCrossentropy from logits: the softmax is fused into the
// loss through a stable log-sum-exp, and the gradient is softmax - onehot.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace kernels {
// One row: loss[row] = lse(z) - z[label]; grad = scale * (softmax(z) - onehot).
template <class T = float>
struct SparseCrossentropyRow {
  const T* logits;
  const std::int32_t* labels;
  T* loss;
  T* grad;  // may be null when only the value is wanted
  T scale;
  int classes;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t row) const {
    const T* z = logits + row * static_cast<std::size_t>(classes);
    T m = z[0];
    for (int j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
    T sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - m);
    const T lse = m + std::log(sum);
    const int label = labels[row];
    loss[row] = lse - z[label];
    if (grad) {
      T* g = grad + row * static_cast<std::size_t>(classes);
      const T inv = scale / sum;
      for (int j = 0; j < classes; ++j) g[j] = std::exp(z[j] - m) * inv - (j == label ? scale : T(0));
    }
  }
};
}  // namespace kernels

struct SparseCategoricalCrossentropy {
  using label_type = std::int32_t;
  static constexpr const char* kName = "sparse_categorical_crossentropy";

  // Labels are class indices: checked once before training, never in the step.
  static void check_labels(const label_type* labels, std::size_t count, std::size_t label_width, int classes) {
    require(label_width == 1, "SparseCategoricalCrossentropy: labels have width ", label_width,
            ", expected one class index per sample");
    for (std::size_t i = 0; i < count; ++i)
      require(labels[i] >= 0 && labels[i] < classes, "SparseCategoricalCrossentropy: label ", labels[i],
              " of sample ", i, " is outside [0, ", classes, "): the model has ", classes, " outputs");
  }

  // Per-sample losses into `loss` (rows) and, when `grad` is not null, the
  // gradient of sum(loss) * scale with respect to the logits into `grad`.
  template <int Classes, class Ctx, class T>
  static void forward_backward(Ctx& ctx, const T* logits, const label_type* labels, int rows, T scale, T* loss, T* grad) {
    ctx.for_each_row(static_cast<std::size_t>(rows), kernels::SparseCrossentropyRow<T>{logits, labels, loss, grad, scale, Classes});
  }
};

}  // namespace lockstep
