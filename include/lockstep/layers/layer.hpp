// What a layer is. A layer policy L has `template <int In> struct Bind`, the
// layer with its input width known, which provides:
//   kIn, kOut, kParams                      compile-time shapes
//   init(float* params, seed, layer_index)  Keras' initialisers
//   forward(params, x, y, rows)             y(rows, kOut) from x(rows, kIn)
//   backward(params, x, y, dy, dx, dparams, rows)
//       given dy = dLoss/dy (may be overwritten), writes dparams and, when dx is
//       not null, dLoss/dx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lockstep/core/traits.hpp"
#include "lockstep/layers/activations.hpp"

namespace lockstep {

template <class Act>
struct ActivationLayer;

namespace detail {
template <class L>
using bind_probe = typename L::template Bind<1>;

template <class L, int In, bool IsActivation = is_activation_v<L>>
struct bind_layer {
  static_assert(is_detected<bind_probe, L>,
                "This type is not a lockstep layer: write Dense<Units, Activation>, an activation such as Relu, "
                "or a type with a nested template <int In> struct Bind.");
  using type = typename L::template Bind<In>;
};
// An activation on its own (Sequential<..., Relu>) is a parameter-free layer.
template <class L, int In>
struct bind_layer<L, In, true> {
  using type = typename ActivationLayer<L>::template Bind<In>;
};

// The shapes and no-op initialiser of a layer without parameters (activations, softmax).
template <int In>
struct ParameterFree {
  static constexpr int kIn = In, kOut = In;
  static constexpr std::size_t kParams = 0;
  static void init(float*, std::uint64_t, std::uint64_t) {}
};
}  // namespace detail

template <class L, int In>
using bind_layer_t = typename detail::bind_layer<L, In>::type;

}  // namespace lockstep
