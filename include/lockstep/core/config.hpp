// Compiler and annotation macros shared by every lockstep header.
#pragma once

// One annotation for functions that run on host and device. Without nvcc it is
// plain `inline`, so host-only builds never see CUDA keywords.
#if defined(__CUDACC__)
#define LOCKSTEP_HOST_DEVICE __host__ __device__ inline
#else
#define LOCKSTEP_HOST_DEVICE inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LOCKSTEP_RESTRICT __restrict__
#else
#define LOCKSTEP_RESTRICT
#endif

namespace lockstep {
// Used in a primary template's static_assert so it fires only when instantiated.
template <class...>
inline constexpr bool dependent_false = false;
}  // namespace lockstep
