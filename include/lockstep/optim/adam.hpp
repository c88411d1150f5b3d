// Adam with Keras' defaults (lr 1e-3, beta_1 0.9, beta_2 0.999, epsilon 1e-7)
// and Keras' update, one fused pass over the flat buffer:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/backends.hpp"
#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace kernels {
// Grads: a `const float*`, or a view that reads the gradient as it goes
// (host::SumOfTwo); g[i] is read once.
template <class Grads>
struct BasicAdamStep {
  float* p;
  Grads g;
  float* m;
  float* v;
  float alpha, beta_1, beta_2, epsilon;  // alpha: the step size of this update
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const float gi = g[i];
    const float mi = beta_1 * m[i] + (1.0f - beta_1) * gi;
    const float vi = beta_2 * v[i] + (1.0f - beta_2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= alpha * mi / (std::sqrt(vi) + epsilon);
  }
};
using AdamStep = BasicAdamStep<const float*>;
}  // namespace kernels

struct Adam {
  float learning_rate;
  float beta_1;
  float beta_2;
  float epsilon;

  explicit Adam(double learning_rate = 1e-3, double beta_1 = 0.9, double beta_2 = 0.999, double epsilon = 1e-7)
      : learning_rate(static_cast<float>(learning_rate)),
        beta_1(static_cast<float>(beta_1)),
        beta_2(static_cast<float>(beta_2)),
        epsilon(static_cast<float>(epsilon)) {
    require(learning_rate > 0, "Adam: learning rate ", learning_rate, ", expected > 0");
    require(beta_1 >= 0 && beta_1 < 1, "Adam: beta_1 ", beta_1, ", expected in [0, 1)");
    require(beta_2 >= 0 && beta_2 < 1, "Adam: beta_2 ", beta_2, ", expected in [0, 1)");
    require(epsilon > 0, "Adam: epsilon ", epsilon, ", expected > 0");
  }

  // The step size of update t (1-based), bias correction folded in. Computed
  // in double once per step, so every replica and backend uses the same value.
  float alpha(std::int64_t t) const {
    const double td = static_cast<double>(t);
    return static_cast<float>(learning_rate * std::sqrt(1.0 - std::pow(double(beta_2), td)) /
                              (1.0 - std::pow(double(beta_1), td)));
  }

  template <class Backend>
  class State {
    static_assert(dependent_false<Backend>, "Adam has no state for this backend here: for Cuda include <lockstep/cuda.hpp> and compile with nvcc.");
  };
};

template <>
class Adam::State<Host> {
 public:
  State(const Adam&, std::size_t params) : m_(params), v_(params), size_(params) {}
  template <class Ctx>
  void step(Ctx&, const Adam& opt, float* params, const float* grads) {
    step(opt, params, grads);
  }
  void step(const Adam& opt, float* params, const float* grads) { step(opt, params, grads, 0, size_); }
  // One update of the entries [first, last) only: a replica's shard under a
  // sharded update (HostAllReduce::Group::reduce_update). grads[i] is the
  // gradient of parameter i: a `const float*`, or host::SumOfTwo.
  template <class Grads>
  void step(const Adam& opt, float* params, Grads grads, std::size_t first, std::size_t last) {
    ++iterations_;
    host::for_each_index(last - first, kernels::BasicAdamStep<Grads>{params + first, grads + first, m_.data() + first,
                                                         v_.data() + first, opt.alpha(iterations_), opt.beta_1,
                                                         opt.beta_2, opt.epsilon});
  }
  std::int64_t iterations() const { return iterations_; }

 private:
  host::AlignedBuffer<float> m_, v_;
  std::size_t size_;
  std::int64_t iterations_ = 0;
};

}  // namespace lockstep
