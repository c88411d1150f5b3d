// Flatten: Keras' Flatten, (H, W, C) per sample to one vector of H * W * C
// values in the same (row-major, channels last) order: a copy, no parameters.
#pragma once

#include <cstddef>

#include "lockstep/core/shape.hpp"
#include "lockstep/layers/layer.hpp"

namespace lockstep {

struct Flatten {
  template <class In>
  struct Bind {
    static constexpr const char* kName = "flatten";
    using out_shape = Shape<In::kSize>;
    static constexpr int kIn = In::kSize, kOut = In::kSize;
    static constexpr std::size_t kParams = 0;
    static void init(float*, std::uint64_t, std::uint64_t) {}
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T>, const T* x, T* y, int rows) {
      ctx.copy(y, x, static_cast<std::size_t>(rows) * kIn);
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P&, Slots<T>, const T*, const T*, T* dy, T* dx, T*, int rows) {
      if (dx) ctx.copy(dx, dy, static_cast<std::size_t>(rows) * kIn);
    }
  };
};

}  // namespace lockstep
