// gpu::Context: what a layer, loss or optimizer calls to compute on one
// replica's GPU. It has the members of host::Context (backend/host/context.hpp),
// so layers written as
//   template <class Ctx, class T> static void forward(Ctx& ctx, ...);
// run on both backends. Every call only enqueues work on the context's stream
// and returns; synchronize() waits for it. Calls need the context's device to
// be current on the calling thread (replica threads make it current once).
// Convolutions run through cuDNN (backend/cuda/conv.cuh) in builds that found
// it (LOCKSTEP_HAVE_CUDNN); without it the context has no conv2d members, so
// lockstep::supports_conv2d_v<gpu::Context> is false and a Conv2D model on
// GPUs stops at compile time with a sentence (layers/window.hpp). Pooling is
// lockstep's own kernels (backend/cuda/pool.cuh), in every build.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/cuda/blas.cuh"
#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/check.cuh"
#include "lockstep/backend/cuda/device.cuh"
#include "lockstep/backend/cuda/launch.cuh"
#include "lockstep/backend/cuda/pool.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/core/config.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"
#if defined(LOCKSTEP_HAVE_CUDNN)
#include "lockstep/backend/cuda/conv.cuh"
#endif

namespace lockstep::kernels {

// out[j] = the sum over rows of m(rows, cols)[., j]: one thread per column, so
// neighbouring threads read neighbouring addresses of each row (coalesced), and
// rows are added in order from row 0, the host's order. rows == 0 gives 0.
template <class T = float>
struct ColumnSum {
  const T* m;
  T* out;
  int rows;
  int cols;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t j) const {
    const std::size_t width = static_cast<std::size_t>(cols);
    T sum = 0;
    for (int r = 0; r < rows; ++r) sum += m[static_cast<std::size_t>(r) * width + j];
    out[j] = sum;
  }
};

// Runs F with its per-step scalars `s` read from host-visible memory when the
// kernel runs: a CUDA graph captured once replays with the current values.
template <class F, class S>
struct ReadingScalars {
  F f;
  const S* scalars;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    F g = f;
    g.s = *scalars;
    g(i);
  }
};

}  // namespace lockstep::kernels

namespace lockstep::gpu {

namespace detail {

// The threads of sum_in_fixed_order's one block.
inline constexpr unsigned kSumThreads = 256;

// *out = the sum of v[0..n): a step's loss or metric sum over a slice of rows.
// One block; thread t adds v[t], v[t + 256], v[t + 512], ... in that order in
// double, then the 256 partial sums are added by a fixed tree in shared
// memory, and the total is rounded to T once (as host::Context::sum_to rounds
// its double sum). Which element goes to which thread and the order of every
// addition are fixed, so the result is the same bits on every run, whatever
// the timing of the threads. n == 0 gives 0.
template <class T>
__global__ void __launch_bounds__(kSumThreads) sum_in_fixed_order(const T* v, std::size_t n, T* out) {
  __shared__ double partial[kSumThreads];
  const unsigned t = threadIdx.x;
  double s = 0;
  for (std::size_t i = t; i < n; i += kSumThreads) s += static_cast<double>(v[i]);
  partial[t] = s;
  __syncthreads();
  for (unsigned half = kSumThreads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) *out = static_cast<T>(partial[0]);
}

}  // namespace detail

class Context {
 public:
  using backend = ::lockstep::Cuda;
  using queue_type = cudaStream_t;
  // Memory a replica computes on (parameters, activations, gradients).
  template <class T>
  using buffer = DeviceBuffer<T>;
  // Memory the host writes between steps and kernels read when they run (an
  // optimizer's per-step scalars): pinned host memory, which kernels read
  // through unified addressing, so a replayed graph sees the current values.
  template <class T>
  using host_visible_buffer = PinnedBuffer<T>;

