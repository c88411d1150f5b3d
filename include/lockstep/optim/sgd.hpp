// Sgd with optional momentum and Nesterov momentum, in Keras' formulation:
//   v = momentum * v - lr * g;  p += v            (plain momentum)
//   p += momentum * v - lr * g                    (nesterov, after updating v)
#pragma once

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
struct BasicSgdStep {
  float* p;
  Grads g;
  float lr;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { p[i] -= lr * g[i]; }
};
template <class Grads>
struct BasicSgdMomentumStep {
  float* p;
  Grads g;
  float* v;
  float lr, momentum;
  bool nesterov;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const float gi = g[i];
    const float vi = momentum * v[i] - lr * gi;
    v[i] = vi;
    p[i] += nesterov ? momentum * vi - lr * gi : vi;
  }
};
using SgdStep = BasicSgdStep<const float*>;
using SgdMomentumStep = BasicSgdMomentumStep<const float*>;
}  // namespace kernels

struct Sgd {
  float learning_rate;
  float momentum;
  bool nesterov;

  explicit Sgd(double learning_rate = 0.01, double momentum = 0.0, bool nesterov = false)
      : learning_rate(static_cast<float>(learning_rate)), momentum(static_cast<float>(momentum)), nesterov(nesterov) {
    require(learning_rate > 0, "Sgd: learning rate ", learning_rate, ", expected > 0");
    require(momentum >= 0 && momentum < 1, "Sgd: momentum ", momentum, ", expected in [0, 1)");
  }

  template <class Backend>
  class State {
    static_assert(dependent_false<Backend>, "Sgd has no state for this backend here: for Cuda include <lockstep/cuda.hpp> and compile with nvcc.");
  };
};

template <>
class Sgd::State<Host> {
 public:
  State(const Sgd& opt, std::size_t params) : velocity_(opt.momentum > 0 ? params : 0), size_(params) {}
  template <class Ctx>
  void step(Ctx&, const Sgd& opt, float* params, const float* grads) {
    step(opt, params, grads);
  }
  void step(const Sgd& opt, float* params, const float* grads) { step(opt, params, grads, 0, size_); }
  // One update of the entries [first, last) only (a replica's shard); grads
  // as in Adam's ranged step.
  template <class Grads>
  void step(const Sgd& opt, float* params, Grads grads, std::size_t first, std::size_t last) {
    if (opt.momentum > 0) {
      if (velocity_.size() != size_) velocity_.resize(size_);  // momentum switched on between fits
      host::for_each_index(last - first, kernels::BasicSgdMomentumStep<Grads>{params + first, grads + first,
                                                                  velocity_.data() + first, opt.learning_rate,
                                                                  opt.momentum, opt.nesterov});
    } else {
      host::for_each_index(last - first, kernels::BasicSgdStep<Grads>{params + first, grads + first, opt.learning_rate});
    }
    ++iterations_;
  }
  std::int64_t iterations() const { return iterations_; }

 private:
  host::AlignedBuffer<float> velocity_;
  std::size_t size_;
  std::int64_t iterations_ = 0;
};

}  // namespace lockstep
