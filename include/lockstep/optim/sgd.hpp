// Sgd with optional momentum and Nesterov momentum, in Keras' formulation:
//   v = momentum * v - lr * g;  p += v            (plain momentum)
//   p += momentum * v - lr * g                    (nesterov, after updating v)
// and p -= lr * g without momentum. One State for every backend.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace kernels {
struct SgdScalars {
  float learning_rate, momentum;
  bool nesterov;
};
// One kernel for both forms, so that a graph captured without momentum still
// applies momentum switched on later: the branch is uniform across the launch.
// Grads: a `const float*`, or a view that reads the gradient as it goes
// (host::SumOfTwo); g[i] is read once.
template <class Grads>
struct BasicSgdStep {
  float* p;
  Grads g;
  float* v;
  SgdScalars s;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const float gi = g[i];
    if (s.momentum == 0.0f) {
      p[i] -= s.learning_rate * gi;
      return;
    }
    const float vi = s.momentum * v[i] - s.learning_rate * gi;
    v[i] = vi;
    p[i] += s.nesterov ? s.momentum * vi - s.learning_rate * gi : vi;
  }
};
using SgdStep = BasicSgdStep<const float*>;
}  // namespace kernels

struct Sgd {
  float learning_rate;
  float momentum;
  bool nesterov;

  explicit Sgd(double lr = 0.01, double mom = 0.0, bool use_nesterov = false)
      : learning_rate(static_cast<float>(lr)), momentum(static_cast<float>(mom)), nesterov(use_nesterov) {
    // Finite as the float it is kept as: 1e39 would be an infinite step.
    require(lr > 0 && std::isfinite(learning_rate), "Sgd: learning rate ", lr, ", expected a finite number > 0");
    require(mom >= 0 && mom < 1, "Sgd: momentum ", mom, ", expected in [0, 1)");
  }

  template <class Ctx>
  class State;
};

template <class Ctx>
class Sgd::State {
 public:
  // The velocity is allocated even without momentum: momentum may be switched
  // on inside a fit, when no allocation may happen (a step being captured).
  State(const Sgd&, std::size_t params) : velocity_(params), scalars_(1) {}
  void prepare(const Sgd& opt) {
    ++iterations_;
    *scalars_.data() = kernels::SgdScalars{opt.learning_rate, opt.momentum, opt.nesterov};
  }
  template <class Grads>
  void step(Ctx& ctx, float* params, Grads grads, std::size_t first, std::size_t last) {
    ctx.for_each_index_reading(
        last - first, kernels::BasicSgdStep<Grads>{params + first, grads + first, velocity_.data() + first, {}},
        scalars_.data());
  }
  std::int64_t iterations() const { return iterations_; }
  void set_iterations(std::int64_t t) { iterations_ = t; }
  template <class F>
  void for_each_slot(F&& f) {
    f("velocity", velocity_.data(), velocity_.size());
  }

 private:
  typename Ctx::template buffer<float> velocity_;
  typename Ctx::template host_visible_buffer<kernels::SgdScalars> scalars_;
  std::int64_t iterations_ = 0;
};

}  // namespace lockstep
