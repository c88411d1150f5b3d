// An element-wise activation used as a layer of its own: no parameters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/layers/layer.hpp"
#include "lockstep/ops/activations.hpp"

namespace lockstep {

template <class Act>
struct ActivationLayer {
  template <class In>
  struct Bind : detail::ShapePreserving<In> {
    static constexpr const char* kName = "activation";
    // The layer before may run this one inside it (Sequential: kFuses).
    using activation = Act;
    using detail::ShapePreserving<In>::kIn;
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T>, const T* x, T* y, int rows) {
      ctx.for_each_index(static_cast<std::size_t>(rows) * kIn, kernels::Activate<Act, T>{x, y});
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P&, Slots<T>, const T*, const T* y, T* dy, T* dx, T*, int rows) {
      if (!dx) return;
      ctx.for_each_index(static_cast<std::size_t>(rows) * kIn, kernels::ActivationBackward<Act, T>{y, dy, dx});
    }
  };
};

}  // namespace lockstep
