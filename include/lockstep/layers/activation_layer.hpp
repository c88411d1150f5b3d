// An element-wise activation used as a layer of its own: no parameters.
#pragma once

#include <cstdint>

#include "lockstep/backend/host/launch.hpp"
#include "lockstep/layers/activations.hpp"
#include "lockstep/layers/layer.hpp"

namespace lockstep {

template <class Act>
struct ActivationLayer {
  template <int In>
  struct Bind : detail::ParameterFree<In> {
    using detail::ParameterFree<In>::kIn;
    template <class T>
    static void forward(const T*, const T* x, T* y, int rows) {
      const std::size_t n = static_cast<std::size_t>(rows) * kIn;
      for (std::size_t i = 0; i < n; ++i) y[i] = Act::forward(x[i]);
    }
    template <class T>
    static void backward(const T*, const T*, const T* y, T* dy, T* dx, T*, int rows) {
      if (!dx) return;
      host::for_each_index(static_cast<std::size_t>(rows) * kIn, kernels::ActivationBackward<Act, T>{y, dy, dx});
    }
  };
};

}  // namespace lockstep
