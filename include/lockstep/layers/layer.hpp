// What a layer is. A layer policy L has `template <int In> struct Bind`, the
// layer with its input width known, which provides:
//   kIn, kOut, kParams                      compile-time shapes
//   init(float* params, seed, layer_index)  Keras' initialisers
//   forward(ctx, params, x, y, rows)        y(rows, kOut) from x(rows, kIn)
//   backward(ctx, params, x, y, dy, dx, dparams, rows)
//       given dy = dLoss/dy (may be overwritten), writes dparams and, when dx is
//       not null, dLoss/dx.
// ctx is the backend's context (host::Context, gpu::Context): the layer
// computes through its gemm / affine / for_each_index members, so one layer
// runs on every backend. A layer written without ctx (forward(params, x, y,
// rows)) still runs on the host backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "lockstep/backend/backends.hpp"
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

namespace detail {
template <class B, class Ctx, class T>
using forward_with_context = decltype(B::forward(std::declval<Ctx&>(), std::declval<const T*>(), std::declval<const T*>(),
                                                 std::declval<T*>(), 0));
template <class B, class Ctx, class T>
using backward_with_context =
    decltype(B::backward(std::declval<Ctx&>(), std::declval<const T*>(), std::declval<const T*>(),
                         std::declval<const T*>(), std::declval<T*>(), std::declval<T*>(), std::declval<T*>(), 0));
template <class Ctx>
inline constexpr bool is_host_context = std::is_same_v<typename Ctx::backend, Host>;

// Calls a bound layer's forward / backward with the context when it takes
// one, and without it (host only) when it was written before contexts.
template <class B, class Ctx, class T>
void layer_forward(Ctx& ctx, const T* params, const T* x, T* y, int rows) {
  if constexpr (is_detected<forward_with_context, B, Ctx, T>) {
    B::forward(ctx, params, x, y, rows);
  } else {
    static_assert(is_host_context<Ctx>,
                  "This layer's forward takes no context, so it runs on the host backend only: give it "
                  "template <class Ctx, class T> static void forward(Ctx& ctx, const T* params, const T* x, T* y, "
                  "int rows) and compute through ctx.");
    B::forward(params, x, y, rows);
  }
}
template <class B, class Ctx, class T>
void layer_backward(Ctx& ctx, const T* params, const T* x, const T* y, T* dy, T* dx, T* dparams, int rows) {
  if constexpr (is_detected<backward_with_context, B, Ctx, T>) {
    B::backward(ctx, params, x, y, dy, dx, dparams, rows);
  } else {
    static_assert(is_host_context<Ctx>,
                  "This layer's backward takes no context, so it runs on the host backend only: give it "
                  "template <class Ctx, class T> static void backward(Ctx& ctx, ...) and compute through ctx.");
    B::backward(params, x, y, dy, dx, dparams, rows);
  }
}
}  // namespace detail

template <class L, int In>
using bind_layer_t = typename detail::bind_layer<L, In>::type;

}  // namespace lockstep
