// The options shared by the windowed layers (Conv2D, MaxPooling2D,
// AveragePooling2D), spelled as types because they are template arguments:
//   Strides<H, W = H>   Keras' strides=(H, W)
//   Valid, Same         Keras' padding='valid' / padding='same'
// and the compile-time geometry of such a layer on an (H, W, C) input.
#pragma once

#include <type_traits>
#include <utility>

#include "lockstep/core/shape.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep {

template <int H, int W = H>
struct Strides {
  static_assert(H > 0 && W > 0, "Strides<H, W>: strides must be positive, as Keras' strides=(1, 1) is Strides<1, 1>.");
  static constexpr int kH = H, kW = W;
};

// padding='valid': only windows that fit inside the input.
struct Valid {
  static constexpr bool kSame = false;
  static constexpr const char* kName = "valid";
};
// padding='same': ceil(in / stride) outputs per axis; TensorFlow's padding,
// the odd one at the bottom and right.
struct Same {
  static constexpr bool kSame = true;
  static constexpr const char* kName = "same";
};

namespace detail {
template <class S>
struct is_strides : std::false_type {};
template <int H, int W>
struct is_strides<Strides<H, W>> : std::true_type {};
template <class P>
inline constexpr bool is_padding_v = std::is_same_v<P, Valid> || std::is_same_v<P, Same>;

template <class Ctx>
using conv2d_probe = decltype(std::declval<Ctx&>().conv2d_backward(
    std::declval<const Window2D&>(), static_cast<const float*>(nullptr), static_cast<const float*>(nullptr),
    static_cast<const float*>(nullptr), static_cast<float*>(nullptr), static_cast<float*>(nullptr),
    static_cast<float*>(nullptr), 0));
template <class Ctx, class Act, class T>
using conv2d_activation_probe = decltype(std::declval<Ctx&>().template conv2d_activation_backward<Act>(
    std::declval<const Window2D&>(), static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
    static_cast<const T*>(nullptr), static_cast<T*>(nullptr), static_cast<T*>(nullptr), static_cast<T*>(nullptr),
    static_cast<T*>(nullptr), 0));
template <class Ctx>
using pool2d_probe = decltype(std::declval<Ctx&>().pool2d_backward(
    PoolKind::kMax, std::declval<const Window2D&>(), static_cast<const float*>(nullptr),
    static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0));

// The geometry of a (KH, KW) window with strides S and padding P on the
// (H, W, C) shape In, giving OutC channels.
template <class In, int OutC, int KH, int KW, class S, class P>
constexpr Window2D window_on() {
  return window::make(In::kDims[0], In::kDims[1], In::kDims[2], OutC, KH, KW, S::kH, S::kW, P::kSame);
}
}  // namespace detail

// Whether a backend's context (host::Context, gpu::Context) has the
// convolution and pooling members the windowed layers call: a program built
// for several backends can leave a convnet out where they are missing.
template <class Ctx>
inline constexpr bool supports_conv2d_v =
    detail::is_detected<detail::conv2d_probe, Ctx> && detail::is_detected<detail::pool2d_probe, Ctx>;

namespace detail {
// Called by the windowed layers' forward, so that a context without the
// members gets this sentence instead of a missing-member error.
template <class Ctx>
constexpr bool check_windowed_context() {
  static_assert(supports_conv2d_v<Ctx>,
                "This backend's context has no convolutions (conv2d_forward, conv2d_backward, pool2d_forward, "
                "pool2d_backward; see backend/host/context.hpp). The CUDA backend has them in builds that found "
                "cuDNN (LOCKSTEP_HAVE_CUDNN): install cuDNN (or pip install nvidia-cudnn-cu13 and set CUDNN_ROOT "
                "to its nvidia/cudnn folder) and reconfigure, or train convolutional models on the host backend.");
  return true;
}
}  // namespace detail

}  // namespace lockstep
