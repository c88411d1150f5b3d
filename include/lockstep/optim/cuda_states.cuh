// The CUDA backend's optimizer states: the same kernels:: functors as the
// host's, launched on the replica's stream. Adam's step count and step size
// live in device memory and are advanced by a one-thread kernel, so that a
// step captured once in a CUDA graph applies the right bias correction every
// time it is replayed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/backends.hpp"
#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/context.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/optim/adam.hpp"
#include "lockstep/optim/sgd.hpp"

namespace lockstep {

namespace kernels {
// ++t; alpha = lr sqrt(1 - b2^t) / (1 - b1^t), in double as Adam::alpha.
struct AdamAdvance {
  std::int64_t* t;
  float* alpha;
  float learning_rate, beta_1, beta_2;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t) const {
    const double td = static_cast<double>(++*t);
    *alpha = static_cast<float>(learning_rate * sqrt(1.0 - pow(double(beta_2), td)) / (1.0 - pow(double(beta_1), td)));
  }
};
// AdamStep with the step size read from device memory.
struct AdamStepFromDevice {
  float* p;
  const float* g;
  float* m;
  float* v;
  const float* alpha;
  float beta_1, beta_2, epsilon;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    AdamStep{p, g, m, v, *alpha, beta_1, beta_2, epsilon}(i);
  }
};
}  // namespace kernels

template <>
class Adam::State<Cuda> {
 public:
  // Allocates on the current device (the replica's).
  State(const Adam&, std::size_t params) : m_(params), v_(params), t_(1), alpha_(1), size_(params) {}
  void step(gpu::Context& ctx, const Adam& opt, float* params, const float* grads) {
    ctx.for_each_index(1, kernels::AdamAdvance{t_.data(), alpha_.data(), opt.learning_rate, opt.beta_1, opt.beta_2});
    ctx.for_each_index(size_, kernels::AdamStepFromDevice{params, grads, m_.data(), v_.data(), alpha_.data(),
                                                          opt.beta_1, opt.beta_2, opt.epsilon});
  }
  // Updates applied so far (synchronises with the device). A plain cudaMemcpy
  // runs on the legacy default stream, which does not wait for the replica's
  // non-blocking stream: without the device synchronisation it could read t
  // before a pending AdamAdvance, or on another device than t's.
  std::int64_t iterations() const {
    gpu::DeviceGuard on(t_.device());
    LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
    std::int64_t t = 0;
    LOCKSTEP_CUDA_CHECK(cudaMemcpy(&t, t_.data(), sizeof t, cudaMemcpyDeviceToHost));
    return t;
  }

 private:
  gpu::DeviceBuffer<float> m_, v_;
  gpu::DeviceBuffer<std::int64_t> t_;
  gpu::DeviceBuffer<float> alpha_;
  std::size_t size_;
};

template <>
class Sgd::State<Cuda> {
 public:
  State(const Sgd& opt, std::size_t params) : velocity_(opt.momentum > 0 ? params : 0), size_(params) {}
  void step(gpu::Context& ctx, const Sgd& opt, float* params, const float* grads) {
    if (opt.momentum > 0) {
      if (velocity_.size() != size_) velocity_.resize(size_);  // momentum switched on between fits
      ctx.for_each_index(size_, kernels::SgdMomentumStep{params, grads, velocity_.data(), opt.learning_rate,
                                                         opt.momentum, opt.nesterov});
    } else {
      ctx.for_each_index(size_, kernels::SgdStep{params, grads, opt.learning_rate});
    }
  }

 private:
  gpu::DeviceBuffer<float> velocity_;
  std::size_t size_;
};

}  // namespace lockstep
