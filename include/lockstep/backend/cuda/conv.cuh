// The CUDA backend's 2-D convolution over NHWC samples, through cuDNN's
// convolution API (cudnn_cnn.h): gpu::Context's conv2d_forward/backward, with
// the host's contract (backend/host/context.hpp). Only where CMake found
// cuDNN (LOCKSTEP_HAVE_CUDNN, cmake/FindCUDNN.cmake).
//
// Per (geometry, rows, TF32, deterministic) a Plan holds the cuDNN
// descriptors and the algorithm of each pass (forward, backward data,
// backward filter), chosen at the first call of that shape: by timing every
// algorithm (cudnnFind*, the default) or by cuDNN's heuristic (cudnnGet*_v7),
// keeping those that use FMA math unless TF32 is on, and only deterministic
// ones when asked. A call of a known shape allocates nothing and does not
// synchronise, so it can be captured into a CUDA graph; the CUDA executor
// runs the first step of every shape eagerly before it captures
// (train/cuda_executor.cuh), which is where the plans are made.
//
// Layouts cuDNN cannot take as they are:
//   - Keras' kernel (KH, KW, Cin, Cout) has the output channel innermost, and
//     cuDNN's filter layouts are (Cout, Cin, KH, KW) or (Cout, KH, KW, Cin):
//     the kernel is transposed into the workspace as the (Cout, KH KW Cin)
//     matrix before each use, and the filter gradient back; a kernel is small
//     (18 K values in the Keras MNIST convnet) next to the activations.
//   - TensorFlow's Same padding puts the odd one at the bottom and right
//     (stride 2 on an even input: 0 on top, 1 below), and a cuDNN convolution
//     descriptor pads both sides alike. Symmetric padding (the usual odd
//     kernel at stride 1) goes to cuDNN as it is; asymmetric padding takes an
//     explicit zero-padded copy of the input in the workspace, a convolution
//     without padding on it, and for the input gradient a padded gradient
//     cropped back. Symmetric padding plus a crop of the output cannot serve:
//     at stride 2 the windows it gives start one row off those TF asks for.
// Bias and activation run as one element-wise pass after the convolution,
// as Dense's unfused path does: cudnnConvolutionBiasActivationForward takes
// identity only with one algorithm, and the bias sits anywhere in the flat
// parameter buffer. In backward, the activation's derivative is applied to dy
// in the same pass as the first stage of the bias gradient, a two-stage
// column sum in a fixed order (deterministic).
//
// Memory: one workspace per context, shared by every convolution (they run
// in order on one stream), grown outside capture when a larger shape is
// planned. The buffer it replaces is kept, not freed, until the context
// goes: a captured graph of an earlier shape still points into it.
#pragma once

#if !defined(LOCKSTEP_HAVE_CUDNN)
#error "lockstep/backend/cuda/conv.cuh needs cuDNN: link lockstep::cuda where CMake found it (LOCKSTEP_HAVE_CUDNN=1; install cuDNN or set CUDNN_ROOT, see cmake/FindCUDNN.cmake)."
#endif

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/check.cuh"
#include "lockstep/backend/cuda/launch.cuh"
#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep::gpu::detail {

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  clear_last_error();  // a failed launch inside cuDNN leaves its CUDA error behind
  char detail[512] = {};
#if CUDNN_MAJOR >= 9
  cudnnGetLastErrorString(detail, sizeof(detail));  // cuDNN 9's own sentence on what it rejected
#endif
  fail("cuDNN call ", call, " failed at ", base_name(file), ":", line, ": ", cudnnGetErrorString(status), " (status ",
       static_cast<int>(status), ")", detail[0] ? ": " : "", detail);
}

}  // namespace lockstep::gpu::detail

#define LOCKSTEP_CUDNN_CHECK(call) ::lockstep::gpu::detail::check_cudnn((call), #call, __FILE__, __LINE__)

