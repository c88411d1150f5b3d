// host::Context: what a layer, loss or optimizer calls to compute on the host
// backend. gpu::Context (backend/cuda/context.cuh) has the same members,
// run on a replica's stream, so layers are written once for both backends:
//   template <class Ctx, class T> static void forward(Ctx& ctx, ...);
// The host context holds one choice, its GEMM: the build's (oneDNN, a BLAS
// or the built-in one), or always lockstep's chain GEMM, whose bits do not
// depend on how the rows are split (the deterministic row-order scheme,
// core/determinism.hpp). Its work runs on the calling thread, and its queue
// (what collectives take where a GPU takes a stream) is an empty value.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/chain_gemm_threads.hpp"
#include "lockstep/backend/host/conv.hpp"
#include "lockstep/backend/host/conv_onednn.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/backend/host/pool.hpp"
#include "lockstep/backend/host/queue.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep::host {

class Context {
 public:
  using backend = ::lockstep::Host;
  using queue_type = Queue;
  // Memory a replica computes on (parameters, activations, gradients).
  template <class T>
  using buffer = AlignedBuffer<T>;
  // Memory the host writes between steps and kernels read when they run
  // (an optimizer's per-step scalars): ordinary memory here.
  template <class T>
  using host_visible_buffer = AlignedBuffer<T>;

  enum class GemmPath { kBuild, kChain };
  Context() = default;
  explicit Context(GemmPath path) : chain_(path == GemmPath::kChain) {}

  Queue queue() const { return {}; }
  void synchronize() {}

