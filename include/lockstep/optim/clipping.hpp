// GlobalClipNorm<Opt>: Keras' global_clipnorm for any optimizer: before each
// update the all-reduced gradient g is scaled by clip / max(||g||, clip), its
// norm taken over every parameter. ClipNorm<Opt>: Keras' clipnorm: each
// variable's gradient (a Dense kernel, a bias, ...) by its own norm. Every replica holds the same reduced
// gradient and computes the same norm in the same order, so all clip alike.
// It needs the whole gradient in one step: under a strategy whose step
// updates shards (the host's sharded update) the executor runs the mirrored
// all-reduce step instead (kNeedsWholeGradient).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

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
  // The host's loop (host::for_each_index): the norm and the factor once,
  // the same bits; per value, the square root and the branch kept g++ from
  // vectorising it.
  void host_loop(std::size_t n) const {
    const float norm = std::sqrt(*sum_of_squares);
    if (!(norm > s)) return;
    const float factor = s / norm;
    LOCKSTEP_INDEPENDENT_ITERATIONS
    for (std::size_t i = 0; i < n; ++i) g[i] *= factor;
  }
};
}  // namespace kernels

namespace detail {
// Scales g[0, n) by clip / max(||g||, clip), the clip read when the kernels run.
template <class Ctx>
void clip_by_norm(Ctx& ctx, float* g, std::size_t n, float* squares, float* sum, const float* clip) {
  ctx.for_each_index(n, kernels::Square{g, squares});
  ctx.sum_to(squares, n, sum);
  ctx.for_each_index_reading(n, kernels::ClipByGlobalNorm{g, sum, 0.0f}, clip);
}
}  // namespace detail

// Both clippings: the gradient cut into ranges (one range, the whole buffer,
// for the global norm; one per trainable variable otherwise), each scaled by
// clip / max(its norm, clip) before Opt's update.
template <class Opt, bool PerVariable>
struct BasicClipNorm : Opt {
  float clip;
  BasicClipNorm(Opt opt, double c) : Opt(std::move(opt)), clip(static_cast<float>(c)) {
    require(c > 0 && std::isfinite(c), PerVariable ? "ClipNorm: clipnorm " : "GlobalClipNorm: global_clipnorm ", c,
            ", expected a finite value > 0");
  }

  template <class Ctx>
  class State : public Opt::template State<Ctx> {
    using Base = typename Opt::template State<Ctx>;

   public:
    static constexpr bool kNeedsWholeGradient = true;
    State(const BasicClipNorm& opt, std::size_t params)
        : Base(opt, params), squares_(params), sums_(1), clip_(1), size_(params), ranges_{{0, params}} {}
    // The model's trainable variables, each clipped by its own norm (ignored by the global norm).
    void set_variables(const std::vector<std::pair<std::size_t, std::size_t>>& ranges) {
      if (!PerVariable) return;
      ranges_ = ranges;
      sums_.resize(ranges_.size());
    }
    void prepare(const BasicClipNorm& opt) {
      *clip_.data() = opt.clip;
      Base::prepare(opt);
    }
    // The reduced gradient is this step's own buffer, so it is scaled in place.
    void step(Ctx& ctx, float* params, const float* grads, std::size_t first, std::size_t last) {
      require(first == 0 && last == size_, PerVariable ? "ClipNorm" : "GlobalClipNorm", ": an update of [", first,
              ", ", last, ") of ", size_, " parameters; clipping needs the whole gradient");
      float* g = const_cast<float*>(grads);
      for (std::size_t v = 0; v < ranges_.size(); ++v)
        detail::clip_by_norm(ctx, g + ranges_[v].first, ranges_[v].second, squares_.data() + ranges_[v].first,
                             sums_.data() + v, clip_.data());
      Base::step(ctx, params, static_cast<const float*>(g), first, last);
    }

   private:
    typename Ctx::template buffer<float> squares_, sums_;
    typename Ctx::template host_visible_buffer<float> clip_;
    std::size_t size_;
    std::vector<std::pair<std::size_t, std::size_t>> ranges_;
  };
};

// Keras' global_clipnorm: the norm over every parameter.
template <class Opt>
using GlobalClipNorm = BasicClipNorm<Opt, false>;
// Keras' clipnorm: each variable by its own norm.
template <class Opt>
using ClipNorm = BasicClipNorm<Opt, true>;

}  // namespace lockstep