namespace lockstep::kernels {

// out(cols, rows) = in(rows, cols)^T, row-major; index i is one value of out
// (its writes coalesce; the matrices are kernels, small).
struct TransposeMatrix {
  const float* in;
  float* out;
  std::size_t rows, cols;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { out[i] = in[(i % rows) * cols + i / rows]; }
};

// xp(n, H + top + bottom, W + left + right, C) = x(n, H, W, C) with zeros around it.
struct PadNhwc {
  const float* x;
  float* xp;
  int h, w, c, hp, wp, top, left;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t ch = i % static_cast<std::size_t>(c);
    std::size_t t = i / static_cast<std::size_t>(c);
    const int col = static_cast<int>(t % static_cast<std::size_t>(wp)) - left;
    t /= static_cast<std::size_t>(wp);
    const int row = static_cast<int>(t % static_cast<std::size_t>(hp)) - top;
    const std::size_t n = t / static_cast<std::size_t>(hp);
    const bool inside = row >= 0 && row < h && col >= 0 && col < w;
    if (!inside) {
      xp[i] = 0.0f;
      return;
    }
    const std::size_t pixel =
        (n * static_cast<std::size_t>(h) + static_cast<std::size_t>(row)) * static_cast<std::size_t>(w) +
        static_cast<std::size_t>(col);
    xp[i] = x[pixel * static_cast<std::size_t>(c) + ch];
  }
};

// x(n, H, W, C) = the inside of xp(n, Hp, Wp, C) at (top, left): PadNhwc's inverse.
struct CropNhwc {
  const float* xp;
  float* x;
  int h, w, c, hp, wp, top, left;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t ch = i % static_cast<std::size_t>(c);
    std::size_t t = i / static_cast<std::size_t>(c);
    const std::size_t col = t % static_cast<std::size_t>(w) + static_cast<std::size_t>(left);
    t /= static_cast<std::size_t>(w);
    const std::size_t row = t % static_cast<std::size_t>(h) + static_cast<std::size_t>(top);
    const std::size_t n = t / static_cast<std::size_t>(h);
    const std::size_t pixel = (n * static_cast<std::size_t>(hp) + row) * static_cast<std::size_t>(wp) + col;
    x[i] = xp[pixel * static_cast<std::size_t>(c) + ch];
  }
};

// dy(pixels, C) *= Act'(y) in place (the gradient of the convolution's own
// output), and out(k, C) = the sum of its rows [k chunk, (k + 1) chunk) in
// row order: index i is (k, c), so each value of dy is read and written by
// exactly one thread. Run again on out (the chunks' sums, as one chunk) it is
// the bias gradient, each of whose additions has a fixed place.
template <class Act>
struct ActivationBackwardChunkSums {
  const float* y;
  float* dy;
  float* out;
  std::size_t rows, channels, chunk;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t c = i % channels, k = i / channels;
    const std::size_t r0 = k * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float s = 0.0f;
    for (std::size_t r = r0; r < r1; ++r) {
      const std::size_t at = r * channels + c;
      float g = dy[at];
      if (!Act::kIdentity) {
        g *= Act::derivative_from_output(y[at]);
        dy[at] = g;
      }
      s += g;
    }
    out[i] = s;
  }
};

// y(pixels, C) = Act(y + b) in place; b may be null (use_bias=False).
template <class Act>
struct BiasActivate {
  float* y;
  const float* b;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const float v = b ? y[i] + b[i % channels] : y[i];
    y[i] = Act::forward(v);
  }
};


}  // namespace lockstep::kernels

namespace lockstep::gpu {

// How a convolution's algorithms are chosen, at the first call of a shape.
enum class ConvSearch {
  kFind,       // time every algorithm cuDNN has for the shape (cudnnFind*): the fastest, at a one-off cost
  kHeuristic,  // take cuDNN's heuristic order (cudnnGet*_v7): no GPU work to choose
};

// The options of a context's convolutions. A change applies to the shapes
// planned after it; tf32 and deterministic are part of a plan's key, so a
// shape seen before is planned again under new values.
struct ConvOptions {
  ConvSearch search = ConvSearch::kFind;
  // Only algorithms cuDNN marks CUDNN_DETERMINISTIC (the same bits on every
  // run of a step); off by default, as some of the fastest backward ones add
  // with atomics.
  bool deterministic = false;
  // TF32 tensor cores (set with Context::set_tf32, as for the GEMMs); off:
  // FMA math only, so results match the host's to float rounding.
  bool tf32 = false;
  // Algorithms asking for more workspace than this are left out.
  std::size_t max_algorithm_workspace = std::size_t(256) << 20;
};

class Convolutions {
 public:
  Convolutions() = default;
  Convolutions(const Convolutions&) = delete;
  Convolutions& operator=(const Convolutions&) = delete;
  Convolutions(Convolutions&&) noexcept = default;
  Convolutions& operator=(Convolutions&&) noexcept = default;
  ~Convolutions() = default;