  // A context on `device`, with its own stream and cuBLAS handles there.
  explicit Context(int device) : Context(device, DeviceGuard(existing(device))) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&&) noexcept = default;
  Context& operator=(Context&&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  cudaStream_t queue() const { return stream_.get(); }
  Blas& blas() { return blas_; }
  // TF32 tensor cores for gemm and affine (see Blas::set_tf32), and for the
  // convolutions planned from now on; off by default.
  void set_tf32(bool on) {
    blas_.set_tf32(on);
#if defined(LOCKSTEP_HAVE_CUDNN)
    conv_.options().tf32 = on;
#endif
  }
  // Waits until everything enqueued so far has run; reports its errors.
  void synchronize() { stream_.synchronize(); }

  // Row-major C(m,n) = alpha op(A) op(B) + beta C.
  template <class T>
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
            T beta, T* c, int ldc) {
    static_assert(std::is_same_v<T, float>,
                  "gpu::Context::gemm: the CUDA backend computes in float only (double, used by the gradient "
                  "checks, runs on host::Context)");
    if constexpr (std::is_same_v<T, float>)  // so that other types get only the assertion's message
      blas_.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  // y(rows, out) = Act(x(rows, in) w(in, out) + b(out)): Dense's forward.
  template <class Act, class T>
  void affine(const T* x, const T* w, const T* b, T* y, int rows, int in, int out) {
    static_assert(std::is_same_v<T, float>,
                  "gpu::Context::affine: the CUDA backend computes in float only (double, used by the gradient "
                  "checks, runs on host::Context)");
    if constexpr (std::is_same_v<T, float>) blas_.affine<Act>(x, w, b, y, rows, in, out);
  }

  // Convolution and pooling over NHWC samples: the members of host::Context
  // of the same names (the backend contract; see backend/host/context.hpp).
#if defined(LOCKSTEP_HAVE_CUDNN)
  // y = Act(conv(x, kernel) + bias), Keras' kernel (KH, KW, Cin, Cout); bias
  // may be null. The first call of a shape (geometry, rows) plans it (cuDNN's
  // algorithms, workspace) and must not be captured; later ones can be.
  template <class Act, class T>
  void conv2d_forward(const Window2D& g, const T* x, const T* kernel, const T* bias, T* y, int rows) {
    static_assert(std::is_same_v<T, float>,
                  "gpu::Context::conv2d_forward: the CUDA backend computes in float only (double, used by the "
                  "gradient checks, runs on host::Context)");
    if constexpr (std::is_same_v<T, float>) conv_.forward<Act>(g, x, kernel, bias, y, rows);
  }
  // Given dy = dLoss/d(conv + bias), writes all of dkernel, dbias unless
  // null and dx unless null (the first layer needs no input gradient).
  template <class T>
  void conv2d_backward(const Window2D& g, const T* x, const T* kernel, const T* dy, T* dx, T* dkernel, T* dbias,
                       int rows) {
    static_assert(std::is_same_v<T, float>,
                  "gpu::Context::conv2d_backward: the CUDA backend computes in float only (double, used by the "
                  "gradient checks, runs on host::Context)");
    // Under Linear nothing is written to dy.
    if constexpr (std::is_same_v<T, float>)
      conv_.backward<Linear>(g, x, nullptr, kernel, const_cast<float*>(dy), dx, dkernel, dbias, rows);
  }
  // The optional member Conv2D detects: the same after forward gave
  // y = Act(conv + bias), from dy = dLoss/dy, which it overwrites with Act's
  // derivative applied, in the pass that also starts the bias gradient.
  template <class Act, class T>
  void conv2d_activation_backward(const Window2D& g, const T* x, const T* y, const T* kernel, T* dy, T* dx,
                                  T* dkernel, T* dbias, int rows) {
    static_assert(std::is_same_v<T, float>,
                  "gpu::Context::conv2d_activation_backward: the CUDA backend computes in float only (double, used "
                  "by the gradient checks, runs on host::Context)");
    if constexpr (std::is_same_v<T, float>) conv_.backward<Act>(g, x, y, kernel, dy, dx, dkernel, dbias, rows);
  }
  // How the convolutions choose their algorithms (timed or heuristic,
  // deterministic only); applies to shapes first seen after a change.
  ConvOptions& conv_options() { return conv_.options(); }
  const Convolutions& convolutions() const { return conv_; }
#endif
  // y(rows, OH, OW, C) = the max or mean of each window of x (Same padding's
  // positions left out of a mean's count, as TensorFlow does).
  template <class T>
  void pool2d_forward(PoolKind kind, const Window2D& g, const T* x, T* y, int rows) {
    gpu::pool2d_forward(stream_.get(), kind, g, x, y, rows);
  }
  // dx from dy, x and y (max: to the first position holding the maximum).
  template <class T>
  void pool2d_backward(PoolKind kind, const Window2D& g, const T* x, const T* y, const T* dy, T* dx, int rows) {
    gpu::pool2d_backward(stream_.get(), kind, g, x, y, dy, dx, rows);
  }

  // out(cols) = the sum over rows of m(rows, cols): a bias gradient.
  template <class T>
  void column_sums(const T* m, int rows, int cols, T* out) {
    require(rows >= 0 && cols >= 0, "cuda column_sums: rows = ", rows, ", cols = ", cols, ", expected >= 0");
    gpu::for_each_index(stream_.get(), static_cast<std::size_t>(cols), kernels::ColumnSum<T>{m, out, rows, cols});
  }

  // f(i) for i in [0, n); f touches element i only.
  template <class F>
  void for_each_index(std::size_t n, const F& f) {
    gpu::for_each_index(stream_.get(), n, f);
  }
  // f(row) for row in [0, rows).
  template <class F>
  void for_each_row(std::size_t rows, const F& f) {
    gpu::for_each_row(stream_.get(), rows, f);
  }

  // f(i) for i in [0, n), with f's member `s` read from *scalars (host-visible
  // memory) when the kernel runs.
  template <class F, class S>
  void for_each_index_reading(std::size_t n, const F& f, const S* scalars) {
    gpu::for_each_index(stream_.get(), n, kernels::ReadingScalars<F, S>{f, scalars});
  }

  // *out = the sum of v[0..n), accumulated in double in a fixed order (one
  // block of 256 threads, then a fixed tree: see detail::sum_in_fixed_order)
  // and rounded once: the same bits on every run.
  template <class T>
  void sum_to(const T* v, std::size_t n, T* out) {
    detail::sum_in_fixed_order<T><<<1, detail::kSumThreads, 0, stream_.get()>>>(v, n, out);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  }

  // Copies between host memory and this device, completed before returning.
  template <class T>
  void to_host(T* host, const T* src, std::size_t n) {
    if (n)
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(static_cast<void*>(host), static_cast<const void*>(src), n * sizeof(T),
                                          cudaMemcpyDeviceToHost, stream_.get()));
    synchronize();
  }
  template <class T>
  void from_host(T* dst, const T* host, std::size_t n) {
    if (n)
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(static_cast<void*>(dst), static_cast<const void*>(host), n * sizeof(T),
                                          cudaMemcpyHostToDevice, stream_.get()));
    synchronize();
  }

  template <class T>
  void zero(T* p, std::size_t n) {
    if (n) LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(static_cast<void*>(p), 0, n * sizeof(T), stream_.get()));
  }
  // Copies n elements between two buffers of this device.
  template <class T>
  void copy(T* dst, const T* src, std::size_t n) {
    if (n)
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(T),
                                          cudaMemcpyDeviceToDevice, stream_.get()));
  }

 private:
  // Checked here so that a wrong index reads "device 3 does not exist: ..."
  // rather than cudaSetDevice's "invalid device ordinal".
  static int existing(int device) {
    std::string why;
    detail::require_exists("gpu::Context", device, detail::device_count(&why), why);
    return device;
  }
  // The guard keeps `device` current while the members are built (the
  // temporary lives until this constructor returns), then restores the caller's.
  Context(int device, const DeviceGuard&) : device_(device) {
    blas_.set_stream(stream_.get());
#if defined(LOCKSTEP_HAVE_CUDNN)
    conv_.set_stream(stream_.get());  // the cuDNN handle, made at the first convolution, binds to it
#endif
  }

  int device_;
  Stream stream_;
  Blas blas_;
#if defined(LOCKSTEP_HAVE_CUDNN)
  Convolutions conv_;  // declared after stream_: destroyed before the stream its handle is bound to
#endif
};

}  // namespace lockstep::gpu
