// cuBLAS and cuBLASLt for one replica: the row-major GEMM that layers call
// (the same contract as lockstep::host::gemm) and Dense's forward fused into
// one cuBLASLt matmul with a bias (and ReLU) epilogue, so y = Act(x w + b)
// reads and writes y once instead of three times.
//
// A Blas lives on the device that was current when it was made, enqueues on
// the stream given to set_stream, and after the first call for a shape neither
// allocates nor synchronises: it can be captured into a CUDA graph.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/check.cuh"
#include "lockstep/backend/cuda/launch.cuh"
#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/ops/activations.hpp"

namespace lockstep::kernels {

// Every row of y(rows, width) = b(width): the bias the GEMM then accumulates
// onto (beta = 1) when the activation has no cuBLASLt epilogue.
struct BroadcastRows {
  float* y;
  const float* b;
  std::size_t width;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { y[i] = b[i % width]; }
};

// C(m, n) = beta C with row stride ldc: a GEMM whose k is 0. beta == 0 writes
// zeros without reading C, as BLAS does, so NaNs in an unset C do not survive.
struct ScaleMatrix {
  float* c;
  std::size_t n;
  std::size_t ldc;
  float beta;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    float& v = c[(i / n) * ldc + i % n];
    v = beta == 0.0f ? 0.0f : beta * v;
  }
};

}  // namespace lockstep::kernels

namespace lockstep::gpu {

class Blas {
 public:
  // cuBLAS asks for 32 MiB of workspace on Hopper (and 4 MiB before it); the
  // same buffer serves cuBLAS and cuBLASLt, which run in order on one stream.
  static constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;

  // Creates the handles and the workspace on the current device.
  Blas() {
    LOCKSTEP_CUDA_CHECK(cudaGetDevice(&device_));
    workspace_.resize(kWorkspaceBytes);
    try {
      LOCKSTEP_CUBLAS_CHECK(cublasCreate(&handle_));
      LOCKSTEP_CUBLAS_CHECK(cublasLtCreate(&lt_));
      LOCKSTEP_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
      LOCKSTEP_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
      set_tf32(false);
    } catch (...) {
      release();
      throw;
    }
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  Blas(Blas&& other) noexcept
      : device_(other.device_),
        handle_(std::exchange(other.handle_, nullptr)),
        lt_(std::exchange(other.lt_, nullptr)),
        stream_(other.stream_),
        tf32_(other.tf32_),
        workspace_(std::move(other.workspace_)),
        plans_(std::move(other.plans_)) {}
  Blas& operator=(Blas&&) = delete;
  ~Blas() { release(); }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  // All later calls enqueue on `stream` (a stream of this Blas's device).
  void set_stream(cudaStream_t stream) {
    stream_ = stream;
    LOCKSTEP_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    // cublasSetStream resets the handle to cuBLAS's default workspace pool
    // (documented): re-attach ours, which graph capture and cuBLASLt rely on.
    LOCKSTEP_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
  }

  // TF32 tensor cores for float GEMMs (Ampere and later): several times the
  // FP32 throughput, at a 10-bit mantissa for the products' inputs. Off by
  // default, so results match the host backend to FP32 rounding.
  void set_tf32(bool on) {
    LOCKSTEP_CUBLAS_CHECK(cublasSetMathMode(handle_, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    tf32_ = on;
  }
  bool tf32() const { return tf32_; }

  // Row-major C(m, n) = alpha op(A)(m, k) op(B)(k, n) + beta C, lda/ldb/ldc the
  // row strides as stored: the contract of lockstep::host::gemm.
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc) {
    require(m >= 0 && n >= 0 && k >= 0, "cuda gemm: sizes m = ", m, ", n = ", n, ", k = ", k, ", expected >= 0");
    if (m == 0 || n == 0) return;
    if (k == 0) {
      // Nothing to multiply: C = beta C. Done here because cuBLAS rejects the
      // leading dimension 0 that an empty row-major A or B may have.
      if (beta != 1.0f)
        for_each_index(stream_, static_cast<std::size_t>(m) * static_cast<std::size_t>(n),
                       kernels::ScaleMatrix{c, static_cast<std::size_t>(n), static_cast<std::size_t>(ldc), beta});
      return;
    }
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
    // row-major matrix read as column-major is its transpose: so swap the
    // operands and pass the sizes as (n, m, k), no data moves.
    LOCKSTEP_CUBLAS_CHECK(cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
  }

  // y(rows, out) = Act(x(rows, in) w(in, out) + b(out)), all row-major and
  // packed: Dense's forward. Linear and Relu run as one cuBLASLt matmul with a
  // bias (+ ReLU) epilogue; other activations as bias rows, a GEMM onto them
  // and an element-wise pass.
  template <class Act>
  void affine(const float* x, const float* w, const float* b, float* y, int rows, int in, int out) {
    static_assert(is_activation_v<Act>, "gpu::Blas::affine: Act must be an activation (lockstep::Linear, Relu, ...)");
    require(rows >= 0 && in >= 0 && out >= 0, "cuda affine: sizes rows = ", rows, ", in = ", in, ", out = ", out,
            ", expected >= 0");
    if (rows == 0 || out == 0) return;
    const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(out);
    constexpr bool kFusable = std::is_same_v<Act, Linear> || std::is_same_v<Act, Relu>;
    if constexpr (kFusable) {
      // cuBLASLt's alignment preferences cover A, B, C and D but not the
      // bias, and its epilogue kernels may load the bias 16 bytes at a time:
      // a bias that is not 16-byte aligned (a layer's b sits anywhere in the
      // flat parameter buffer) faults with cudaErrorMisalignedAddress, which
      // ends the CUDA context. Such a bias takes the unfused path.
      if (in > 0 && alignment_of(b) >= kBiasAlignment) {
        const cublasLtEpilogue_t epilogue =
            std::is_same_v<Act, Relu> ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
        const Plan& plan = affine_plan(x, w, b, y, rows, in, out, epilogue);
        if (plan.fused) {
          // The descriptor is the cached one: point it at this call's bias
          // (a host-side field, nothing is enqueued or allocated).
          LOCKSTEP_CUBLAS_CHECK(
              cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)));
          const float one = 1.0f, zero = 0.0f;
          // Column-major view: y^T(out, rows) = w^T(out, in) x^T(in, rows) + b,
          // so the bias runs along D's rows (length out), as the epilogue wants.
          LOCKSTEP_CUBLAS_CHECK(cublasLtMatmul(lt_, plan.desc, &one, w, plan.a, x, plan.b, &zero, y, plan.d, y,
                                               plan.d, &plan.algo, workspace_.data(), workspace_.bytes(), stream_));
          return;
        }
      }
    }
    for_each_index(stream_, count, kernels::BroadcastRows{y, b, static_cast<std::size_t>(out)});
    gemm(false, false, rows, out, in, 1.0f, x, in, w, out, 1.0f, y, out);
    if constexpr (!Act::kIdentity) for_each_index(stream_, count, kernels::ActivateInPlace<Act, float>{y});
  }

 private:
  // The cuBLASLt descriptors and chosen algorithm of one affine shape. fused is
  // false when cuBLASLt offers no algorithm for it (then the unfused path runs).
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool fused = false;
    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {
      if (d) cublasLtMatrixLayoutDestroy(d);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (desc) cublasLtMatmulDescDestroy(desc);
    }
  };
  // (rows, in, out, tf32, epilogue, pointer alignment): everything the
  // heuristic's choice depends on.
  using PlanKey = std::tuple<int, int, int, bool, int, unsigned>;