  // All later work enqueues on `stream` (a stream of the current device).
  void set_stream(cudaStream_t stream) {
    stream_ = stream;
    if (state_) LOCKSTEP_CUDNN_CHECK(cudnnSetStream(state_->handle, stream));
  }
  ConvOptions& options() { return options_; }
  const ConvOptions& options() const { return options_; }
  // Bytes of the workspace now (for tests and diagnostics): 0 before the first convolution.
  std::size_t workspace_bytes() const { return state_ ? state_->workspace.bytes() : 0; }
  // Shapes planned so far.
  std::size_t plans() const { return state_ ? state_->plans.size() : 0; }

  // y(rows, OH, OW, Cout) = Act(conv(x(rows, H, W, Cin), kernel) + bias);
  // kernel is Keras' (KH, KW, Cin, Cout), bias (Cout) may be null.
  template <class Act>
  void forward(const Window2D& g, const float* x, const float* kernel, const float* bias, float* y, int rows) {
    static_assert(is_activation_v<Act>, "gpu::Convolutions::forward: Act must be an activation (Linear, Relu, ...)");
    check(g, "cuda conv2d_forward", rows);
    if (rows == 0) return;
    const Plan& p = plan(g, rows);
    std::byte* ws = state_->workspace.data();
    float* kt = floats(ws, p.kernel_at);
    const std::size_t patch = g.patch_size(), cout = static_cast<std::size_t>(g.out_c);
    for_each_index(stream_, patch * cout, kernels::TransposeMatrix{kernel, kt, patch, cout});  // (P, Cout) -> (Cout, P)
    const float* in = x;
    if (p.explicit_pad) in = pad(p, g, x, floats(ws, p.x_pad_at), rows);
    const float one = 1.0f, zero = 0.0f;
    LOCKSTEP_CUDNN_CHECK(cudnnConvolutionForward(state_->handle, &one, p.x, in, p.w, kt, p.fwd, p.fwd_algo,
                                                 ws + p.algo_at, p.algo_bytes, &zero, p.y, y));
    if (bias || !Act::kIdentity)
      for_each_index(stream_, static_cast<std::size_t>(rows) * g.out_size(), kernels::BiasActivate<Act>{y, bias, cout});
  }

