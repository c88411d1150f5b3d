// CUDA launches of the element-wise and row-wise functors in lockstep::kernels
// (activations, softmax, losses, optimizer steps): the same LOCKSTEP_HOST_DEVICE
// functor that host::for_each_index loops over runs here as f(i) on the device,
// so each piece of math is written once for both backends.
#pragma once

#include <algorithm>
#include <cstddef>

#include "lockstep/backend/cuda/check.cuh"

namespace lockstep::gpu {

// Grid-stride loop: any n runs with a bounded grid, and each thread handles
// several indices when n exceeds the grid.
template <class F>
__global__ void for_each_index_kernel(std::size_t n, F f) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

namespace detail {
// 65535 blocks of 256 threads is 16.7M threads, 60 times what an H200 keeps
// resident (132 SMs x 2048), so the cap never leaves the GPU idle; beyond it
// the grid-stride loop takes over. (gridDim.x could go to 2^31 - 1, but bigger
// grids only add block scheduling.)
inline constexpr unsigned kMaxBlocks = 65535;

template <class F>
void launch(cudaStream_t stream, std::size_t n, unsigned block, const F& f) {
  if (n == 0) return;
  const std::size_t blocks = std::min<std::size_t>((n + block - 1) / block, kMaxBlocks);
  for_each_index_kernel<F><<<static_cast<unsigned>(blocks), block, 0, stream>>>(n, f);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}
}  // namespace detail

// Enqueues f(i) for i in [0, n) on `stream`. f touches element i only, so the
// calls may run in any order; f is copied into the kernel's parameters.
template <class F>
void for_each_index(cudaStream_t stream, std::size_t n, const F& f) {
  detail::launch(stream, n, 256, f);
}

// Enqueues f(row) for row in [0, rows): one thread per row, each looping over
// its row (softmax, losses). Rows are few (a batch) and each is long work, so
// blocks are small: 256 rows then spread over 4 SMs instead of queueing on one.
template <class F>
void for_each_row(cudaStream_t stream, std::size_t rows, const F& f) {
  detail::launch(stream, rows, 64, f);
}

}  // namespace lockstep::gpu
