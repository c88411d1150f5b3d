// Element-wise activations. Each is a policy with a forward and a derivative
// written in terms of the output, so backward needs only the saved output.
// Used as Dense's second argument or, on its own, as a parameter-free layer.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "lockstep/core/config.hpp"

namespace lockstep {

struct Linear {
  static constexpr bool kIdentity = true;
  static constexpr const char* kName = "linear";
  template <class T>
  LOCKSTEP_HOST_DEVICE static T forward(T x) { return x; }
  template <class T>
  LOCKSTEP_HOST_DEVICE static T derivative_from_output(T) { return T(1); }
};

struct Relu {
  static constexpr bool kIdentity = false;
  static constexpr const char* kName = "relu";
  template <class T>
  LOCKSTEP_HOST_DEVICE static T forward(T x) { return x > T(0) ? x : T(0); }
  template <class T>
  LOCKSTEP_HOST_DEVICE static T derivative_from_output(T y) { return y > T(0) ? T(1) : T(0); }
};

struct Sigmoid {
  static constexpr bool kIdentity = false;
  static constexpr const char* kName = "sigmoid";
  template <class T>
  LOCKSTEP_HOST_DEVICE static T forward(T x) { return T(1) / (T(1) + std::exp(-x)); }
  template <class T>
  LOCKSTEP_HOST_DEVICE static T derivative_from_output(T y) { return y * (T(1) - y); }
};

struct Tanh {
  static constexpr bool kIdentity = false;
  static constexpr const char* kName = "tanh";
  template <class T>
  LOCKSTEP_HOST_DEVICE static T forward(T x) { return std::tanh(x); }
  template <class T>
  LOCKSTEP_HOST_DEVICE static T derivative_from_output(T y) { return T(1) - y * y; }
};

namespace detail {
template <class T, class = void>
struct is_activation : std::false_type {};
template <class T>
struct is_activation<T, std::void_t<decltype(T::kIdentity), decltype(T::forward(0.0f)),
                                    decltype(T::derivative_from_output(0.0f))>> : std::true_type {};
}  // namespace detail

template <class T>
inline constexpr bool is_activation_v = detail::is_activation<T>::value;

// Functors shared by host loops and CUDA kernels.
namespace kernels {

// y[i] = Act(x[i]).
template <class Act, class T = float>
struct Activate {
  const T* x;
  T* y;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { y[i] = Act::forward(x[i]); }
};

// y[i] = Act(y[i]) in place.
template <class Act, class T = float>
struct ActivateInPlace {
  T* y;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { y[i] = Act::forward(y[i]); }
};

// dx[i] = Act'(y[i]) dy[i]: turns the gradient of the output into that of
// the input. The derivative comes first: g++ 12 vectorises Relu's
// `y > 0 ? 1 : 0` times dy in that order only (dy times it became a branch
// per value, the whole Relu layer's backward run one float at a time).
template <class Act, class T = float>
struct ActivationBackward {
  const T* y;
  const T* dy;
  T* dx;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { dx[i] = Act::derivative_from_output(y[i]) * dy[i]; }
};

}  // namespace kernels
}  // namespace lockstep