  // After forward gave y from x, given dy = dLoss/dy (overwritten: Act's
  // derivative is applied to it in place), writes all of dkernel (KH, KW,
  // Cin, Cout), dbias (Cout) unless null and dx (rows, H, W, Cin) unless null.
  template <class Act>
  void backward(const Window2D& g, const float* x, const float* y, const float* kernel, float* dy, float* dx,
                float* dkernel, float* dbias, int rows) {
    static_assert(is_activation_v<Act>, "gpu::Convolutions::backward: Act must be an activation (Linear, Relu, ...)");
    check(g, "cuda conv2d_backward", rows);
    const std::size_t patch = g.patch_size(), cout = static_cast<std::size_t>(g.out_c);
    if (rows == 0) {  // cuDNN has no empty tensors: the sums over no rows are zeros
      zero(dkernel, g.kernel_size());
      if (dbias) zero(dbias, cout);
      return;
    }
    const Plan& p = plan(g, rows);
    std::byte* ws = state_->workspace.data();
    const std::size_t pixels = static_cast<std::size_t>(rows) * static_cast<std::size_t>(g.out_h) *
                               static_cast<std::size_t>(g.out_w);
    if (dbias) {  // the derivative and the bias gradient's first stage in one pass over dy
      const std::size_t chunks = chunk_count(pixels);
      float* partial = floats(ws, p.partial_at);
      for_each_index(stream_, chunks * cout,
                     kernels::ActivationBackwardChunkSums<Act>{y, dy, partial, pixels, cout, kBiasChunk});
      for_each_index(stream_, cout,
                     kernels::ActivationBackwardChunkSums<Linear>{nullptr, partial, dbias, chunks, cout, chunks});
    } else if (!Act::kIdentity) {
      for_each_index(stream_, pixels * cout, kernels::ActivationBackward<Act, float>{y, dy, dy});
    }
    const float one = 1.0f, zero_value = 0.0f;
    const float* in = x;
    if (p.explicit_pad) in = pad(p, g, x, floats(ws, p.x_pad_at), rows);
    float* dkt = floats(ws, p.dkernel_at);
    LOCKSTEP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(state_->handle, &one, p.x, in, p.y, dy, p.bwd_filter,
                                                        p.filter_algo, ws + p.algo_at, p.algo_bytes, &zero_value, p.w,
                                                        dkt));
    // (Cout, P) -> (P, Cout), Keras' layout
    for_each_index(stream_, patch * cout, kernels::TransposeMatrix{dkt, dkernel, cout, patch});
    if (!dx) return;
    float* kt = floats(ws, p.kernel_at);
    for_each_index(stream_, patch * cout, kernels::TransposeMatrix{kernel, kt, patch, cout});
    float* out = p.explicit_pad ? floats(ws, p.dx_pad_at) : dx;
    LOCKSTEP_CUDNN_CHECK(cudnnConvolutionBackwardData(state_->handle, &one, p.w, kt, p.y, dy, p.bwd_data, p.data_algo,
                                                      ws + p.algo_at, p.algo_bytes, &zero_value, p.x, out));
    if (p.explicit_pad)
      for_each_index(stream_, static_cast<std::size_t>(rows) * g.in_size(),
                     kernels::CropNhwc{out, dx, g.in_h, g.in_w, g.in_c, p.hp, p.wp, g.pad_top, g.pad_left});
  }

 private:
  // Output pixels per partial sum of the bias gradient.
  static constexpr std::size_t kBiasChunk = 256;
  static constexpr std::size_t kAlign = 256;  // bytes; each workspace region starts on such a boundary

  // The shape a plan serves: the geometry's 14 sizes, rows, TF32, deterministic.
  using Key = std::array<int, 17>;

