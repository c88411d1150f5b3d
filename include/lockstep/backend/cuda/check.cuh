// Checked calls into the CUDA runtime, cuBLAS/cuBLASLt and NCCL. A failure
// throws lockstep::Error naming the call, the library's own error string and
// the call site, e.g.
//   lockstep: CUDA call cudaMalloc(&p, bytes) failed at buffer.cuh:41:
//   out of memory (cudaErrorMemoryAllocation)
// Before throwing, each check clears the calling thread's last CUDA error
// (cudaGetLastError): the runtime also records a failed call's status there,
// and the next launch check on this thread (LOCKSTEP_CUDA_CHECK_LAUNCH reads
// cudaGetLastError) would otherwise report this old error as its own, even
// after the failure was caught and recovered from. A sticky error (one that
// ends the CUDA context) cannot be cleared and keeps being reported, as it must.
#pragma once

#if !defined(__CUDACC__)
#error "lockstep/backend/cuda headers need nvcc: compile this file as CUDA (or include lockstep/lockstep.hpp only)."
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "lockstep/core/error.hpp"

namespace lockstep::gpu::detail {

inline const char* base_name(const char* path) {
  const char* name = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/' || *p == '\\') name = p + 1;
  return name;
}

// The thread's last CUDA error, cleared; before a check throws.
inline void clear_last_error() noexcept { (void)cudaGetLastError(); }

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  clear_last_error();
  fail("CUDA call ", call, " failed at ", base_name(file), ":", line, ": ", cudaGetErrorString(status), " (",
       cudaGetErrorName(status), ")");
}

inline const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (is a GPU visible?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED (out of device memory)";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE (a size or leading dimension is wrong)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH (the GPU lacks a needed feature)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED (no algorithm for these arguments)";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  clear_last_error();  // a failed launch inside cuBLAS leaves its CUDA error behind
  fail("cuBLAS call ", call, " failed at ", base_name(file), ":", line, ": ", cublas_status_name(status), " (status ",
       static_cast<int>(status), ")");
}

inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  clear_last_error();  // ncclUnhandledCudaError leaves the CUDA error behind
  fail("NCCL call ", call, " failed at ", base_name(file), ":", line, ": ", ncclGetErrorString(status), " (result ",
       static_cast<int>(status), ")");
}

}  // namespace lockstep::gpu::detail

#define LOCKSTEP_CUDA_CHECK(call) ::lockstep::gpu::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define LOCKSTEP_CUBLAS_CHECK(call) ::lockstep::gpu::detail::check_cublas((call), #call, __FILE__, __LINE__)
#define LOCKSTEP_NCCL_CHECK(call) ::lockstep::gpu::detail::check_nccl((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports a bad launch configuration at its call site.
#define LOCKSTEP_CUDA_CHECK_LAUNCH() LOCKSTEP_CUDA_CHECK(cudaGetLastError())
