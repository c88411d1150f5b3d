// GlobalClipNorm<Opt>: Keras' global_clipnorm for any optimizer: before each
// update the all-reduced gradient g is scaled by clip / max(||g||, clip), its
// norm taken over every parameter. Every replica holds the same reduced
// gradient and computes the same norm in the same order, so all clip alike.
// It needs the whole gradient in one step: under a strategy whose step
// updates shards (the host's sharded update) the executor runs the mirrored
// all-reduce step instead (kNeedsWholeGradient).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace kernels {
// out[i] = g[i]^2.
struct Square {
  const float* g;
  float* out;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { out[i] = g[i] * g[i]; }
};
// g[i] *= clip / max(sqrt(*sum_of_squares), clip); s is the clip, read when the kernel runs.
struct ClipByGlobalNorm {
  float* g;
  const float* sum_of_squares;
  float s;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const float norm = std::sqrt(*sum_of_squares);
    if (norm > s) g[i] *= s / norm;
  }
};
}  // namespace kernels

template <class Opt>
struct GlobalClipNorm : Opt {
  float global_clipnorm;
  GlobalClipNorm(Opt opt, double clip) : Opt(std::move(opt)), global_clipnorm(static_cast<float>(clip)) {
    require(clip > 0 && std::isfinite(clip), "GlobalClipNorm: global_clipnorm ", clip, ", expected a finite value > 0");
  }

  template <class Ctx>
  class State : public Opt::template State<Ctx> {
    using Base = typename Opt::template State<Ctx>;

   public:
    static constexpr bool kNeedsWholeGradient = true;
    State(const GlobalClipNorm& opt, std::size_t params)
        : Base(opt, params), squares_(params), sum_(1), clip_(1), size_(params) {}
    void prepare(const GlobalClipNorm& opt) {
      *clip_.data() = opt.global_clipnorm;
      Base::prepare(opt);
    }
    // The reduced gradient is this step's own buffer, so it is scaled in place.
    void step(Ctx& ctx, float* params, const float* grads, std::size_t first, std::size_t last) {
      require(first == 0 && last == size_, "GlobalClipNorm: an update of [", first, ", ", last, ") of ", size_,
              " parameters; the global norm needs the whole gradient");
      float* g = const_cast<float*>(grads);
      ctx.for_each_index(size_, kernels::Square{g, squares_.data()});
      ctx.sum_to(squares_.data(), size_, sum_.data());
      ctx.for_each_index_reading(size_, kernels::ClipByGlobalNorm{g, sum_.data(), 0.0f}, clip_.data());
      Base::step(ctx, params, static_cast<const float*>(g), first, last);
    }

   private:
    typename Ctx::template buffer<float> squares_, sum_;
    typename Ctx::template host_visible_buffer<float> clip_;
    std::size_t size_;
  };
};

}  // namespace lockstep
