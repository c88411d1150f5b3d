// Adam with Keras' defaults (lr 1e-3, beta_1 0.9, beta_2 0.999, epsilon 1e-7)
// and Keras' update, one fused pass over the flat buffer:
//   p -= p * weight_decay * lr                       (decoupled; 0 for Adam)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)
// AdamW is the same optimizer with Keras' weight decay default (0.004).
// One State for every backend (optim/optimizer.hpp has the contract).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace kernels {
// What one Adam update reads besides the buffers, set by State::prepare each step.
struct AdamScalars {
  float alpha;  // the step size of this update, bias correction folded in
  float beta_1, beta_2, epsilon;
  float decay;  // weight_decay * learning rate: the decoupled weight decay of this update
};
// Grads: a `const float*`, or a view that reads the gradient as it goes
// (host::SumOfTwo); g[i] is read once.
template <class Grads>
struct BasicAdamStep {
  float* p;
  Grads g;
  float* m;
  float* v;
  AdamScalars s;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const float gi = g[i];
    const float mi = s.beta_1 * m[i] + (1.0f - s.beta_1) * gi;
    const float vi = s.beta_2 * v[i] + (1.0f - s.beta_2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] - p[i] * s.decay;
    p[i] = pi - s.alpha * mi / (std::sqrt(vi) + s.epsilon);
  }
};
using AdamStep = BasicAdamStep<const float*>;
}  // namespace kernels

struct Adam {
  float learning_rate;
  float beta_1;
  float beta_2;
  float epsilon;
  float weight_decay = 0.0f;  // Keras' decoupled weight decay (AdamW's default: 0.004)

  // The parameters are checked as given (double), then kept as float.
  explicit Adam(double lr = 1e-3, double b1 = 0.9, double b2 = 0.999, double eps = 1e-7)
      : learning_rate(static_cast<float>(lr)),
        beta_1(static_cast<float>(b1)),
        beta_2(static_cast<float>(b2)),
        epsilon(static_cast<float>(eps)) {
    // Finite as the floats they are kept as: 1e39 would be an infinite step.
    require(lr > 0 && std::isfinite(learning_rate), "Adam: learning rate ", lr, ", expected a finite number > 0");
    require(b1 >= 0 && b1 < 1, "Adam: beta_1 ", b1, ", expected in [0, 1)");
    require(b2 >= 0 && b2 < 1, "Adam: beta_2 ", b2, ", expected in [0, 1)");
    require(eps > 0 && std::isfinite(epsilon), "Adam: epsilon ", eps, ", expected a finite number > 0");
  }

  // The step size of update t (1-based), bias correction folded in. Computed
  // in double once per step, so every replica and backend uses the same value.
  float alpha(std::int64_t t) const {
    const double td = static_cast<double>(t);
    return static_cast<float>(learning_rate * std::sqrt(1.0 - std::pow(double(beta_2), td)) /
                              (1.0 - std::pow(double(beta_1), td)));
  }

  template <class Ctx>
  class State;
};

template <class Ctx>
class Adam::State {
 public:
  State(const Adam&, std::size_t params) : m_(params), v_(params), scalars_(1) {}
  // Before each step, on the host: the next update's scalars from the
  // optimizer's current hyper-parameters (a learning rate a callback changed
  // takes effect here, also for a step replayed from a CUDA graph).
  void prepare(const Adam& opt) {
    ++iterations_;
    *scalars_.data() = kernels::AdamScalars{opt.alpha(iterations_), opt.beta_1, opt.beta_2, opt.epsilon,
                                            opt.weight_decay * opt.learning_rate};
  }
  // The update of the entries [first, last): the whole buffer, or a replica's
  // shard under a sharded update. grads[i] is the gradient of parameter i.
  template <class Grads>
  void step(Ctx& ctx, float* params, Grads grads, std::size_t first, std::size_t last) {
    ctx.for_each_index_reading(
        last - first,
        kernels::BasicAdamStep<Grads>{params + first, grads + first, m_.data() + first, v_.data() + first, {}},
        scalars_.data());
  }
  std::int64_t iterations() const { return iterations_; }
  void set_iterations(std::int64_t t) { iterations_ = t; }
  // The slots, for snapshots: f(name, data, size) in the backend's memory.
  template <class F>
  void for_each_slot(F&& f) {
    f("m", m_.data(), m_.size());
    f("v", v_.data(), v_.size());
  }

 private:
  typename Ctx::template buffer<float> m_, v_;
  typename Ctx::template host_visible_buffer<kernels::AdamScalars> scalars_;
  std::int64_t iterations_ = 0;
};

// AdamW: Adam with decoupled weight decay, Keras' defaults (learning rate
// 1e-3, weight_decay 0.004): each step first shrinks every variable by
// weight_decay * lr, then applies Adam's update.
struct AdamW : Adam {
  explicit AdamW(double lr = 1e-3, double decay = 0.004, double b1 = 0.9, double b2 = 0.999, double eps = 1e-7)
      : Adam(lr, b1, b2, eps) {
    require(decay >= 0 && decay < 1, "AdamW: weight_decay ", decay, ", expected in [0, 1)");
    weight_decay = static_cast<float>(decay);
  }
  template <class Ctx>
  using State = Adam::State<Ctx>;
};

}  // namespace lockstep