  // Row-major C(m,n) = alpha op(A) op(B) + beta C.
  template <class T>
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
            T beta, T* c, int ldc) {
    if constexpr (std::is_same_v<T, float>) {
      if (chain_) {
        require(alpha == 1.0f && (beta == 0.0f || beta == 1.0f), "host::Context: the chain GEMM takes alpha 1 and "
                "beta 0 or 1, given alpha ", alpha, " and beta ", beta);
        if (m > 0 && n > 0)
          chain_gemm_threads(detail::gemm_threads_here(), trans_a, trans_b, m, n, k, a, lda, b, ldb, beta == 1.0f, c,
                             ldc);
        return;
      }
    }
    host::gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  // y(rows, out) = Act(x(rows, in) w(in, out) + b(out)): Dense's forward.
  template <class Act, class T>
  void affine(const T* x, const T* w, const T* b, T* y, int rows, int in, int out) {
    const std::size_t width = static_cast<std::size_t>(out);
    if constexpr (std::is_same_v<T, float>) {
      if (chain_) {
        // The chains start from b and a Relu is applied as they are stored:
        // one pass over y, the same floats as the three below.
        constexpr bool kRelu = std::is_same_v<Act, Relu>;
        chain_affine_threads(detail::gemm_threads_here(), rows, out, in, x, in, w, out, b, kRelu, y, out);
        if constexpr (!Act::kIdentity && !kRelu)
          for_each_index(static_cast<std::size_t>(rows) * width, kernels::ActivateInPlace<Act, T>{y});
        return;
      }
    }
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<std::size_t>(r) * width, b, width * sizeof(T));
    gemm<T>(false, false, rows, out, in, T(1), x, in, w, out, T(1), y, out);
    if constexpr (!Act::kIdentity)
      for_each_index(static_cast<std::size_t>(rows) * width, kernels::ActivateInPlace<Act, T>{y});
  }

  // Convolution and pooling over NHWC samples, for layers/conv2d.hpp and
  // layers/pooling.hpp. The geometry is a plain Window2D (ops/window2d.hpp);
  // the tensors are (rows, H, W, C) and Keras' kernel (KH, KW, Cin, Cout).
  // These signatures are the backend contract: gpu::Context implements the
  // same members (cuDNN), so keep them plain. A backend may keep per-shape
  // state behind them (oneDNN primitives here, cuDNN descriptors, the chosen
  // algorithm and its workspace there), keyed by (geometry, rows): a call
  // with a shape seen before must not allocate. The layers never pass
  // rows == 0 (cuDNN has no empty tensors); the host accepts it.
  //
  // y = Act(conv(x, kernel) + bias); bias may be null (use_bias=False).
  template <class Act, class T>
  void conv2d_forward(const Window2D& g, const T* x, const T* kernel, const T* bias, T* y, int rows) {
#if defined(LOCKSTEP_HAVE_ONEDNN)
    if constexpr (std::is_same_v<T, float>) {
      if (conv_path() == ConvPath::kOneDnn) return onednn::conv2d_forward<Act>(g, x, kernel, bias, y, rows);
    }
#endif
    builtin::conv2d_forward<Act>(g, x, kernel, bias, y, rows);
  }
  // Given dy = dLoss/d(conv + bias), writes all of dkernel, dbias unless
  // null, and dx unless null (the first layer needs no input gradient).
  template <class T>
  void conv2d_backward(const Window2D& g, const T* x, const T* kernel, const T* dy, T* dx, T* dkernel, T* dbias,
                       int rows) {
#if defined(LOCKSTEP_HAVE_ONEDNN)
    if constexpr (std::is_same_v<T, float>) {
      if (conv_path() == ConvPath::kOneDnn) return onednn::conv2d_backward(g, x, kernel, dy, dx, dkernel, dbias, rows);
    }
#endif
    // A Linear activation leaves dy unwritten.
    builtin::conv2d_backward<Linear>(g, x, static_cast<const T*>(nullptr), kernel, const_cast<T*>(dy), dx, dkernel,
                                     dbias, rows);
  }
  // Optional in the contract (Conv2D detects it): the same after forward gave
  // y = Act(conv + bias), from dy = dLoss/dy, which it may overwrite; the
  // host applies Act's derivative inside its own loops instead of in a pass
  // over the whole tensor (the largest of the Keras convnet).
  template <class Act, class T>
  void conv2d_activation_backward(const Window2D& g, const T* x, const T* y, const T* kernel, T* dy, T* dx,
                                  T* dkernel, T* dbias, int rows) {
#if defined(LOCKSTEP_HAVE_ONEDNN)
    if constexpr (std::is_same_v<T, float>) {
      if (conv_path() == ConvPath::kOneDnn) {
        detail::activation_backward<Act>(y, dy, static_cast<std::size_t>(rows) * g.out_size());
        return onednn::conv2d_backward(g, x, kernel, dy, dx, dkernel, dbias, rows);
      }
    }
#endif
    builtin::conv2d_backward<Act>(g, x, y, kernel, dy, dx, dkernel, dbias, rows);
  }
  // y(rows, OH, OW, C) = the max or mean of each window of x (Same padding's
  // positions excluded from a mean's count, as TensorFlow does).
  template <class T>
  void pool2d_forward(PoolKind kind, const Window2D& g, const T* x, T* y, int rows) {
    builtin::pool2d_forward(kind, g, x, y, rows);
  }
  // dx from dy, x and y (max: to the first position holding the maximum).
  template <class T>
  void pool2d_backward(PoolKind kind, const Window2D& g, const T* x, const T* y, const T* dy, T* dx, int rows) {
    builtin::pool2d_backward(kind, g, x, y, dy, dx, rows);
  }

  // out(cols) = the sum over rows of m(rows, cols): a bias gradient.
  template <class T>
  void column_sums(const T* m, int rows, int cols, T* out) {
    const std::size_t width = static_cast<std::size_t>(cols);
    if (rows == 0) {
      zero(out, width);
      return;
    }
    std::memcpy(out, m, width * sizeof(T));
    for (int r = 1; r < rows; ++r) {
      const T* row = m + static_cast<std::size_t>(r) * width;
      for (std::size_t j = 0; j < width; ++j) out[j] += row[j];
    }
  }

  // f(i) for i in [0, n); f touches element i only.
  template <class F>
  void for_each_index(std::size_t n, const F& f) {
    host::for_each_index(n, f);
  }
  // f(row) for row in [0, rows).
  template <class F>
  void for_each_row(std::size_t rows, const F& f) {
    host::for_each_row(rows, f);
  }

  // f(i) for i in [0, n), where f's member `s` (its per-step scalars) is
  // taken from *scalars when the work runs, not when it is enqueued: what a
  // replayed CUDA graph needs, and on the host simply the current value.
  template <class F, class S>
  void for_each_index_reading(std::size_t n, F f, const S* scalars) {
    f.s = *scalars;
    host::for_each_index(n, f);
  }

  // *out = the sum of v[0..n), added in order in double and rounded once.
  template <class T>
  void sum_to(const T* v, std::size_t n, T* out) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += v[i];
    *out = static_cast<T>(s);
  }

  // Copies between host memory and this backend's (the same here).
  template <class T>
  void to_host(T* host, const T* src, std::size_t n) {
    copy(host, src, n);
  }
  template <class T>
  void from_host(T* dst, const T* host, std::size_t n) {
    copy(dst, host, n);
  }

  template <class T>
  void zero(T* p, std::size_t n) {
    if (n) std::memset(static_cast<void*>(p), 0, n * sizeof(T));
  }
  // Copies n elements between two buffers of this backend.
  template <class T>
  void copy(T* dst, const T* src, std::size_t n) {
    if (n) std::memcpy(static_cast<void*>(dst), src, n * sizeof(T));
  }

 private:
  bool chain_ = false;
};

}  // namespace lockstep::host