  // A shape's descriptors, algorithms and workspace regions (byte offsets).
  struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;  // x as cuDNN reads it: padded when explicit_pad
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t fwd = nullptr, bwd_data = nullptr, bwd_filter = nullptr;  // each has its own math type
    cudnnConvolutionFwdAlgo_t fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    cudnnConvolutionBwdFilterAlgo_t filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    bool explicit_pad = false;
    int hp = 0, wp = 0;  // the input's size as cuDNN sees it
    std::size_t kernel_at = 0, dkernel_at = 0, partial_at = 0, x_pad_at = 0, dx_pad_at = 0, algo_at = 0;
    std::size_t algo_bytes = 0;  // the largest workspace of the three algorithms
    std::size_t total = 0;       // bytes of workspace the plan needs
    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {
      if (bwd_filter) cudnnDestroyConvolutionDescriptor(bwd_filter);
      if (bwd_data) cudnnDestroyConvolutionDescriptor(bwd_data);
      if (fwd) cudnnDestroyConvolutionDescriptor(fwd);
      if (w) cudnnDestroyFilterDescriptor(w);
      if (y) cudnnDestroyTensorDescriptor(y);
      if (x) cudnnDestroyTensorDescriptor(x);
    }
  };

  // The cuDNN handle (bound to the stream), the plans and the workspace, made
  // at the first convolution: a context whose model has none never loads cuDNN.
  struct State {
    int device = 0;
    cudnnHandle_t handle = nullptr;
    std::map<Key, std::unique_ptr<Plan>> plans;
    DeviceBuffer<std::byte> workspace;
    std::vector<DeviceBuffer<std::byte>> retired;  // outgrown workspaces that captured graphs may still use
    explicit State(cudaStream_t stream) {
      LOCKSTEP_CUDA_CHECK(cudaGetDevice(&device));
      LOCKSTEP_CUDNN_CHECK(cudnnCreate(&handle));
      try {
        LOCKSTEP_CUDNN_CHECK(cudnnSetStream(handle, stream));
      } catch (...) {
        cudnnDestroy(handle);
        throw;
      }
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() {
      plans.clear();
      // The handle belongs to `device`: destroy it there.
      int current = device;
      const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device;
      if (switched) cudaSetDevice(device);
      cudnnDestroy(handle);
      if (switched) cudaSetDevice(current);
    }
  };

  static float* floats(std::byte* base, std::size_t at) { return reinterpret_cast<float*>(base + at); }
  static std::size_t chunk_count(std::size_t pixels) { return (pixels + kBiasChunk - 1) / kBiasChunk; }
  static std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  static void check(const Window2D& g, const char* what, int rows) {
    require(window::consistent(g), what, ": inconsistent geometry: input ", g.in_h, "x", g.in_w, "x", g.in_c,
            ", window ", g.kernel_h, "x", g.kernel_w, ", strides ", g.stride_h, "x", g.stride_w, ", padding ",
            g.pad_top, ",", g.pad_left, ",", g.pad_bottom, ",", g.pad_right, " give no ", g.out_h, "x", g.out_w, "x",
            g.out_c, " output; expected the sizes of lockstep::window::make");
    require(rows >= 0, what, ": ", rows, " rows, expected >= 0");
    // cuDNN's descriptors take int sizes, and its kernels index a tensor with
    // 32-bit integers: more values than that would be computed wrongly.
    const std::size_t padded = static_cast<std::size_t>(g.in_h + g.pad_top + g.pad_bottom) *
                               static_cast<std::size_t>(g.in_w + g.pad_left + g.pad_right) *
                               static_cast<std::size_t>(g.in_c);
    const std::size_t largest = std::max(padded, g.out_size()) * static_cast<std::size_t>(rows > 0 ? rows : 0);
    require(largest <= static_cast<std::size_t>(INT_MAX), what, ": ", rows, " rows of ", g.in_h, "x", g.in_w, "x",
            g.in_c, " -> ", g.out_h, "x", g.out_w, "x", g.out_c, " make a tensor of ", largest,
            " values; expected at most 2^31 - 1 (cuDNN's limit): use fewer rows per replica");
  }

  void zero(float* p, std::size_t n) {
    if (n) LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(static_cast<void*>(p), 0, n * sizeof(float), stream_));
  }

  const float* pad(const Plan& p, const Window2D& g, const float* x, float* xp, int rows) {
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(p.hp) *
                          static_cast<std::size_t>(p.wp) * static_cast<std::size_t>(g.in_c);
    for_each_index(stream_, n, kernels::PadNhwc{x, xp, g.in_h, g.in_w, g.in_c, p.hp, p.wp, g.pad_top, g.pad_left});
    return xp;
  }

  bool capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    LOCKSTEP_CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
    return status != cudaStreamCaptureStatusNone;
  }

  // Whether cuDNN's performance entry r may be used under the options.
  template <class Perf>
  bool acceptable(const Perf& r, std::size_t limit) const {
    return r.status == CUDNN_STATUS_SUCCESS && r.memory <= limit &&
           (!options_.deterministic || r.determinism == CUDNN_DETERMINISTIC) &&
           (options_.tf32 || r.mathType == CUDNN_FMA_MATH);
  }

  // The first acceptable of cuDNN's ranked entries, else `fallback` (an
  // algorithm every layout supports, deterministic), under the requested math.
  template <class Algo, class Perf>
  Algo choose(const std::vector<Perf>& ranked, int returned, std::size_t limit, Algo fallback,
              cudnnConvolutionDescriptor_t desc) const {
    for (int i = 0; i < returned; ++i) {
      const Perf& r = ranked[static_cast<std::size_t>(i)];
      if (!acceptable(r, limit)) continue;
      // cuDNN picks tensor-core kernels by algorithm and math type together.
      LOCKSTEP_CUDNN_CHECK(cudnnSetConvolutionMathType(desc, r.mathType));
      return r.algo;
    }
    return fallback;
  }

  const Plan& plan(const Window2D& g, int rows) {
    const Key key{g.in_h,     g.in_w,     g.in_c,     g.out_h,    g.out_w,
                  g.out_c,    g.kernel_h, g.kernel_w, g.stride_h, g.stride_w,
                  g.pad_top,  g.pad_left, g.pad_bottom, g.pad_right, rows,
                  options_.tf32 ? 1 : 0, options_.deterministic ? 1 : 0};
    if (state_) {
      const auto found = state_->plans.find(key);
      if (found != state_->plans.end()) return *found->second;
    }
    const bool in_capture = capturing();
    require(state_ || !in_capture,
            "gpu::Context: the first convolution of this context is being captured into a CUDA graph, where cuDNN "
            "cannot be set up (cudnnCreate allocates); expected a step of each shape to run eagerly first, as the "
            "CUDA executor does");
    if (!state_) state_ = std::make_unique<State>(stream_);
    auto p = std::make_unique<Plan>();
    describe(*p, g, rows);

    // The regions every algorithm needs beside its own workspace.
    const std::size_t kernel_bytes = aligned(g.kernel_size() * sizeof(float));
    const std::size_t pixels = static_cast<std::size_t>(rows) * static_cast<std::size_t>(g.out_h) *
                               static_cast<std::size_t>(g.out_w);
    const std::size_t padded_bytes =
        p->explicit_pad ? aligned(static_cast<std::size_t>(rows) * static_cast<std::size_t>(p->hp) *
                                  static_cast<std::size_t>(p->wp) * static_cast<std::size_t>(g.in_c) * sizeof(float))
                        : 0;
    p->kernel_at = 0;
    p->dkernel_at = p->kernel_at + kernel_bytes;
    p->partial_at = p->dkernel_at + kernel_bytes;
    p->x_pad_at = p->partial_at + aligned(chunk_count(pixels) * static_cast<std::size_t>(g.out_c) * sizeof(float));
    p->dx_pad_at = p->x_pad_at + padded_bytes;
    p->algo_at = p->dx_pad_at + padded_bytes;
    // Inside a capture nothing can be allocated: the algorithms must fit what there is.
    const std::size_t have = state_->workspace.bytes();
    const std::size_t limit =
        in_capture ? (have > p->algo_at ? have - p->algo_at : 0) : options_.max_algorithm_workspace;
    require(!in_capture || have >= p->algo_at, "gpu::Context: a convolution of a new shape (", rows, " rows of ",
            g.in_h, "x", g.in_w, "x", g.in_c, " -> ", g.out_h, "x", g.out_w, "x", g.out_c,
            ") is being captured into a CUDA graph and needs ", p->algo_at, " bytes of workspace, more than the ",
            have, " there are; expected a step of each shape to run eagerly first, as the CUDA executor does");
    select(*p, limit, in_capture || options_.search == ConvSearch::kHeuristic);
    p->total = p->algo_at + p->algo_bytes;
    if (p->total > have) {
      require(!in_capture, "gpu::Context: the convolution algorithms left for a new shape being captured into a ",
              "CUDA graph need ", p->total, " bytes of workspace, more than the ", have,
              " there are; expected a step of each shape to run eagerly first, as the CUDA executor does");
      grow(p->total);
    }
    return *state_->plans.emplace(key, std::move(p)).first->second;
  }

  // The descriptors of a shape: NHWC tensors, the (Cout, KH, KW, Cin) filter,
  // cross-correlation (what Keras calls convolution) with cuDNN's padding
  // where it is symmetric, none on an explicitly padded input.
  void describe(Plan& p, const Window2D& g, int rows) const {
    p.explicit_pad = g.pad_top != g.pad_bottom || g.pad_left != g.pad_right;
    p.hp = g.in_h + (p.explicit_pad ? g.pad_top + g.pad_bottom : 0);
    p.wp = g.in_w + (p.explicit_pad ? g.pad_left + g.pad_right : 0);
    const int pad_h = p.explicit_pad ? 0 : g.pad_top, pad_w = p.explicit_pad ? 0 : g.pad_left;
    LOCKSTEP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
    LOCKSTEP_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, rows, g.in_c, p.hp, p.wp));
    LOCKSTEP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
    LOCKSTEP_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, rows, g.out_c, g.out_h, g.out_w));
    LOCKSTEP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
    LOCKSTEP_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, g.out_c, g.in_c, g.kernel_h, g.kernel_w));
    const cudnnMathType_t math = options_.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    for (cudnnConvolutionDescriptor_t* desc : {&p.fwd, &p.bwd_data, &p.bwd_filter}) {
      LOCKSTEP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(desc));
      LOCKSTEP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*desc, pad_h, pad_w, g.stride_h, g.stride_w, 1, 1,
                                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      LOCKSTEP_CUDNN_CHECK(cudnnSetConvolutionMathType(*desc, math));
    }
    int n = 0, c = 0, h = 0, w = 0;
    LOCKSTEP_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.fwd, p.x, p.w, &n, &c, &h, &w));
    require(n == rows && c == g.out_c && h == g.out_h && w == g.out_w, "cuda conv2d: cuDNN computes a ", n, "x", h,
            "x", w, "x", c, " output for ", rows, " rows of ", g.in_h, "x", g.in_w, "x", g.in_c, " with a ",
            g.kernel_h, "x", g.kernel_w, " window; expected ", rows, "x", g.out_h, "x", g.out_w, "x", g.out_c);
  }

  // The three algorithms and their workspace, by timing (cudnnFind*, which
  // runs every algorithm on buffers it allocates and synchronises: never
  // inside a capture) or by cuDNN's heuristic order.
  void select(Plan& p, std::size_t limit, bool heuristic) const {
    cudnnHandle_t h = state_->handle;
    int count = 0, returned = 0;
    {
      LOCKSTEP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(std::max(count, 1)));
      if (heuristic)
        LOCKSTEP_CUDNN_CHECK(
            cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.fwd, p.y, count, &returned, perf.data()));
      else
        LOCKSTEP_CUDNN_CHECK(
            cudnnFindConvolutionForwardAlgorithm(h, p.x, p.w, p.fwd, p.y, count, &returned, perf.data()));
      p.fwd_algo = choose(perf, returned, limit, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, p.fwd);
    }
    {
      LOCKSTEP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(std::max(count, 1)));
      if (heuristic)
        LOCKSTEP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.bwd_data, p.x, count,
                                                                         &returned, perf.data()));
      else
        LOCKSTEP_CUDNN_CHECK(
            cudnnFindConvolutionBackwardDataAlgorithm(h, p.w, p.y, p.bwd_data, p.x, count, &returned, perf.data()));
      p.data_algo = choose(perf, returned, limit, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, p.bwd_data);
    }
    {
      LOCKSTEP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(std::max(count, 1)));
      if (heuristic)
        LOCKSTEP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.bwd_filter, p.w, count,
                                                                           &returned, perf.data()));
      else
        LOCKSTEP_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, p.x, p.y, p.bwd_filter, p.w, count,
                                                                         &returned, perf.data()));
      p.filter_algo = choose(perf, returned, limit, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, p.bwd_filter);
    }
    // The exact sizes for the algorithm and math type now set (a fallback
    // that does not exist for this shape fails here, naming the call).
    std::size_t fwd = 0, data = 0, filter = 0;
    LOCKSTEP_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.fwd, p.y, p.fwd_algo, &fwd));
    LOCKSTEP_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, p.bwd_data, p.x, p.data_algo, &data));
    LOCKSTEP_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x, p.y, p.bwd_filter, p.w, p.filter_algo, &filter));
    p.algo_bytes = std::max({fwd, data, filter});
  }

  // A workspace of at least `bytes` (doubling, so that a series of growing
  // shapes allocates O(log) times); the old one is kept for captured graphs.
  void grow(std::size_t bytes) {
    const std::size_t have = state_->workspace.bytes();
    DeviceBuffer<std::byte> bigger(std::max(bytes, 2 * have));
    if (have) state_->retired.push_back(std::move(state_->workspace));
    state_->workspace = std::move(bigger);
  }

  cudaStream_t stream_ = nullptr;
  ConvOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace lockstep::gpu