  // The bias alignment the fused epilogue is given (see affine).
  static constexpr unsigned kBiasAlignment = 16;

  // The largest power of two up to 256 dividing the address. cuBLASLt's
  // heuristic assumes 256-byte aligned matrices unless told otherwise, and a
  // layer's activations may start anywhere in a workspace.
  static unsigned alignment_of(const void* p) {
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(p);
    unsigned alignment = 256;
    while (alignment > 4 && address % alignment != 0) alignment /= 2;
    return alignment;
  }

  const Plan& affine_plan(const float* x, const float* w, const float* b, float* y, int rows, int in, int out,
                          cublasLtEpilogue_t epilogue) {
    unsigned alignment = alignment_of(x);
    for (const void* p : {static_cast<const void*>(w), static_cast<const void*>(b), static_cast<const void*>(y)})
      alignment = std::min(alignment, alignment_of(p));
    const PlanKey key{rows, in, out, tf32_, static_cast<int>(epilogue), alignment};
    const auto found = plans_.find(key);
    if (found != plans_.end()) return *found->second;

    auto plan = std::make_unique<Plan>();
    const cublasComputeType_t compute = tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
    // The attribute is a uint32_t (cublasLt.h), whatever size the enum has.
    const std::uint32_t epilogue_value = static_cast<std::uint32_t>(epilogue);
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue_value,
                                                         sizeof(epilogue_value)));
    // A complete descriptor for the heuristic; affine sets each call's own bias.
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)));
    // Column-major layouts of the row-major operands, no transposes:
    // A = w^T (out x in, ld out), B = x^T (in x rows, ld in), C = D = y^T (out x rows, ld out).
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_32F, static_cast<std::uint64_t>(out),
                                                     static_cast<std::uint64_t>(in), out));
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_32F, static_cast<std::uint64_t>(in),
                                                     static_cast<std::uint64_t>(rows), in));
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_32F, static_cast<std::uint64_t>(out),
                                                     static_cast<std::uint64_t>(rows), out));

    cublasLtMatmulPreference_t preference = nullptr;
    LOCKSTEP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    try {
      const std::uint64_t workspace = workspace_.bytes();
      LOCKSTEP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace, sizeof(workspace)));
      const std::uint32_t align = alignment;
      for (cublasLtMatmulPreferenceAttributes_t attribute :
           {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        LOCKSTEP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align, sizeof(align)));
      status = cublasLtMatmulAlgoGetHeuristic(lt_, plan->desc, plan->a, plan->b, plan->d, plan->d, preference, 1,
                                              &result, &returned);
    } catch (...) {
      cublasLtMatmulPreferenceDestroy(preference);
      throw;
    }
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) LOCKSTEP_CUBLAS_CHECK(status);
    plan->fused = status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (plan->fused) plan->algo = result.algo;
    return *plans_.emplace(key, std::move(plan)).first->second;
  }

  void release() noexcept {
    if (!handle_ && !lt_) return;
    // The handles belong to device_: destroy them there.
    int current = device_;
    const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device_;
    if (switched) cudaSetDevice(device_);
    plans_.clear();
    if (lt_) cublasLtDestroy(lt_);
    if (handle_) cublasDestroy(handle_);
    lt_ = nullptr;
    handle_ = nullptr;
    if (switched) cudaSetDevice(current);
  }

  int device_ = 0;
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool tf32_ = false;
  DeviceBuffer<std::byte> workspace_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace lockstep::gpu
